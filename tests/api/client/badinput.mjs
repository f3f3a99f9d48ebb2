// Bad input against huskd (no KVM needed: nothing here starts a VMM): every
// request gets a 4xx with a JSON message, and the daemon keeps serving.
const base = process.env.HUSK_URL;
const key = process.env.HUSK_API_KEY;
let failed = 0;

async function req(method, path, { body, headers = {}, auth = true } = {}) {
	const h = { ...headers };
	if (auth) h.Authorization = `Bearer ${key}`;
	const r = await fetch(base + path, { method, headers: h, body });
	const text = await r.text();
	let json = null;
	try {
		json = JSON.parse(text);
	} catch {}
	return { status: r.status, json, text };
}

// A request written by send(sock) on a socket of its own: the answer's head (or 'error ...').
async function raw(send) {
	const { connect } = await import('node:net');
	const u = new URL(base);
	return new Promise((resolve) => {
		const sock = connect(Number(u.port), u.hostname, () => send(sock));
		let got = '';
		sock.on('data', (d) => {
			got += d;
			if (got.includes('\r\n\r\n')) {
				sock.destroy();
				resolve(got);
			}
		});
		sock.on('error', (e) => resolve(`error ${e.message}`));
		sock.on('close', () => resolve(got));
	});
}

async function expect(name, p, status, code) {
	try {
		const r = await p;
		const ok = r.status === status && r.json?.success === false && typeof r.json?.message === 'string' && r.json.message.length > 0 && (!code || r.json.code === code);
		if (ok) console.log(`PASS badinput/${name}`);
		else {
			failed++;
			console.log(`FAIL badinput/${name}: got ${r.status} ${r.text.slice(0, 200)}, want ${status} ${code ?? ''}`);
		}
	} catch (e) {
		failed++;
		console.log(`FAIL badinput/${name}: ${e}`);
	}
}

