// Conformance with the published client's own list of the API (issue L item 7):
// @agentuity/core's dist/services/sandbox/api-reference.js names every route,
// its query parameters and its request and response shapes. Against huskd with
// the fake VMM (tests/api/conformance.sh, HUSKD_TRACE_QUERIES on), each route
// is called with every query parameter the reference gives it, and
//   - the route must be served (not the router's 404 "no route", not a 405);
//   - every query parameter must be read by the route (huskd's trace says which
//     ones it read; a parameter that only counts beside others is tried alone too);
//   - a 2xx answer must parse with the reference's response schema.
// A route, parameter or field the client gains and huskd does not serve fails
// here, so drift shows. HUSK_URL, HUSK_API_KEY, TRACE (the trace file).
// Prints PASS/FAIL lines "conformance/<route>".
import { readFileSync } from 'node:fs';
import { checks, request } from './checks.mjs';

const base = process.env.HUSK_URL;
const key = process.env.HUSK_API_KEY;
const ref = (await import(new URL('./node_modules/@agentuity/core/dist/services/sandbox/api-reference.js', import.meta.url))).default;
const { check, failed } = checks('conformance');
const req = (method, path, body) => request(base, key, method, path, body);

let traced = 0;
// The query keys huskd read since the last call.
function readKeys() {
	const lines = readFileSync(process.env.TRACE, 'utf8').split('\n').filter(Boolean);
	const fresh = lines.slice(traced);
	traced = lines.length;
	return new Set(fresh.map((l) => l.split(' ')[2]));
}

async function waitIdle(id) {
	await req('GET', `/sandbox/${id}?waitForStatus=idle&waitMs=60000`);
}

// Objects for the routes to work on.
const org = (await req('GET', '/whoami')).json?.data?.orgId;
const sbx = (await req('POST', '/sandbox', { runtime: 'base:latest', name: 'conf' })).json?.data?.sandboxId;
await waitIdle(sbx);
await req('POST', `/fs/${sbx}`, { files: [{ path: 'conf.txt', content: Buffer.from('x').toString('base64') }] });
const exec = (await req('POST', `/sandbox/${sbx}/execute`, { command: ['echo', 'x'] })).json?.data?.executionId;
await req('GET', `/sandbox/execution/${exec}?wait=1m`);
const snap = (await req('POST', `/sandbox/${sbx}/snapshot`, { name: 'conf-snap', tag: 'v1' })).json?.data?.snapshotId;
const ckpt = (await req('POST', `/sandbox/${sbx}/checkpoint`, { name: 'conf-ckpt' })).json?.data?.id;
const build = (await req('POST', '/sandbox/snapshots/build', { runtime: 'base:latest', name: 'conf-build' })).json?.data?.snapshotId;
const gzip = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

// A value for every query parameter the reference names; one it adds without a value here fails.
const sample = {
	orgId: org, name: 'conf', mode: 'interactive', projectId: 'proj_conf', status: 'idle', live: 'true',
	limit: '10', offset: '0', sort: 'created', direction: 'desc', deletedOnly: 'false',
	includeDeleted: 'true', wait: '1ms', path: 'conf.txt', format: 'tar.gz', sandboxId: sbx,
	snapshot: snap, tag: 'v1',
};

function pathOf(e) {
	const ids = { sandboxId: sbx, executionId: exec, checkpointId: ckpt, snapshotRef: 'conf-snap:v1' };
	ids.snapshotId = /finalize|upload/.test(e.path) ? build : snap;
	return e.path.replace(/\{(\w+)\}/g, (_, n) => ids[n] ?? 'x');
}

async function call(e, params) {
	const q = new URLSearchParams(params.map((p) => [p, sample[p]]));
	const path = pathOf(e) + (params.length ? `?${q}` : '');
	if (/upload/.test(e.path)) return req(e.method, path, gzip);
	const body = e.requestBody ? (e.exampleBody ?? {}) : undefined;
	return req(e.method, path, e.method === 'GET' || e.method === 'DELETE' ? undefined : body);
}

// Destructive ones last, the sandbox's own deletion at the very end.
const order = (e) => (e.method === 'DELETE' ? (e.path === '/sandbox/{sandboxId}' ? 2 : 1) : 0);
const endpoints = [...ref.endpoints].sort((a, b) => order(a) - order(b));

for (const e of endpoints) {
	await check(`${e.method} ${e.path}`, async () => {
		const params = e.queryParams.map((p) => p.name);
		const missing = params.filter((p) => !(p in sample));
		if (missing.length) return `no sample value here for query parameter(s) ${missing.join(', ')}: add one`;
		readKeys();
		const r = await call(e, params);
		if (r.status === 405 || (r.status === 404 && r.json?.code === 'NOT_FOUND' && /^no route/.test(r.json?.message ?? ''))) return `not served: ${r.status} ${r.text.slice(0, 160)}`;
		const read = readKeys();
		// A parameter read only without the others (an alternative, such as lineage's name and snapshot): alone.
		for (const p of params.filter((x) => !read.has(x))) {
			const needed = params.filter((x) => e.queryParams.find((y) => y.name === x)?.required);
			await call(e, [...new Set([...needed, p])]);
			for (const k of readKeys()) read.add(k);
		}
		const unread = params.filter((p) => !read.has(p));
		if (unread.length) return `query parameter(s) ${unread.join(', ')} not read by huskd (${r.status})`;
		const schema = e.responseFields?.schema;
		if (schema && r.status >= 200 && r.status < 300) {
			const got = schema.safeParse(r.json?.data);
			if (!got.success) return `the answer does not parse with the reference's schema: ${got.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
		}
	});
}
process.exit(failed() ? 1 : 0);
