// Template benchmark (issue J) with the published client: create -> first
// exec of base:latest, 256Mi, N times (HUSK_BENCH_TEMPLATE_RUNS, default 5),
// each sandbox destroyed before the next. MODE=cold: huskd runs with
// --templates off, every create boots. MODE=template: the first create makes
// the shape's template (its own figure is not counted), the bench waits for
// it (the huskd log says ready), then the N creates restore it; then
// HUSK_BENCH_CHILDREN (20) held at once, whose VMMs' PSS the shell sums.
// Prints key=value lines for tools/bench/templates.sh.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const req = createRequire(new URL('../../tests/api/client/package.json', import.meta.url));
const { SandboxClient } = await import(req.resolve('@agentuity/core'));
const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
const mode = process.env.MODE;
const runs = Number(process.env.HUSK_BENCH_TEMPLATE_RUNS ?? 5);
const children = Number(process.env.HUSK_BENCH_CHILDREN ?? 20);
const now = () => performance.now();
const out = (k, v) => console.log(`${k}=${typeof v === 'number' ? v.toFixed(1) : v}`);
const pct = (a, p) => {
	const s = [...a].sort((x, y) => x - y);
	return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
};
const shape = { runtime: 'base:latest', resources: { memory: '256Mi' } };

async function once() {
	const t0 = now();
	const sb = await client.create(shape);
	const ex = await sb.execute({ command: ['true'] });
	if (ex.exitCode !== 0) throw new Error(`true: exit ${ex.exitCode} (${ex.status})`);
	return { ms: now() - t0, sb };
}

if (mode === 'template') {
	const first = await once();
	await first.sb.destroy();
	// The template is made in the background; its log line is the event (a hang guard bounds it).
	for (let i = 0; !/template of base:latest \(256 MiB, 1 vCPUs\) ready/.test(readFileSync(process.env.HUSKD_LOG, 'utf8')); i++) {
		if (i > 3000) throw new Error('the template was not made; see the huskd log');
		await new Promise((r) => setTimeout(r, 100));
	}
}
const t = [];
for (let i = 0; i < runs; i++) {
	const { ms, sb } = await once();
	t.push(ms);
	await sb.destroy();
}
out(`${mode}_first_exec_p50_ms`, pct(t, 50));
out(`${mode}_first_exec_max_ms`, Math.max(...t));
if (mode === 'template') {
	// N children held at once; the shell reads their VMMs' memory, then says "done" on stdin.
	const held = [];
	for (let i = 0; i < children; i++) held.push((await once()).sb);
	out('children_held', held.length);
	await new Promise((r) => process.stdin.once('data', r));
	await Promise.all(held.map((s) => s.destroy()));
}
