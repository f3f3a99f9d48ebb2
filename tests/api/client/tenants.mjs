// Orgs and API keys (issue I, item 1) against huskd with fake VMMs: every
// object of one org is invisible to another (404, as if it did not exist),
// roles hold, keys are stored hashed, public snapshots cross orgs read-only.
// HUSK_URL, HUSK_API_KEY (an admin key of the default org, the operator's),
// HUSK_CLI (the husk CLI), HUSK_STATE (huskd's state folder), HUSK_KEYS (a
// file carrying keys from phase 1 to phase 2, which runs after a restart).
// Prints PASS/FAIL lines "tenants/<name>".
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { SandboxClient } from '@agentuity/core';
import { checks, request } from './checks.mjs';

const base = process.env.HUSK_URL;
const operator = process.env.HUSK_API_KEY;
const phase = process.argv[2] ?? '1';
const { check, failed } = checks('tenants');
const req = (key, method, path, body) => request(base, key, method, path, body);
const want = (r, status, code) => (r.status === status && (!code || r.json?.code === code) ? '' : `got ${r.status} ${r.text.slice(0, 240)}, want ${status} ${code ?? ''}`);

// The CLI with a key: [status, stdout, stderr].
function cli(key, ...args) {
	try {
		const out = execFileSync(process.env.HUSK_CLI, args, { env: { ...process.env, HUSK_URL: base, HUSK_API_KEY: key }, stdio: ['ignore', 'pipe', 'pipe'] });
		return [0, out.toString(), ''];
	} catch (e) {
		return [e.status ?? -1, e.stdout?.toString() ?? '', e.stderr?.toString() ?? ''];
	}
}

async function waitIdle(key, id) {
	const r = await req(key, 'GET', `/sandbox/${id}?waitForStatus=idle&waitMs=60000`);
	if (r.json?.data?.status !== 'idle') throw new Error(`sandbox ${id} did not turn idle: ${r.text.slice(0, 200)}`);
}

if (phase === '4') {
	// huskd runs with --kms-command: a toy KMS that logs "OP ORG" to KMS_LOG.
	const log = () => (existsSync(process.env.KMS_LOG) ? readFileSync(process.env.KMS_LOG, 'utf8') : '');
	const me = (await req(operator, 'GET', '/whoami')).json?.data;
	const sb = await new SandboxClient({ url: base, apiKey: operator }).create({ runtime: 'base:latest' });
	await waitIdle(operator, sb.id);
	await check('kms_wraps_a_pause_key', async () => {
		const r = await req(operator, 'POST', `/sandbox/${sb.id}/pause`);
		return want(r, 200) || (log().includes(`wrap ${me.orgId}`) ? '' : `KMS log: ${log()}`);
	});
	await check('kms_unwraps_at_resume', async () => {
		const r = await req(operator, 'POST', `/sandbox/${sb.id}/resume`);
		return want(r, 200) || (log().includes(`unwrap ${me.orgId}`) ? '' : `KMS log: ${log()}`);
	});
	await check('kms_delete_shreds', async () => {
		const p = await req(operator, 'POST', `/sandbox/${sb.id}/pause`);
		const [s, out, err] = cli(operator, 'key', 'shred-org', 'local');
		const r = await req(operator, 'POST', `/sandbox/${sb.id}/resume`);
		await req(operator, 'DELETE', `/sandbox/${sb.id}`);
		if (want(p, 200) || s !== 0) return `pause ${p.status}; shred-org exit ${s}: ${out} ${err}`;
		return log().includes(`delete ${me.orgId}`) && r.status >= 400 && /has been deleted/.test(r.text) ? '' : `resume ${r.status} ${r.text.slice(0, 300)}; KMS log: ${log()}`;
	});
	process.exit(failed() ? 1 : 0);
}