await expect('no_key', req('GET', '/sandbox', { auth: false }), 401);
await expect('wrong_key', req('GET', '/sandbox', { headers: { Authorization: 'Bearer nope' }, auth: false }), 401);
await expect('basic_auth', req('GET', '/sandbox', { headers: { Authorization: 'Basic Zm9vOmJhcg==' }, auth: false }), 401);
// The key is checked before any body is read: a request without one that
// announces a big body gets its 401 at once, with none of the body sent.
{
	const answer = await raw(async (sock) =>
		sock.write(`POST /sandbox HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n`)
	);
	if (/^HTTP\/1\.1 401 /.test(answer)) console.log('PASS badinput/no_key_refused_before_body');
	else {
		failed++;
		console.log(`FAIL badinput/no_key_refused_before_body: ${JSON.stringify(answer.slice(0, 200))}`);
	}
}
await expect('malformed_json', req('POST', '/sandbox', { body: '{"runtime": ' }), 400);
await expect('json_not_object', req('POST', '/sandbox', { body: '[1,2]' }), 400);
await expect('unknown_runtime', req('POST', '/sandbox', { body: '{"runtime":"cobol:1"}' }), 400);
await expect('bad_memory', req('POST', '/sandbox', { body: '{"resources":{"memory":"lots"}}' }), 400);
await expect('bad_cpu', req('POST', '/sandbox', { body: '{"resources":{"cpu":"-3"}}' }), 400);
await expect('bad_timeout', req('POST', '/sandbox', { body: '{"timeout":{"execution":"soon"}}' }), 400);
await expect('command_not_array', req('POST', '/sandbox', { body: '{"command":{"exec":"ls"}}' }), 400);
await expect('url_token_needs_port', req('POST', '/sandbox', { body: '{"network":{"urlToken":true}}' }), 400);
await expect('url_token_not_boolean', req('POST', '/sandbox', { body: '{"network":{"port":8080,"urlToken":"yes"}}' }), 400);
await expect('all_ports_not_boolean', req('POST', '/sandbox', { body: '{"network":{"allPorts":"yes"}}' }), 400);
await expect('unknown_sandbox_port_by_path', req('GET', '/p/sbx_nosuchthing:8080/x'), 404);
await expect('env_not_object', req('POST', '/sandbox', { body: '{"env":["A=1"]}' }), 400);
await expect('unknown_sandbox_get', req('GET', '/sandbox/sbx_nosuchthing'), 404, 'SANDBOX_NOT_FOUND');
await expect('unknown_sandbox_execute', req('POST', '/sandbox/sbx_nosuchthing/execute', { body: '{"command":["true"]}' }), 404, 'SANDBOX_NOT_FOUND');
await expect('unknown_sandbox_delete', req('DELETE', '/sandbox/sbx_nosuchthing'), 404);
await expect('unknown_execution', req('GET', '/sandbox/execution/exec_nosuchthing'), 404, 'EXECUTION_NOT_FOUND');
await expect('unknown_sandbox_fs', req('GET', '/fs/list/sbx_nosuchthing'), 404, 'SANDBOX_NOT_FOUND');
// The checks of a request's body need a sandbox of the caller's org: an unknown
// (or another org's) id is a 404 before the body is read.
const made = await req('POST', '/sandbox', { body: '{}' });
const sbx = made.json?.data?.sandboxId ?? 'sbx_notcreated';
if (made.status !== 201) {
	failed++;
	console.log(`FAIL badinput/sandbox_for_body_checks: ${made.status} ${made.text}`);
}
await expect('fs_write_bad_body', req('POST', `/fs/${sbx}`, { body: '{"files":"x"}' }), 400);
await expect('fs_write_unknown_sandbox', req('POST', '/fs/sbx_nosuchthing', { body: '{"files":"x"}' }), 404, 'SANDBOX_NOT_FOUND');
await expect('upload_zip_not_a_zip', req('POST', `/fs/upload/${sbx}`, { body: Buffer.from('PK\x03\x04rest') }), 400, 'ARCHIVE_FAILED');
await expect('upload_format_mismatch', req('POST', `/fs/upload/${sbx}?format=zip`, { body: Buffer.from([0x1f, 0x8b, 8, 0]) }), 400);
await expect('upload_unknown_format', req('POST', `/fs/upload/${sbx}?format=rar`, { body: Buffer.from([0x1f, 0x8b, 8, 0]) }), 400);
await expect('upload_not_gzip', req('POST', `/fs/upload/${sbx}`, { body: 'plain text' }), 400);
// A big body waits in a file as it arrives, not in huskd's memory: with 47 of
// an upload's 48 MiB sent (the socket took them), huskd's anonymous memory has
// not grown by anything like it. Then the rest, and an answer (of any status).
if (process.env.HUSKD_PID) {
	const { readFileSync } = await import('node:fs');
	const anon = () => Number(/RssAnon:\s+(\d+)/.exec(readFileSync(`/proc/${process.env.HUSKD_PID}/status`, 'utf8'))?.[1] ?? NaN);
	const total = 48 << 20, part = Buffer.alloc(1 << 20);
	let before = NaN, during = NaN;
	const answer = await raw(async (sock) => {
		before = anon();
		sock.write(`POST /fs/upload/${sbx} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: ${total}\r\n\r\n`);
		const first = Buffer.alloc(1 << 20);
		first[0] = 0x1f;
		first[1] = 0x8b;
		for (let i = 0; i < 47; i++) await new Promise((ok) => sock.write(i ? part : first, ok));
		during = anon();
		sock.write(part);
	});
	const grown = (during - before) / 1024;
	if (/^HTTP\/1\.1 \d{3} /.test(answer) && grown < 16) console.log(`PASS badinput/upload_body_not_in_memory`);
	else {
		failed++;
		console.log(`FAIL badinput/upload_body_not_in_memory: RssAnon ${before} -> ${during} kB; ${JSON.stringify(answer.slice(0, 120))}`);
	}
	console.log(`  (measured) huskd RssAnon ${before} kB before a 48 MiB upload, ${during} kB with 47 MiB of it in`);
}
await expect('download_unknown_format', req('GET', `/fs/download/${sbx}?format=rar`), 400);
await expect('unknown_route', req('GET', '/nope'), 404);
await expect('wrong_method', req('PUT', '/sandbox'), 405);
await expect('oversized_body', req('POST', '/sandbox', { body: 'x'.repeat(65 << 20) }), 413);
await expect('unknown_sandbox_pause', req('POST', '/sandbox/sbx_x/pause'), 404, 'SANDBOX_NOT_FOUND');
await expect('unknown_sandbox_resume', req('POST', '/sandbox/sbx_x/resume'), 404, 'SANDBOX_NOT_FOUND');
await expect('unknown_snapshot_get', req('GET', '/sandbox/snapshots/snp_nosuchthing'), 404, 'SNAPSHOT_NOT_FOUND');
await expect('unknown_snapshot_delete', req('DELETE', '/sandbox/snapshots/snp_nosuchthing'), 404, 'SNAPSHOT_NOT_FOUND');
await expect('unknown_snapshot_tag', req('PATCH', '/sandbox/snapshots/snp_nosuchthing', { body: '{"tag":"x"}' }), 404, 'SNAPSHOT_NOT_FOUND');
await expect('snapshot_bad_tag', req('PATCH', '/sandbox/snapshots/snp_x', { body: '{"tag":"a:b"}' }), 400);
await expect('snapshot_tag_missing', req('PATCH', '/sandbox/snapshots/snp_x', { body: '{}' }), 400);
await expect('snapshot_bad_sort', req('GET', '/sandbox/snapshots?sort=colour'), 400);
await expect('lineage_no_start', req('GET', '/sandbox/snapshots/lineage'), 400);
await expect('lineage_unknown', req('GET', '/sandbox/snapshots/lineage?snapshot=snp_nosuchthing'), 404, 'SNAPSHOT_NOT_FOUND');
await expect('public_unknown', req('GET', '/sandbox/snapshots/public/nosuch%3Atag'), 404, 'SNAPSHOT_NOT_FOUND');
await expect('snapshot_create_bad_name', req('POST', `/sandbox/${sbx}/snapshot`, { body: '{"name":"a b/c"}' }), 400);
await expect('snapshot_create_bad_public', req('POST', `/sandbox/${sbx}/snapshot`, { body: '{"public":"yes"}' }), 400);
await expect('snapshot_create_unknown_sandbox', req('POST', '/sandbox/sbx_nosuchthing/snapshot', { body: '{}' }), 404, 'SANDBOX_NOT_FOUND');
await expect('create_unknown_snapshot', req('POST', '/sandbox', { body: '{"snapshot":"nosuch:tag"}' }), 400);
await expect('create_snapshot_and_runtime', req('POST', '/sandbox', { body: '{"snapshot":"a","runtime":"base:latest"}' }), 400);
await expect('build_no_runtime', req('POST', '/sandbox/snapshots/build', { body: '{}' }), 400);
await expect('build_unknown_runtime', req('POST', '/sandbox/snapshots/build', { body: '{"runtime":"cobol:1"}' }), 400);
await expect('build_upload_unknown', req('PUT', '/sandbox/snapshots/snp_nosuchthing/upload', { body: Buffer.from([0x1f, 0x8b, 8, 0]) }), 404, 'SNAPSHOT_NOT_FOUND');
await expect('build_upload_bad_id', req('PUT', '/sandbox/snapshots/..%2F..%2Fetc/upload', { body: Buffer.from([0x1f, 0x8b, 8, 0]) }), 404, 'SNAPSHOT_NOT_FOUND');
await expect('build_finalize_unknown', req('POST', '/sandbox/snapshots/snp_nosuchthing/finalize', { body: '{}' }), 404, 'SNAPSHOT_NOT_FOUND');
{
	const init = await req('POST', '/sandbox/snapshots/build', { body: '{"runtime":"base:latest","name":"bad-build"}' });
	const id = init.json?.data?.snapshotId;
	await expect('build_upload_not_gzip', req('PUT', `/sandbox/snapshots/${id}/upload`, { body: 'plain text' }), 400);
	await expect('build_finalize_bad_deps', req('POST', `/sandbox/snapshots/${id}/finalize`, { body: '{"dependencies":["curl; rm -rf /"]}' }), 400);
	await expect('build_finalize_bad_env', req('POST', `/sandbox/snapshots/${id}/finalize`, { body: '{"env":["A=1"]}' }), 400);
}
await expect('create_snapshot_not_string', req('POST', '/sandbox', { body: '{"snapshot":7}' }), 400);
await expect('stats_bad_window', req('GET', '/sandbox/stats?start=2026-02-01T00:00:00Z&end=2026-01-01T00:00:00Z'), 400);

