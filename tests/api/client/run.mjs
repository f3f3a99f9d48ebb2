// End-to-end tests of huskd with the unmodified published client
// (@agentuity/core): prints PASS/FAIL lines. HUSK_URL and HUSK_API_KEY say
// where huskd is.
import { Writable } from 'node:stream';
import { SandboxClient } from '@agentuity/core';

const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
let failed = 0;

async function check(name, fn) {
	try {
		const why = await fn();
		if (why) {
			failed++;
			console.log(`FAIL client/${name}: ${why}`);
		} else {
			console.log(`PASS client/${name}`);
		}
	} catch (e) {
		failed++;
		console.log(`FAIL client/${name}: ${e?.name}: ${e?.message}`);
	}
}

function collector() {
	const chunks = [];
	const w = new Writable({
		write(chunk, _enc, done) {
			chunks.push(Buffer.from(chunk));
			done();
		},
	});
	w.text = () => Buffer.concat(chunks).toString();
	return w;
}

await check('run_python', async () => {
	const r = await client.run({
		runtime: 'python:3.13',
		command: { exec: ['python3', '-c', 'print(sum([1,2,3]))'] },
	});
	if (r.exitCode !== 0) return `exit code ${r.exitCode}`;
	if (r.stdout.trim() !== '6') return `stdout ${JSON.stringify(r.stdout)}`;
});

await check('run_with_files_and_piped_stdout', async () => {
	const out = collector();
	const r = await client.run(
		{
			runtime: 'python:3.13',
			command: {
				exec: ['python3', 'main.py'],
				files: [{ path: 'main.py', content: Buffer.from('import sys\nprint("from a file")\nsys.exit(3)\n') }],
			},
		},
		{ stdout: out }
	);
	if (r.exitCode !== 3) return `exit code ${r.exitCode}, want 3`;
	if (out.text().trim() !== 'from a file') return `piped stdout ${JSON.stringify(out.text())}`;
});

process.exit(failed ? 1 : 0);