if (phase === '3') {
	// huskd runs with --key-concurrency 1 --key-rate 10/1h.
	const k = JSON.parse(readFileSync(process.env.HUSK_KEYS, 'utf8'));
	await check('key_concurrency_limited', async () => {
		const { connect } = await import('node:net');
		const u = new URL(base);
		// A request whose body has not come yet is in flight: it holds the key's one place.
		const held = connect(Number(u.port), u.hostname);
		await new Promise((res) => held.on('connect', res));
		held.write(`POST /sandbox/${k.acmeSandbox}/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${k.acmeMember}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`);
		// Until huskd has read that head, a second request may still get in: wait for the refusal.
		let second;
		for (let i = 0; i < 300; i++) {
			second = await req(k.acmeMember, 'GET', '/whoami');
			if (second.status !== 200) break;
			await new Promise((res) => setTimeout(res, 100));
		}
		const retry = second.status;
		held.destroy();
		// Once huskd has seen that connection go, the key has its place back.
		let after;
		for (let i = 0; i < 300; i++) {
			after = await req(k.acmeMember, 'GET', '/whoami');
			if (after.status === 200) break;
			await new Promise((res) => setTimeout(res, 100));
		}
		return retry === 429 && second.json?.code === 'TOO_MANY_REQUESTS' && second.json.message.includes('in flight') && after.status === 200 ? '' : `second ${second.status} ${second.text.slice(0, 200)}, after ${after.status}`;
	});
	await check('key_rate_limited_with_retry_after', async () => {
		const got = [];
		for (let i = 0; i < 11; i++) {
			const r = await fetch(`${base}/whoami`, { headers: { Authorization: `Bearer ${k.betaMember}` } });
			got.push([r.status, r.headers.get('retry-after'), await r.text()]);
		}
		const last = got[10];
		const ra = Number(last[1]);
		// 10 an hour: a bucket of 10, one more every 6 minutes.
		return got.slice(0, 10).every((g) => g[0] === 200) && last[0] === 429 && ra > 60 && ra <= 360 && last[2].includes('key-rate') ? '' : JSON.stringify(got.map((g) => g.slice(0, 2)));
	});
	await check('other_keys_have_their_own_limits', async () => want(await req(operator, 'GET', '/whoami'), 200));
	process.exit(failed() ? 1 : 0);
}

if (phase === '2') {
	const k = JSON.parse(readFileSync(process.env.HUSK_KEYS, 'utf8'));
	await check('key_kept_after_restart', async () => want(await req(k.acmeMember, 'GET', `/sandbox/${k.acmeSandbox}`), 200));
	await check('revoked_kept_after_restart', async () => want(await req(k.revoked, 'GET', '/sandbox'), 401, 'UNAUTHORIZED'));
	await check('scope_kept_after_restart', async () => want(await req(k.betaMember, 'GET', `/sandbox/${k.acmeSandbox}`), 404, 'SANDBOX_NOT_FOUND'));
	await check('stream_url_kept_after_restart', async () => {
		const r = await fetch(k.streamUrl);
		return r.status === 200 && (await r.text()) === 'acme\n' ? '' : `${r.status}`;
	});
	await check('stream_url_expires', async () => {
		// huskd runs with --stream-url-ttl 1s now: wait for the clock to pass the URL's expiry.
		const e = await req(k.acmeMember, 'POST', `/sandbox/${k.acmeSandbox}/execute`, { command: ['echo', 'later'] });
		const url = e.json?.data?.stdoutStreamUrl ?? '';
		const exp = Number(/exp=(\d+)/.exec(url)?.[1]);
		if (!exp || exp > Date.now() / 1000 + 60) return `url ${url}: not a 1 s URL`;
		while (Date.now() / 1000 <= exp + 1) await new Promise((res) => setTimeout(res, 200));
		const r = await fetch(url);
		const body = await r.text();
		return r.status === 403 && body.includes('expired') ? '' : `${r.status} ${body.slice(0, 200)}`;
	});
	await check('org_of_record_kept', async () => {
		const r = await req(k.acmeMember, 'GET', `/sandbox/${k.acmeSandbox}`);
		return r.json?.data?.org?.name === 'acme' ? '' : `org ${JSON.stringify(r.json?.data?.org)}`;
	});
	for (const id of k.cleanup) await req(id.key, 'DELETE', `/sandbox/${id.id}`);
	process.exit(failed() ? 1 : 0);
}

