// Runtime benchmark with the published client (@agentuity/core): for every
// runtime huskd lists, create -> first exec (`true`), one sandbox at a time,
// with the runtime's own memory requirement. Prints one line per runtime:
// name, p50 ms, max ms, image bytes, file system bytes (from the built
// catalog). HUSK_URL, HUSK_API_KEY: where huskd is; HUSK_BENCH_RUNTIME_RUNS:
// runs per runtime (3).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// The client is installed once, for the API tests (make client).
const req = createRequire(new URL('../../tests/api/client/package.json', import.meta.url));
const { SandboxClient } = await import(req.resolve('@agentuity/core'));

const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
const runs = Number(process.env.HUSK_BENCH_RUNTIME_RUNS ?? 3);
const { runtimes } = await client.listRuntimes({ limit: 100 });
const built = JSON.parse(readFileSync(new URL('../../build/images/runtimes/catalog.json', import.meta.url)));
const image = Object.fromEntries(built.runtimes.map((r) => [r.name, r.image ?? {}]));
for (const rt of runtimes) {
	const times = [];
	for (let i = 0; i < runs; i++) {
		const t0 = performance.now();
		const sb = await client.create({ runtime: rt.name, resources: { memory: rt.requirements?.memory ?? '512Mi' } });
		const ex = await sb.execute({ command: ['true'] });
		times.push(performance.now() - t0);
		await sb.destroy();
		if (ex.exitCode !== 0) throw new Error(`${rt.name}: true exited ${ex.exitCode} (${ex.status})`);
	}
	times.sort((a, b) => a - b);
	const img = image[rt.name] ?? {};
	console.log(`${rt.name} ${times[Math.floor(times.length / 2)].toFixed(0)} ${times[times.length - 1].toFixed(0)} ${img.size ?? 0} ${img.virtualSize ?? 0}`);
}
