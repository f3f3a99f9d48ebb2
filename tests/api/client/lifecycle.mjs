// Steps of the restart and VMM-kill tests (tests/api/e2e.sh drives them):
//   create N          → makes N sandboxes, each with a file; prints their ids
//   alive ID...       → each still runs commands and has its file (PASS/FAIL lines, NAME from $T)
//   failed ID         → the sandbox is failed, with a lifecycle:failed event saying why
import { SandboxClient } from '@agentuity/core';
import { request } from './checks.mjs';

const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
const [step, ...args] = process.argv.slice(2);
const name = process.env.TEST_NAME ?? step;

async function out(url) {
	return (await (await fetch(url)).text()).trim();
}

try {
	if (step === 'create') {
		const ids = [];
		for (let i = 0; i < Number(args[0]); i++) {
			const sb = await client.create({ runtime: 'base:latest' });
			await sb.writeFiles([{ path: 'mark.txt', content: Buffer.from(`mark-${i}`) }]);
			ids.push(sb.id);
		}
		console.log(ids.join(' '));
	} else if (step === 'alive') {
		for (const id of args) {
			const sb = await client.connect(id);
			const ex = await sb.execute({ command: ['cat', 'mark.txt'] });
			const got = ex.stdoutStreamUrl ? await out(ex.stdoutStreamUrl) : '';
			if (ex.exitCode !== 0 || !/^mark-\d$/.test(got)) throw new Error(`${id}: exit ${ex.exitCode}, read ${JSON.stringify(got)}`);
		}
		console.log(`PASS api/${name}`);
	} else if (step === 'failed') {
		// huskd's long-poll: answered once the VMM's end is seen (the bound only ends a hang).
		for (let i = 0; i < 10; i++) {
			const w = await request(process.env.HUSK_URL, process.env.HUSK_API_KEY, 'GET', `/sandbox/${args[0]}?waitForStatus=failed&waitMs=60000`);
			if (w.json?.data?.status === 'failed') break;
		}
		const info = await client.get(args[0]);
		const ev = await client.listEvents(args[0]);
		const f = (ev.events ?? []).find((e) => e.type === 'lifecycle:failed');
		if (info.status !== 'failed' || !f?.event?.reason) throw new Error(`status ${info.status}, failed event ${JSON.stringify(f)}`);
		console.log(`PASS api/${name} (${f.event.reason})`);
	}
} catch (e) {
	console.log(`FAIL api/${name}: ${e?.message ?? e}`);
	process.exit(1);
}