// ---- keys ----
let acmeAdmin, acmeMember, acmeReader, betaMember, acmeOrgId;
await check('key_create_prints_key_last', async () => {
	const [s, out, err] = cli(operator, 'key', 'create', '--org', 'acme', '--role', 'admin', '--name', 'acme ops');
	if (s !== 0) return `exit ${s}: ${err}`;
	const lines = out.trim().split('\n');
	acmeAdmin = lines[lines.length - 1];
	if (!/^husk_[a-z2-7]{24}$/.test(acmeAdmin)) return `last line ${JSON.stringify(acmeAdmin)}`;
	if (!lines[0].includes('admin of org acme')) return `first line ${lines[0]}`;
});
await check('key_create_json', async () => {
	const [s, out, err] = cli(acmeAdmin, 'key', 'create', '--json');
	if (s !== 0) return `exit ${s}: ${err}`;
	const j = JSON.parse(out);
	acmeMember = j.key;
	acmeOrgId = j.orgId;
	if (j.role !== 'member' || j.orgName !== 'acme' || !/^org_/.test(j.orgId) || !/^key_/.test(j.id)) return out;
});
await check('org_admin_makes_own_org_keys', async () => {
	const r = await req(acmeAdmin, 'POST', '/keys', { role: 'read-only' });
	acmeReader = r.json?.data?.key;
	return want(r, 201);
});
await check('org_admin_not_other_orgs', async () => want(await req(acmeAdmin, 'POST', '/keys', { org: 'beta' }), 403, 'FORBIDDEN'));
await check('member_makes_no_keys', async () => want(await req(acmeMember, 'POST', '/keys', {}), 403, 'FORBIDDEN'));
await check('bad_role_and_org_refused', async () => {
	const a = await req(operator, 'POST', '/keys', { org: 'beta', role: 'root' });
	const b = await req(operator, 'POST', '/keys', { org: 'Not An Org!' });
	return want(a, 400, 'BAD_REQUEST') || want(b, 400, 'BAD_REQUEST') || (a.json.message.includes('root') ? '' : a.json.message);
});
await check('operator_makes_other_orgs', async () => {
	const r = await req(operator, 'POST', '/keys', { org: 'beta' });
	betaMember = r.json?.data?.key;
	return want(r, 201);
});
await check('keys_stored_hashed', async () => {
	// The database and its WAL hold no key text, only hashes.
	const files = readdirSync(process.env.HUSK_STATE).filter((f) => f.startsWith('huskd.db'));
	const all = Buffer.concat(files.map((f) => readFileSync(`${process.env.HUSK_STATE}/${f}`)));
	for (const k of [acmeAdmin, acmeMember, acmeReader, betaMember, operator]) if (all.includes(k)) return `key ${k.slice(0, 9)}... is in the database`;
	return files.length ? '' : 'no database files';
});
await check('whoami', async () => {
	const r = await req(acmeReader, 'GET', '/whoami');
	return r.json?.data?.orgName === 'acme' && r.json.data.role === 'read-only' ? '' : r.text;
});
await check('key_list_own_org', async () => {
	const r = await req(acmeAdmin, 'GET', '/keys');
	const orgs = new Set(r.json?.data?.keys?.map((k) => k.orgName));
	const leaked = JSON.stringify(r.json).includes('husk_');
	return r.json?.data?.keys?.length === 3 && orgs.size === 1 && orgs.has('acme') && !leaked ? '' : r.text;
});
await check('operator_lists_every_org', async () => {
	const r = await req(operator, 'GET', '/keys');
	const orgs = new Set(r.json?.data?.keys?.map((k) => k.orgName));
	return orgs.has('acme') && orgs.has('beta') && orgs.has('local') ? '' : r.text;
});

// ---- sandboxes ----
const acme = new SandboxClient({ url: base, apiKey: acmeMember });
const beta = new SandboxClient({ url: base, apiKey: betaMember });
const acmeSb = await acme.create({ runtime: 'base:latest' });
await waitIdle(acmeMember, acmeSb.id);
const betaSb = await beta.create({ runtime: 'base:latest' });
await waitIdle(betaMember, betaSb.id);
const ex = await acmeSb.execute({ command: ['echo', 'acme'] });