const snaps = await req('GET', '/sandbox/snapshots');
if (snaps.status === 200 && Array.isArray(snaps.json?.data?.snapshots) && typeof snaps.json.data.total === 'number') console.log('PASS badinput/snapshot_list_empty');
else {
	failed++;
	console.log(`FAIL badinput/snapshot_list_empty: ${snaps.status} ${snaps.text.slice(0, 200)}`);
}

// Runtimes: sort and direction as the client sends them; anything else is refused.
await expect('runtimes_bad_sort', req('GET', '/sandbox/runtimes?sort=size'), 400);
await expect('runtimes_bad_direction', req('GET', '/sandbox/runtimes?sort=name&direction=up'), 400);
{
	const names = async (q) => (await req('GET', `/sandbox/runtimes${q}`)).json?.data?.runtimes?.map((r) => r.name) ?? [];
	const plain = await names('');
	const asc = await names('?sort=name&direction=asc');
	const desc = await names('?sort=name');
	const sorted = [...plain].sort();
	const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
	if (plain.length > 1 && same(plain, sorted) && same(asc, sorted) && same(desc, [...sorted].reverse()))
		console.log('PASS badinput/runtimes_sorted');
	else {
		failed++;
		console.log(`FAIL badinput/runtimes_sorted: plain ${plain}, asc ${asc}, desc (default) ${desc}`);
	}
}

