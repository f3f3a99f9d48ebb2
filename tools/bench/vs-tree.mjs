// create -> first exec through several huskds, alternating (tools/bench/vs-tree.sh):
// arguments NAME=URL; prints "NAME median min max rounds" for each.
// The published client, as a user would: create base:latest 256Mi, execute true, destroy.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const req = createRequire(new URL('../../tests/api/client/package.json', import.meta.url));
const { SandboxClient } = await import(req.resolve('@agentuity/core'));
const rounds = Number(process.env.HUSK_VS_ROUNDS ?? 10);
const targets = process.argv.slice(2).map((a) => {
	const [name, url] = a.split('=');
	return { name, client: new SandboxClient({ url, apiKey: process.env.HUSK_API_KEY }), ms: [] };
});

async function one(t) {
	const t0 = performance.now();
	const sb = await t.client.create({ runtime: 'base:latest', resources: { memory: '256Mi' } });
	const ex = await sb.execute({ command: ['true'] });
	const ms = performance.now() - t0;
	if (ex.exitCode !== 0) throw new Error(`${t.name}: true: exit ${ex.exitCode} (${ex.status})`);
	await sb.destroy();
	return ms;
}

// The default huskd makes its template at the shape's first create, in the background: one
// create, then its log's line says the template is ready (HUSK_VS_LOG), before any round
// runs (the making would slow the rounds beside it). At most 5 minutes.
await one(targets.find((t) => t.name === 'default'));
for (let i = 0; ; i++) {
	const log = readFileSync(process.env.HUSK_VS_LOG, 'utf8');
	if (/template of base:latest \(256 MiB, 1 vCPUs\) ready/.test(log)) break;
	const failed = log.match(/template of .* not made: .*/);
	if (failed || i > 3000) {
		console.error(`vs-tree: ${failed ? failed[0] : 'no template after 5 minutes'}: the default huskd boots`);
		break;
	}
	await new Promise((r) => setTimeout(r, 100));
}
// Each round starts one further along: no huskd always follows the same one (whose
// sandbox's teardown, or the spare layer it makes, would run beside its create).
for (let i = 0; i < rounds; i++)
	for (let j = 0; j < targets.length; j++) {
		const t = targets[(i + j) % targets.length];
		t.ms.push(await one(t));
		console.error(`vs-tree: round ${i + 1}: ${t.name} ${t.ms.at(-1).toFixed(0)} ms`);
	}
const median = (a) => {
	const s = [...a].sort((x, y) => x - y);
	return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
for (const t of targets)
	console.log(`${t.name} ${median(t.ms).toFixed(1)} ${Math.min(...t.ms).toFixed(1)} ${Math.max(...t.ms).toFixed(1)} ${rounds}`);