await check('published_client_in_its_org', async () => {
	const info = await acme.get(acmeSb.id);
	return info.org?.name === 'acme' && info.org?.id === acmeOrgId ? '' : JSON.stringify(info.org);
});
await check('published_client_orgId_option', async () => {
	const withOrg = new SandboxClient({ url: base, apiKey: acmeMember, orgId: acmeOrgId });
	const info = await withOrg.get(acmeSb.id);
	return info.sandboxId === acmeSb.id ? '' : JSON.stringify(info);
});
await check('orgId_of_another_org_refused', async () => want(await req(acmeMember, 'GET', `/sandbox?orgId=${encodeURIComponent('beta')}`), 403, 'FORBIDDEN'));
await check('other_org_sandbox_not_found', async () => {
	try {
		await beta.get(acmeSb.id);
		return 'beta read acme sandbox';
	} catch (e) {
		return e?.name === 'NotFoundError' || /not found/i.test(e?.message) ? '' : `${e?.name}: ${e?.message}`;
	}
});
// Every route of huskd's own table (huskd --print-routes), so a new route is tried
// without a new test: another org's ids answer 404, admin routes 403 to a member,
// and a route that scopes its answer itself must be one checked below by name.
const callerScoped = new Set([
	'POST /sandbox', 'GET /sandbox', 'GET /sandbox/runtimes', 'GET /sandbox/stats', 'GET /services/stats/:org',
	'GET /sandbox/snapshots', 'GET /sandbox/snapshots/lineage', 'POST /sandbox/snapshots/build',
	'GET /sandbox/snapshots/:snap', 'PATCH /sandbox/snapshots/:snap', 'DELETE /sandbox/snapshots/:snap', 'GET /whoami',
	'GET /audit', 'GET /audit/verify', 'POST /streams', 'PUT /streams/:id', 'GET /cli/sandbox',
	'GET /cli/sandbox/:id', 'POST /e2b/v2/sandboxes', 'GET /e2b/v2/sandboxes', 'GET /e2b/sandboxes/:id',
	'DELETE /e2b/sandboxes/:id', 'POST /e2b/sandboxes/:id/timeout', 'POST /e2b/sandboxes/:id/pause',
	'POST /e2b/v2/sandboxes/:id/connect', 'POST /e2b/sandboxes/:id/snapshots', 'GET /e2b/snapshots',
	'DELETE /e2b/templates/:id', 'POST /e2b/sandboxes/:id/fork', 'PUT /e2b/sandboxes/:id/network',
	'GET /e2b/sandboxes/:id/metrics',
]);
// E2B's API (API.md §11) with another org's key (X-API-Key): 404 for every
// sandbox route, and its list shows the key's org only; envd needs the
// sandbox's own token, which only its org can read.
await check('e2b_scoped', async () => {
	const e2b = async (k, method, path, body) => {
		const r = await fetch(`${base}/e2b${path}`, { method, headers: { 'X-API-Key': k, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
		return { status: r.status, text: await r.text() };
	};
	for (const [m, p, b] of [['GET', `/sandboxes/${acmeSb.id}`], ['DELETE', `/sandboxes/${acmeSb.id}`], ['POST', `/sandboxes/${acmeSb.id}/timeout`, { timeout: 1 }], ['POST', `/sandboxes/${acmeSb.id}/pause`, {}], ['POST', `/v2/sandboxes/${acmeSb.id}/connect`, {}], ['POST', `/sandboxes/${acmeSb.id}/snapshots`, {}], ['POST', `/sandboxes/${acmeSb.id}/fork`, {}], ['PUT', `/sandboxes/${acmeSb.id}/network`, {}], ['GET', `/sandboxes/${acmeSb.id}/metrics`]]) {
		const r = await e2b(betaMember, m, p, b);
		if (r.status !== 404 || JSON.parse(r.text).code !== 404) return `${m} ${p} with beta's key: ${r.status} ${r.text.slice(0, 160)}`;
	}
	const list = JSON.parse((await e2b(betaMember, 'GET', '/v2/sandboxes')).text).map((x) => x.sandboxID);
	if (list.includes(acmeSb.id) || !list.includes(betaSb.id)) return `beta's E2B list: ${list}`;
	const own = JSON.parse((await e2b(acmeMember, 'GET', `/sandboxes/${acmeSb.id}`)).text);
	const envd = (tok) => fetch(`${base}/e2b/envd/process.Process/List`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': acmeSb.id, 'X-Access-Token': tok }, body: '{}' });
	const betaTok = JSON.parse((await e2b(betaMember, 'GET', `/sandboxes/${betaSb.id}`)).text).envdAccessToken;
	const [ok, bad] = [await envd(own.envdAccessToken), await envd(betaTok)];
	return ok.status === 200 && bad.status === 401 ? '' : `envd with acme's token ${ok.status}, with beta's ${bad.status}`;
});
// The reference CLI's lookups (API.md §5.12) see the key's own org only.
await check('cli_lookups_scoped', async () => {
	const mine = (await req(acmeMember, 'GET', '/cli/sandbox')).json?.data?.sandboxes?.map((x) => x.id) ?? [];
	const own = await req(acmeMember, 'GET', `/cli/sandbox/${acmeSb.id}`);
	const other = await req(betaMember, 'GET', `/cli/sandbox/${acmeSb.id}`);
	if (!mine.includes(acmeSb.id) || mine.includes(betaSb.id)) return `acme's list ${mine}`;
	if (own.status !== 200 || own.json?.data?.orgId !== acmeOrgId || own.json?.data?.id !== acmeSb.id) return `resolve own: ${own.status} ${own.text.slice(0, 200)}`;
	return other.status === 404 && other.json?.code === 'NOT_FOUND' ? '' : `resolve another org's: ${other.status} ${other.text.slice(0, 200)}`;
});
// User streams (POST /streams) are their org's: another org's key cannot write,
// read (without the signed URL) or feed one to a command.
await check('streams_scoped', async () => {
	const s = (await req(acmeMember, 'POST', '/streams', { name: 'acme-in' })).json?.id;
	const bput = await fetch(`${base}/streams/${s}`, { method: 'PUT', headers: { Authorization: `Bearer ${betaMember}` }, body: 'x' });
	const bget = await fetch(`${base}/streams/${s}`, { headers: { Authorization: `Bearer ${betaMember}` } });
	const bexec = await req(betaMember, 'POST', `/sandbox/${betaSb.id}/execute`, { command: ['cat'], stream: { stdin: s } });
	const aput = await fetch(`${base}/streams/${s}`, { method: 'PUT', headers: { Authorization: `Bearer ${acmeMember}` }, body: 'mine' });
	const aget = await fetch(`${base}/streams/${s}`, { headers: { Authorization: `Bearer ${acmeMember}` } });
	const text = await aget.text();
	if (!s || bput.status !== 404 || bget.status !== 403 || bexec.status !== 400) return `beta: put ${bput.status}, get ${bget.status}, execute ${bexec.status}`;
	return aput.status === 200 && aget.status === 200 && text === 'mine' ? '' : `acme: put ${aput.status}, get ${aget.status} ${text}`;
});
await check('other_org_every_route_404', async () => {
	const routes = execFileSync(process.env.HUSKD_BIN, ['--print-routes']).toString().trim().split('\n').map((l) => JSON.parse(l));
	const build = (await req(acmeMember, 'POST', '/sandbox/snapshots/build', { runtime: 'base:latest', name: 'acme-build' })).json?.data?.snapshotId;
	const ids = { sandbox: acmeSb.id, execution: ex.executionId, build };
	let tried = 0;
	for (const rt of routes) {
		const path = rt.pattern.replace(/:[a-z]+/, ids[rt.scope] ?? 'x').replace(/:[a-z]+/g, 'x');
		const name = `${rt.method} ${rt.pattern}`;
		if (rt.scope === 'open') continue;
		if (rt.scope === 'caller') {
			if (!callerScoped.has(name)) return `${name} scopes its answer itself and no check here covers it: add one`;
			continue;
		}
		const r = await req(betaMember, rt.method, path, rt.method === 'GET' || rt.method === 'DELETE' ? undefined : {});
		const wantStatus = rt.scope === 'admin' || rt.scope === 'operator' ? 403 : 404;
		if (r.status !== wantStatus) return `${rt.method} ${path} (${rt.scope}) with another org's key: ${r.status} ${r.text.slice(0, 160)}, want ${wantStatus}`;
		tried++;
	}
	// A running execution's routes too (huskd answers those from memory, not the store).
	const live = (await req(acmeMember, 'POST', `/sandbox/${acmeSb.id}/execute`, { command: ['sleep', '30'] })).json?.data?.executionId;
	const peek = await req(betaMember, 'GET', `/sandbox/execution/${live}`);
	const stop = await req(betaMember, 'DELETE', `/sandbox/execution/${live}`);
	const mine = await req(acmeMember, 'GET', `/sandbox/execution/${live}`);
	await req(acmeMember, 'DELETE', `/sandbox/execution/${live}`);
	if (!live || peek.status !== 404 || stop.status !== 404 || mine.json?.data?.status !== 'running')
		return `a running execution with another org's key: get ${peek.status}, cancel ${stop.status}; its own org's get: ${mine.text.slice(0, 160)}`;
	await req(acmeMember, 'GET', `/sandbox/execution/${live}?wait=30s`);
	const still = await req(acmeMember, 'GET', `/sandbox/${acmeSb.id}`);
	if (still.json?.data?.status !== 'idle') return `acme's sandbox after beta's tries: ${still.text.slice(0, 200)}`;
	return tried >= 30 ? '' : `only ${tried} routes tried (was the route table read?)`;
});
await check('list_scoped', async () => {
	const a = (await acme.list()).sandboxes.map((s) => s.sandboxId);
	const b = (await beta.list()).sandboxes.map((s) => s.sandboxId);
	const op = (await req(operator, 'GET', '/sandbox')).json?.data?.sandboxes?.map((s) => s.sandboxId) ?? [];
	return a.includes(acmeSb.id) && !a.includes(betaSb.id) && b.includes(betaSb.id) && !b.includes(acmeSb.id) && !op.includes(acmeSb.id) ? '' : `acme ${a}, beta ${b}, local ${op}`;
});
await check('stats_scoped', async () => {
	const own = await req(acmeMember, 'GET', `/services/stats/${acmeOrgId}?service=sandbox`);
	const other = await req(betaMember, 'GET', `/services/stats/${acmeOrgId}?service=sandbox`);
	const byName = await req(acmeMember, 'GET', '/services/stats/acme?service=sandbox');
	const n = own.json?.data?.services?.sandbox?.totalActive;
	return want(other, 404) || want(byName, 200) || (n === 1 ? '' : `acme's totalActive ${n}: ${own.text.slice(0, 200)}`);
});
await check('cli_stats_of_own_org', async () => {
	const [s, out, err] = cli(acmeMember, 'stats', '--json');
	return s === 0 && JSON.parse(out).services.sandbox.totalActive === 1 ? '' : `exit ${s}: ${out} ${err}`;
});
// The reference CLI's flags (issue L, item 6): --org-id, --timestamps, --paused-timeout, --all.
await check('cli_org_id', async () => {
	const [s1, out1, err1] = cli(acmeMember, '--org-id', acmeOrgId, 'list', '--json');
	const [s2, , err2] = cli(acmeMember, 'list', '--org-id', 'beta');
	if (s1 !== 0 || !JSON.parse(out1).sandboxes.some((x) => x.sandboxId === acmeSb.id)) return `own org: exit ${s1}: ${err1}`;
	return s2 === 1 && /orgId 'beta' is not this key's org/.test(err2) ? '' : `other org: exit ${s2}: ${err2}`;
});
await check('cli_exec_timestamps', async () => {
	// The fake guest's yes BYTES: "y" lines, BYTES bytes in all.
	const [s, out, err] = cli(acmeMember, 'exec', acmeSb.id, '--timestamps', '--', 'yes', '6');
	const lines = out.split('\n').filter(Boolean);
	const stamped = lines.every((l) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z y$/.test(l));
	return s === 0 && lines.length === 3 && stamped ? '' : `exit ${s}: ${JSON.stringify(out)} ${err}`;
});
await check('cli_create_paused_timeout', async () => {
	const [s, out, err] = cli(acmeMember, 'create', '--paused-timeout', '2h', '--json');
	const id = s === 0 ? JSON.parse(out).sandboxId : null;
	const got = id ? (await req(acmeMember, 'GET', `/sandbox/${id}`)).json?.data?.timeout : null;
	if (id) await req(acmeMember, 'DELETE', `/sandbox/${id}`);
	const [bad, , badErr] = cli(acmeMember, 'create', '--paused-timeout', 'soon');
	if (bad !== 2 || !/--paused-timeout 'soon' is not a duration/.test(badErr)) return `bad value: exit ${bad}: ${badErr}`;
	return got?.paused === '2h' ? '' : `exit ${s}: ${err}; timeout ${JSON.stringify(got)}`;
});
await check('cli_list_all', async () => {
	const [s, out] = cli(acmeMember, 'list', '--all', '--json');
	const [both, , err] = cli(acmeMember, 'list', '--all', '--project-id', 'p1');
	if (s !== 0 || !JSON.parse(out).sandboxes.length) return `--all: exit ${s}`;
	return both === 2 && /drop --project-id or --all/.test(err) ? '' : `both: exit ${both}: ${err}`;
});

await check('file_read_back_from_the_file', async () => {
	// A read's bytes are kept in a file on the host and sent from it (not held in memory).
	const data = Buffer.alloc(300 * 1024);
	for (let i = 0; i < data.length; i++) data[i] = (i * 7919) & 255;
	await acmeSb.writeFiles([{ path: 'big.bin', content: data }]);
	const back = await acmeSb.readFile('big.bin');
	const chunks = [];
	for await (const c of back) chunks.push(Buffer.from(c));
	const got = Buffer.concat(chunks);
	return got.equals(data) ? '' : `${got.length} bytes back, differ`;
});

// ---- stream URLs ----
await check('stream_url_signed', async () => {
	if (!/\/streams\/str_[a-z2-7]+\?exp=\d+&sig=[0-9a-f]{32}$/.test(ex.stdoutStreamUrl ?? '')) return `url ${ex.stdoutStreamUrl}`;
	const r = await fetch(ex.stdoutStreamUrl);
	const body = await r.text();
	return r.status === 200 && body === 'acme\n' ? '' : `${r.status} ${JSON.stringify(body)}`;
});
await check('stream_url_tampered_refused', async () => {
	const url = ex.stdoutStreamUrl;
	const flipped = url.slice(0, -1) + (url.endsWith('0') ? '1' : '0');
	const later = url.replace(/exp=(\d+)/, (_, e) => `exp=${Number(e) + 3600}`);
	for (const u of [flipped, later, url.split('?')[0]]) {
		const r = await fetch(u);
		if (r.status !== 403) return `${u}: ${r.status}`;
	}
});
await check('stream_url_fresh_from_execution', async () => {
	const r = await req(betaMember, 'GET', `/sandbox/execution/${ex.executionId}`);
	const own = await req(acmeMember, 'GET', `/sandbox/execution/${ex.executionId}`);
	const url = own.json?.data?.stdoutStreamUrl ?? '';
	return want(r, 404) || (/sig=[0-9a-f]{32}$/.test(url) && (await fetch(url)).status === 200 ? '' : `url ${url}`);
});

// ---- roles ----
await check('read_only_reads', async () => want(await req(acmeReader, 'GET', `/sandbox/${acmeSb.id}`), 200));
await check('read_only_writes_refused', async () => {
	const a = await req(acmeReader, 'POST', `/sandbox/${acmeSb.id}/execute`, { command: ['true'] });
	const b = await req(acmeReader, 'POST', '/sandbox', {});
	const c = await req(acmeReader, 'DELETE', `/sandbox/${acmeSb.id}`);
	return want(a, 403, 'FORBIDDEN') || want(b, 403, 'FORBIDDEN') || want(c, 403, 'FORBIDDEN');
});
await check('runtimes_changed_by_operator_only', async () => want(await req(acmeAdmin, 'DELETE', '/sandbox/runtimes/alt:latest'), 403, 'FORBIDDEN'));

// ---- snapshots ----
let pub, priv;
await check('snapshots_in_their_org', async () => {
	pub = await acme.createSnapshot(acmeSb.id, { name: 'shared', public: true });
	priv = await acme.createSnapshot(acmeSb.id, { name: 'app' });
	const own = await beta.createSnapshot(betaSb.id, { name: 'app' });
	// The same name and tag in two orgs: each has its own.
	const a = await req(acmeMember, 'GET', '/sandbox/snapshots/app:latest');
	const b = await req(betaMember, 'GET', '/sandbox/snapshots/app:latest');
	return a.json?.data?.snapshotId === priv.snapshotId && b.json?.data?.snapshotId === own.snapshotId ? '' : `acme ${a.text.slice(0, 120)} beta ${b.text.slice(0, 120)}`;
});
await check('private_snapshot_hidden', async () => {
	const g = await req(betaMember, 'GET', `/sandbox/snapshots/${priv.snapshotId}`);
	const c = await req(betaMember, 'POST', '/sandbox', { snapshot: priv.snapshotId });
	const l = (await req(betaMember, 'GET', '/sandbox/snapshots')).json?.data?.snapshots?.map((s) => s.snapshotId) ?? [];
	return want(g, 404, 'SNAPSHOT_NOT_FOUND') || want(c, 400) || (l.includes(priv.snapshotId) || l.includes(pub.snapshotId) ? `beta lists ${l}` : '');
});
await check('public_snapshot_read_by_all', async () => {
	const nokey = await req(null, 'GET', `/sandbox/snapshots/public/${pub.snapshotId}`);
	const list = await req(null, 'GET', '/sandbox/snapshots/public');
	const other = await req(betaMember, 'GET', `/sandbox/snapshots/${pub.snapshotId}`);
	const ids = list.json?.data?.snapshots?.map((s) => s.snapshotId) ?? [];
	return want(nokey, 200) || want(other, 200) || (ids.includes(pub.snapshotId) && !ids.includes(priv.snapshotId) ? '' : `public list ${ids}`);
});
await check('public_snapshot_used_by_other_org', async () => {
	const sb = await beta.create({ snapshot: pub.snapshotId });
	await waitIdle(betaMember, sb.id);
	const info = await beta.get(sb.id);
	await beta.destroy(sb.id);
	return info.org?.name === 'beta' ? '' : JSON.stringify(info.org);
});
await check('public_snapshot_changed_by_own_org_only', async () => {
	const t = await req(betaMember, 'PATCH', `/sandbox/snapshots/${pub.snapshotId}`, { tag: 'mine' });
	const d = await req(betaMember, 'DELETE', `/sandbox/snapshots/${pub.snapshotId}`);
	const kept = await req(acmeMember, 'GET', `/sandbox/snapshots/${pub.snapshotId}`);
	return want(t, 403, 'FORBIDDEN') || want(d, 403, 'FORBIDDEN') || want(kept, 200);
});

await check('lineage_stops_at_a_private_ancestor', async () => {
	const child = await acme.create({ snapshot: priv.snapshotId });
	await waitIdle(acmeMember, child.id);
	const derived = await acme.createSnapshot(child.id, { name: 'derived', public: true });
	await acme.destroy(child.id);
	const own = await req(acmeMember, 'GET', `/sandbox/snapshots/lineage?snapshot=${derived.snapshotId}`);
	const other = await req(betaMember, 'GET', `/sandbox/snapshots/lineage?snapshot=${derived.snapshotId}`);
	const ids = (r) => r.json?.data?.lineage?.map((x) => x.snapshotId) ?? [];
	if (ids(own).length < 2 || ids(own)[1] !== priv.snapshotId) return `acme's lineage ${own.text.slice(0, 900)} priv ${priv.snapshotId}`;
	return ids(other).length === 1 && other.json.data.hiddenAncestors === true && other.json.data.total === 1 ? '' : `beta's lineage ${other.text.slice(0, 300)}`;
});

// ---- audit ----
await check('audit_records_of_the_session', async () => {
	const own = (await req(acmeMember, 'GET', '/audit')).json?.data?.records ?? [];
	const theirs = (await req(betaMember, 'GET', '/audit')).json?.data?.records ?? [];
	const me = (await req(acmeMember, 'GET', '/whoami')).json?.data?.id;
	const reader = (await req(acmeReader, 'GET', '/whoami')).json?.data?.id;
	const has = (action, pred) => own.some((r) => r.action === action && pred(r));
	const missing = [
		['POST /sandbox', (r) => r.sandboxId === acmeSb.id && r.keyId === me && r.status === 201],
		['POST /sandbox/:id/execute', (r) => r.sandboxId === acmeSb.id && r.status === 200],
		['POST /sandbox/:id/snapshot', (r) => r.sandboxId === acmeSb.id],
		['POST /sandbox/:id/execute', (r) => r.keyId === reader && r.status === 403],
	].filter(([a, p]) => !has(a, p));
	if (missing.length) return `missing ${missing.map((m) => m[0])}: ${JSON.stringify(own).slice(0, 400)}`;
	// beta's tries on acme's ids are in beta's trail (as 404s), none in acme's.
	const betaOrg = (await req(betaMember, 'GET', '/whoami')).json?.data?.orgId;
	if (own.some((r) => r.orgId !== acmeOrgId) || theirs.some((r) => r.orgId !== betaOrg || (r.sandboxId === acmeSb.id && r.status !== 404)))
		return `records of another org: ${JSON.stringify(theirs.filter((r) => r.sandboxId === acmeSb.id)).slice(0, 300)}`;
	return own.some((r) => r.action.startsWith('GET')) ? 'reads recorded' : '';
});
await check('audit_url_of_a_sandbox', async () => {
	const url = (await req(acmeMember, 'GET', `/sandbox/${acmeSb.id}`)).json?.data?.auditStreamUrl ?? '';
	const r = await fetch(url, { headers: { Authorization: `Bearer ${acmeMember}` } });
	const recs = (await r.json())?.data?.records ?? [];
	return recs.length >= 2 && recs.every((x) => x.sandboxId === acmeSb.id) ? '' : `${url}: ${recs.length}`;
});
await check('audit_verify', async () => {
	const [s, out, err] = cli(acmeMember, 'audit', 'verify');
	const server = (await req(acmeMember, 'GET', '/audit/verify')).json?.data;
	return s === 0 && / records, the chain holds/.test(out) && server?.ok === true && server.records > 3 ? '' : `exit ${s}: ${out} ${err} ${JSON.stringify(server)}`;
});

// ---- keys at rest: sealed memory, crypto-shredding ----
await check('org_key_shredded', async () => {
	const gamma = (await req(operator, 'POST', '/keys', { org: 'gamma', role: 'member' })).json?.data;
	const g = new SandboxClient({ url: base, apiKey: gamma.key });
	const sb = await g.create({ runtime: 'base:latest' });
	await waitIdle(gamma.key, sb.id);
	const paused = await req(gamma.key, 'POST', `/sandbox/${sb.id}/pause`);
	const keyFile = `${process.env.HUSK_STATE}/keys/${gamma.orgId}.key`;
	const snap = readFileSync(`${process.env.HUSK_STATE}/sandboxes/${sb.id}/memory.snap`, 'utf8');
	const before = [existsSync(keyFile), snap.includes('"sealed"')];
	const byMember = await req(gamma.key, 'DELETE', '/orgs/gamma/key');
	const unknown = await req(operator, 'DELETE', '/orgs/nope/key');
	const [s, out, err] = cli(operator, 'key', 'shred-org', 'gamma');
	const resumed = await req(gamma.key, 'POST', `/sandbox/${sb.id}/resume`);
	const again = await req(operator, 'DELETE', `/orgs/${gamma.orgId}/key`);
	await req(gamma.key, 'DELETE', `/sandbox/${sb.id}`);
	if (want(paused, 200) || !before[0] || !before[1]) return `pause ${paused.status}, key file ${before[0]}, sealed ${before[1]}`;
	if (s !== 0 || existsSync(keyFile)) return `shred-org exit ${s}: ${out} ${err}; key file left ${existsSync(keyFile)}`;
	if (resumed.status < 400 || !/has been deleted/.test(resumed.text)) return `resume after shred: ${resumed.status} ${resumed.text.slice(0, 300)}`;
	return want(byMember, 403, 'FORBIDDEN') || want(unknown, 404, 'ORG_NOT_FOUND') || want(again, 404, 'KEY_NOT_FOUND');
});

// ---- revocation ----
let revoked;
await check('revoked_key_refused_at_once', async () => {
	const r = await req(operator, 'POST', '/keys', { org: 'acme', role: 'member' });
	revoked = r.json?.data?.key;
	const before = await req(revoked, 'GET', '/sandbox');
	const [s, , err] = cli(acmeAdmin, 'key', 'revoke', r.json?.data?.id);
	const after = await req(revoked, 'GET', '/sandbox');
	return want(before, 200) || (s !== 0 ? `revoke exit ${s}: ${err}` : '') || want(after, 401, 'UNAUTHORIZED');
});
await check('start_key_not_revoked_here', async () => want(await req(operator, 'DELETE', '/keys/start-1'), 403, 'FORBIDDEN'));
await check('other_org_key_not_revoked', async () => {
	const list = await req(operator, 'GET', '/keys');
	const b = list.json?.data?.keys?.find((k) => k.orgName === 'beta');
	return want(await req(acmeAdmin, 'DELETE', `/keys/${b?.id}`), 404, 'KEY_NOT_FOUND');
});

writeFileSync(
	process.env.HUSK_KEYS,
	JSON.stringify({ acmeMember, betaMember, revoked, acmeSandbox: acmeSb.id, streamUrl: ex.stdoutStreamUrl, cleanup: [{ key: acmeMember, id: acmeSb.id }, { key: betaMember, id: betaSb.id }] })
);
process.exit(failed() ? 1 : 0);