// List filters as the reference names them (mode, projectId, snapshotId), and the
// events limit (default 50, at most 100).
{
	const one = await req('POST', '/sandbox', { body: '{"projectId":"proj_a","command":{"exec":["sleep","1000"],"mode":"interactive"}}' });
	const two = await req('POST', '/sandbox', { body: '{"projectId":"proj_b"}' });
	const ids = async (q) => (await req('GET', `/sandbox?${q}`)).json?.data?.sandboxes?.map((x) => x.sandboxId) ?? [];
	const a = one.json?.data?.sandboxId, b = two.json?.data?.sandboxId;
	const pa = await ids('projectId=proj_a'), pb = await ids('projectId=proj_b');
	const none = await ids('snapshotId=snp_nosuchthing'), inter = await ids('mode=interactive'), once = await ids('mode=oneshot');
	const bad = await req('GET', '/sandbox?mode=sometimes');
	const ev = await req('GET', `/sandbox/sandboxes/${a}/events?limit=1000`);
	const ok = pa.length === 1 && pa[0] === a && pb.length === 1 && pb[0] === b && none.length === 0 &&
		inter.includes(a) && inter.includes(b) && !once.includes(a) && bad.status === 400 && ev.status === 200;
	if (ok) console.log('PASS badinput/list_filters_and_events_limit');
	else {
		failed++;
		console.log(`FAIL badinput/list_filters_and_events_limit: a ${pa}, b ${pb}, snapshot ${none}, interactive ${inter}, oneshot ${once}, bad mode ${bad.status}, events ${ev.status}`);
	}
	for (const id of [a, b]) if (id) await req('DELETE', `/sandbox/${id}`);
}

// A command for a sandbox that has ended is refused as ended (410), not as busy: the
// published client reads every 409 on execute as SandboxBusyError.
{
	const { SandboxClient } = await import('@agentuity/core');
	const client = new SandboxClient({ url: base, apiKey: key });
	const sb = await client.create({ runtime: 'base:latest' });
	await req('GET', `/sandbox/${sb.id}?waitForStatus=idle&waitMs=60000`);
	await client.destroy(sb.id);
	let got = 'no error';
	try {
		await sb.execute({ command: ['true'] });
	} catch (e) {
		got = `${e?._tag ?? e?.name}: ${e?.status ?? ''} ${e?.message ?? ''}`;
	}
	const raw = await req('POST', `/sandbox/${sb.id}/execute`, { body: '{"command":["true"]}' });
	if (!/Busy/.test(got) && raw.status === 410 && raw.json?.code === 'SANDBOX_TERMINATED') console.log('PASS badinput/ended_sandbox_is_not_busy');
	else {
		failed++;
		console.log(`FAIL badinput/ended_sandbox_is_not_busy: client ${got}; raw ${raw.status} ${raw.text.slice(0, 160)}`);
	}
}

