// E2B's sandbox.getHost(port), driven by the unmodified `e2b` SDK on real
// KVM (tests/api/net_serve.sh: huskd --public-domain sandboxes.test, so a
// sandbox's host is "<port>-<id>.sandboxes.test", sent to huskd as the Host
// header: no DNS). Two servers in one sandbox, each at its own host; a port
// nothing serves answers 502; with allowPublicTraffic off the sandbox's
// trafficAccessToken is needed. HUSK_URL, HUSK_API_KEY, E2B_TEMPLATE.
// Prints PASS/FAIL lines "e2b_host/<name>".
import { Sandbox } from 'e2b';
import http from 'node:http';
import { checks } from './checks.mjs';

const base = new URL(process.env.HUSK_URL);
process.env.E2B_API_URL = `${base.origin}/e2b`;
process.env.E2B_SANDBOX_URL = `${base.origin}/e2b/envd`;
process.env.E2B_API_KEY = process.env.HUSK_API_KEY;
const template = process.env.E2B_TEMPLATE || 'node:lts';
const { check, failed } = checks('e2b_host');

// GET /hi from host at huskd's own address, on a connection of its own (huskd
// tunnels a connection to the port its first request named): { status, body }.
function get(host, headers = {}) {
	return new Promise((resolve, reject) => {
		const q = http.request({ host: base.hostname, port: base.port, path: '/hi', agent: false, headers: { host, ...headers } }, (res) => {
			let body = '';
			res.setEncoding('utf8');
			res.on('data', (d) => (body += d));
			res.on('end', () => resolve({ status: res.statusCode, body }));
		});
		q.on('error', reject);
		q.end();
	});
}

// A server on port answering "port <port>", started as E2B programs do (a
// background command: it outlives a pause, as on E2B), returning once it listens.
async function serve(sbx, port) {
	const js = `require("http").createServer((q, r) => r.end("port ${port}\\n")).listen(${port}, "0.0.0.0", () => require("fs").writeFileSync("/tmp/up-${port}", ""))`;
	await sbx.files.write(`/tmp/srv-${port}.js`, js);
	await sbx.commands.run(`node /tmp/srv-${port}.js`, { background: true });
	await sbx.commands.run(`i=0; while [ ! -e /tmp/up-${port} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; test -e /tmp/up-${port}`);
}

let sbx;
await check('create', async () => {
	sbx = await Sandbox.create(template, { timeoutMs: 600_000 });
});
if (!sbx) process.exit(1);

await check('get_host_serves_each_port', async () => {
	await serve(sbx, 3000);
	await serve(sbx, 8081);
	const host = sbx.getHost(3000);
	if (host !== `3000-${sbx.sandboxId}.sandboxes.test`) return `getHost(3000) gave ${host}`;
	const a = await get(host), b = await get(sbx.getHost(8081));
	if (a.status !== 200 || a.body !== 'port 3000\n') return `3000: ${a.status} ${a.body}`;
	if (b.status !== 200 || b.body !== 'port 8081\n') return `8081: ${b.status} ${b.body}`;
});

await check('get_host_nothing_listening_502', async () => {
	const r = await get(sbx.getHost(4000));
	if (r.status !== 502 || !/port 4000/.test(r.body)) return `${r.status} ${r.body}`;
});

await check('get_host_after_pause_and_connect', async () => {
	await sbx.pause();
	const s = await Sandbox.connect(sbx.sandboxId);
	// The servers (background commands) outlive the pause; the new VMM serves their ports again.
	const r = await get(s.getHost(8081));
	if (r.status !== 200 || r.body !== 'port 8081\n') return `${r.status} ${r.body}`;
});

await check('kill', async () => {
	await sbx.kill();
});

await check('traffic_token_needed_without_public_traffic', async () => {
	const s = await Sandbox.create(template, { network: { allowPublicTraffic: false } });
	try {
		if (!/^[0-9a-f]{32}$/.test(s.trafficAccessToken ?? '')) return `trafficAccessToken ${s.trafficAccessToken}`;
		await serve(s, 3000);
		const no = await get(s.getHost(3000));
		const yes = await get(s.getHost(3000), { 'e2b-traffic-access-token': s.trafficAccessToken });
		if (no.status !== 401) return `without the token: ${no.status} ${no.body}`;
		if (yes.status !== 200 || yes.body !== 'port 3000\n') return `with it: ${yes.status} ${yes.body}`;
	} finally {
		await s.kill();
	}
});

process.exit(failed() ? 1 : 0);
