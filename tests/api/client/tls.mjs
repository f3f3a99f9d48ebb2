// The published client over huskd's HTTPS (tests/api/tls.sh): a member key
// made over HTTPS creates a sandbox, runs a command and reads its output
// through the signed https stream URL; plain HTTP to the port gets no answer.
// HUSK_URL (https://...), HUSK_API_KEY (the operator's), NODE_EXTRA_CA_CERTS.
import { connect } from 'node:net';
import { SandboxClient } from '@agentuity/core';
import { checks } from './checks.mjs';

const base = process.env.HUSK_URL;
const { check, failed } = checks('tls');

let member;
await check('key_made_over_https', async () => {
	const r = await fetch(`${base}/keys`, {
		method: 'POST',
		headers: { Authorization: `Bearer ${process.env.HUSK_API_KEY}`, 'Content-Type': 'application/json' },
		body: JSON.stringify({ org: 'tls-org' }),
	});
	member = (await r.json())?.data?.key;
	return r.status === 201 && member ? '' : `${r.status}`;
});
await check('published_client_over_https', async () => {
	const client = new SandboxClient({ url: base, apiKey: member });
	const sb = await client.create({ runtime: 'base:latest' });
	const ex = await sb.execute({ command: ['echo', 'over tls'] });
	const out = await (await fetch(ex.stdoutStreamUrl)).text();
	await sb.destroy();
	if (!ex.stdoutStreamUrl.startsWith('https://')) return `stream url ${ex.stdoutStreamUrl}`;
	return ex.exitCode === 0 && out === 'over tls\n' ? '' : `exit ${ex.exitCode}, ${JSON.stringify(out)}`;
});
await check('plain_http_gets_no_answer', async () => {
	const u = new URL(base);
	const got = await new Promise((resolve) => {
		const s = connect(Number(u.port), u.hostname, () => s.write('GET /whoami HTTP/1.1\r\nHost: x\r\n\r\n'));
		let data = '';
		s.on('data', (d) => (data += d));
		s.on('close', () => resolve(data));
		s.on('error', () => resolve(data));
	});
	return got.startsWith('HTTP/') ? `answered: ${JSON.stringify(got.slice(0, 80))}` : '';
});
process.exit(failed() ? 1 : 0);