// A deleted sandbox is out of sight unless asked for: get answers 404, list leaves
// it out; includeDeleted=true shows it in both.
{
	const made2 = await req('POST', '/sandbox', { body: '{"name":"to-delete"}' });
	const id = made2.json?.data?.sandboxId;
	await req('GET', `/sandbox/${id}?waitForStatus=idle&waitMs=60000`);
	await req('DELETE', `/sandbox/${id}`);
	const hidden = await req('GET', `/sandbox/${id}`);
	const shown = await req('GET', `/sandbox/${id}?includeDeleted=true`);
	const listed = (await req('GET', '/sandbox?name=to-delete')).json?.data?.sandboxes?.length;
	const listedAll = (await req('GET', '/sandbox?name=to-delete&includeDeleted=true')).json?.data?.sandboxes ?? [];
	const good = hidden.status === 404 && hidden.json?.code === 'SANDBOX_NOT_FOUND' && /includeDeleted=true/.test(hidden.json?.message) && shown.json?.data?.status === 'deleted' && listed === 0 && listedAll.length === 1 && listedAll[0].status === 'deleted';
	if (good) console.log('PASS badinput/include_deleted');
	else {
		failed++;
		console.log(`FAIL badinput/include_deleted: get ${hidden.status} ${hidden.text.slice(0, 120)}; with includeDeleted ${shown.status} ${shown.json?.data?.status}; listed ${listed}, with includeDeleted ${listedAll.length}`);
	}
}

// What a sandbox consumed, from its cgroup: cpuTimeMs and memoryByteSec while it runs,
// and kept in its record once it has ended. Without cgroup v2 (HUSK_CGROUP2=0) there are
// no figures: the fields are left out, never a made-up 0.
if (process.env.HUSK_CGROUP2 === '0') {
	const made3 = await req('POST', '/sandbox', { body: '{"name":"unmetered"}' });
	const id = made3.json?.data?.sandboxId;
	await req('GET', `/sandbox/${id}?waitForStatus=idle&waitMs=60000`);
	const info = (await req('GET', `/sandbox/${id}`)).json?.data ?? {};
	await req('DELETE', `/sandbox/${id}`);
	if (info.status === 'idle' && !('cpuTimeMs' in info) && !('memoryByteSec' in info)) console.log('PASS badinput/usage_figures_absent_without_cgroups');
	else {
		failed++;
		console.log(`FAIL badinput/usage_figures_absent_without_cgroups: ${JSON.stringify(info).slice(0, 300)}`);
	}
} else {
	const made3 = await req('POST', '/sandbox', { body: '{"name":"metered"}' });
	const id = made3.json?.data?.sandboxId;
	await req('GET', `/sandbox/${id}?waitForStatus=idle&waitMs=60000`);
	await req('POST', `/sandbox/${id}/execute`, { body: '{"command":["yes","4000000"]}' });
	const live = (await req('GET', `/sandbox/${id}`)).json?.data ?? {};
	await req('DELETE', `/sandbox/${id}`);
	const ended = (await req('GET', `/sandbox/${id}?includeDeleted=true`)).json?.data ?? {};
	const listed = (await req('GET', '/sandbox?name=metered&includeDeleted=true')).json?.data?.sandboxes?.[0] ?? {};
	const good = Number.isInteger(live.cpuTimeMs) && Number.isInteger(live.memoryByteSec) && ended.memoryByteSec > 0 && ended.memoryByteSec >= live.memoryByteSec && ended.cpuTimeMs >= live.cpuTimeMs && listed.memoryByteSec === ended.memoryByteSec;
	if (good) console.log(`PASS badinput/usage_figures (cpuTimeMs ${ended.cpuTimeMs}, memoryByteSec ${ended.memoryByteSec})`);
	else {
		failed++;
		console.log(`FAIL badinput/usage_figures: live ${live.cpuTimeMs}/${live.memoryByteSec}, ended ${ended.cpuTimeMs}/${ended.memoryByteSec}, listed ${listed.memoryByteSec}`);
	}
}

// Its fake VMM would outlive huskd.
if (made.status === 201) await req('DELETE', `/sandbox/${sbx}`);

// Still serving after all of that.
const ok = await req('GET', '/sandbox/runtimes');
if (ok.status === 200 && ok.json?.success === true && Array.isArray(ok.json.data?.runtimes)) console.log('PASS badinput/still_serving');
else {
	failed++;
	console.log(`FAIL badinput/still_serving: ${ok.status}`);
}
process.exit(failed ? 1 : 0);
