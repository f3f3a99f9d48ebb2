// E2B's API (API.md §11) driven by the published, unmodified `e2b` SDK
// (tests/api/e2b.sh: huskd with the fake VMM on the host; tests/api/e2e.sh
// runs it again on real KVM with E2B_REAL=1). HUSK_URL, HUSK_API_KEY.
// Prints PASS/FAIL lines "e2b/<name>".
import { Sandbox, CommandExitError, NotFoundError, SandboxNotFoundError } from 'e2b';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { checks, request } from './checks.mjs';

const base = process.env.HUSK_URL;
const key = process.env.HUSK_API_KEY;
const real = process.env.E2B_REAL === '1';
// The three variables that move an E2B program to husk (README).
process.env.E2B_API_URL = `${base}/e2b`;
process.env.E2B_SANDBOX_URL = `${base}/e2b/envd`;
process.env.E2B_API_KEY = key;
const { check, failed } = checks('e2b');
const req = (method, path, body) => request(base, key, method, path, body);
const template = process.env.E2B_TEMPLATE || 'base';

// Waits (huskd's status long-poll, no sleeping) until sandbox id has one of statuses.
async function waitStatus(id, statuses) {
	for (let i = 0; i < 20; i++) {
		const r = await req('GET', `/sandbox/status/${id}?waitForStatus=${statuses}&waitMs=30000`);
		if (statuses.split(',').includes(r.json?.data?.status)) return r.json.data.status;
	}
	throw new Error(`sandbox ${id} never reached ${statuses}`);
}

// After a huskd restart (tests/api/e2b.sh): the sandbox kept in E2B_KEEP has its deadline still.
if (process.argv[2] === 'restarted') {
	const kept = JSON.parse(readFileSync(process.env.E2B_KEEP, 'utf8'));
	await check('deadline_kept_across_restart', async () => {
		const info = await Sandbox.getInfo(kept.id);
		if (info.endAt.toISOString() !== kept.endAt) return `endAt ${info.endAt.toISOString()}, was ${kept.endAt}`;
		await Sandbox.setTimeout(kept.id, 1000);
		await waitStatus(kept.id, 'terminated');
	});
	process.exit(failed() ? 1 : 0);
}

let sbx;
await check('create', async () => {
	sbx = await Sandbox.create(template, { metadata: { suite: 'e2b', run: String(process.pid) }, timeoutMs: 600_000 });
	if (!sbx.sandboxId.startsWith('sbx_')) return `sandboxId ${sbx.sandboxId}`;
	const info = await sbx.getInfo();
	if (info.state !== 'running') return `state ${info.state}`;
	if (info.metadata.suite !== 'e2b') return `metadata ${JSON.stringify(info.metadata)}`;
	if (!(info.endAt > new Date(Date.now() + 500_000))) return `endAt ${info.endAt} is not the 600 s timeout`;
});
if (!sbx) process.exit(1);

await check('run_stdout', async () => {
	const r = await sbx.commands.run('echo hello world');
	if (r.exitCode !== 0 || r.stdout !== 'hello world\n' || r.stderr !== '') return JSON.stringify(r);
});

await check('run_failing_raises_exit_error', async () => {
	try {
		await sbx.commands.run(real ? 'echo oops >&2; exit 3' : 'stderr oops');
		return 'no error';
	} catch (e) {
		if (!(e instanceof CommandExitError)) return `${e?.name}: ${e?.message}`;
		if (e.exitCode !== (real ? 3 : 2) || e.stderr !== 'oops\n') return `exit ${e.exitCode} stderr ${JSON.stringify(e.stderr)}`;
	}
});

await check('run_env', async () => {
	const r = await sbx.commands.run('printenv FOO', { envs: { FOO: 'bar baz' } });
	if (r.stdout !== 'bar baz\n') return JSON.stringify(r.stdout);
});

await check('on_stdout_in_order', async () => {
	const parts = [];
	const n = 300000;
	const cmd = real ? `seq 1 50000` : `yes ${n}`;
	const r = await sbx.commands.run(cmd, { onStdout: (d) => parts.push(d) });
	const joined = parts.join('');
	if (joined !== r.stdout) return 'onStdout pieces differ from stdout';
	if (real) {
		const want = Array.from({ length: 50000 }, (_, i) => `${i + 1}\n`).join('');
		if (joined !== want) return `seq output out of order or short (${joined.length} bytes)`;
	} else if (joined.length !== n || !/^(y\n)+$/.test(joined)) return `got ${joined.length} bytes`;
	if (parts.length < 2) return `${parts.length} piece(s): not streamed`;
});

await check('background_kill', async () => {
	const h = await sbx.commands.run('sleep 1000', { background: true });
	const listed = await sbx.commands.list();
	if (!listed.some((p) => p.pid === h.pid)) return `pid ${h.pid} not in ${JSON.stringify(listed)}`;
	if (!(await sbx.commands.kill(h.pid))) return 'kill said not found';
	try {
		await h.wait();
		return 'wait() did not raise';
	} catch (e) {
		if (!(e instanceof CommandExitError)) return `${e?.name}: ${e?.message}`;
	}
	if ((await sbx.commands.list()).some((p) => p.pid === h.pid)) return 'still listed after kill';
	if (await sbx.commands.kill(h.pid)) return 'a second kill found it';
});

await check('stdin', async () => {
	const h = await sbx.commands.run('cat', { background: true, stdin: true });
	await h.sendStdin('one ');
	await h.sendStdin('two');
	await h.closeStdin();
	const r = await h.wait();
	if (r.stdout !== 'one two') return JSON.stringify(r.stdout);
});

await check('connect_to_running', async () => {
	const h = await sbx.commands.run('cat', { background: true, stdin: true });
	const seen = [];
	const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
	await sbx.commands.sendStdin(h.pid, 'late');
	await sbx.commands.closeStdin(h.pid);
	const r = await again.wait();
	if (r.stdout !== 'late' || seen.join('') !== 'late') return JSON.stringify([r.stdout, seen]);
	await h.wait();
});

await check('pty', async () => {
	let out = '';
	let saw;
	const seen = new Promise((res) => (saw = res));
	const h = await sbx.pty.create({
		cols: 80,
		rows: 24,
		onData: (d) => {
			out += new TextDecoder().decode(d);
			if (out.includes('pty-42')) saw();
		},
	});
	await sbx.pty.resize(h.pid, { cols: 120, rows: 40 });
	// The real bash computes the number (so the echo of the typed line cannot match).
	await sbx.pty.sendInput(h.pid, new TextEncoder().encode(real ? 'echo pty-$((6*7)); stty size\n' : 'pty-42\n'));
	const t = setTimeout(() => saw('timeout'), 60_000);
	const why = await seen;
	clearTimeout(t);
	if (why === 'timeout') return `no output: ${JSON.stringify(out)}`;
	if (real) {
		await sbx.pty.sendInput(h.pid, new TextEncoder().encode('exit 5\n'));
		try {
			await h.wait();
			return 'exit 5 did not raise';
		} catch (e) {
			if (e?.exitCode !== 5) return `${e?.name}: ${e?.message}`;
		}
		if (!out.includes('40 120')) return `stty size after the resize: ${JSON.stringify(out.slice(-200))}`;
	} else {
		if (!(await sbx.pty.kill(h.pid))) return 'kill said not found';
		await h.wait().catch(() => {});
	}
	if ((await sbx.commands.list()).some((p) => p.pid === h.pid)) return 'still listed';
});

await check('files_text_and_binary', async () => {
	await sbx.files.write('/tmp/e2b/hello.txt', 'hi there');
	if ((await sbx.files.read('/tmp/e2b/hello.txt')) !== 'hi there') return 'text differs';
	const bin = new Uint8Array(70000).map((_, i) => (i * 7 + 3) & 255);
	await sbx.files.write('/tmp/e2b/bin.dat', bin);
	const back = await sbx.files.read('/tmp/e2b/bin.dat', { format: 'bytes' });
	if (back.length !== bin.length || back.some((b, i) => b !== bin[i])) return 'bytes differ';
	const many = await sbx.files.write([
		{ path: '/tmp/e2b/a', data: 'A' },
		{ path: '/tmp/e2b/b', data: 'B' },
	]);
	if (many.length !== 2 || (await sbx.files.read('/tmp/e2b/b')) !== 'B') return JSON.stringify(many);
});

await check('files_list_exists_mkdir_remove', async () => {
	const names = (await sbx.files.list('/tmp/e2b')).map((e) => `${e.name}:${e.type}`).sort();
	if (names.join(',') !== 'a:file,b:file,bin.dat:file,hello.txt:file') return names.join(',');
	if (!(await sbx.files.exists('/tmp/e2b/a'))) return 'a does not exist';
	if (await sbx.files.exists('/tmp/e2b/nope')) return 'nope exists';
	if (!(await sbx.files.makeDir('/tmp/e2b/d/e'))) return 'makeDir said it existed';
	if (await sbx.files.makeDir('/tmp/e2b/d/e')) return 'second makeDir made it again';
	const deep = (await sbx.files.list('/tmp/e2b', { depth: 2 })).map((e) => e.path);
	if (!deep.includes('/tmp/e2b/d/e')) return `depth 2: ${deep.join(',')}`;
	const info = await sbx.files.getInfo('/tmp/e2b/hello.txt');
	if (info.size !== 8 || info.type !== 'file' || info.name !== 'hello.txt') return JSON.stringify(info);
	await sbx.files.remove('/tmp/e2b/a');
	await sbx.files.remove('/tmp/e2b/d');
	if ((await sbx.files.exists('/tmp/e2b/a')) || (await sbx.files.exists('/tmp/e2b/d'))) return 'not removed';
	try {
		await sbx.files.read('/tmp/e2b/a');
		return 'read of a removed file worked';
	} catch (e) {
		if (!(e instanceof NotFoundError)) return `${e?.name}: ${e?.message}`;
	}
});

if (real)
	await check('as_another_user', async () => {
		await sbx.files.write('/tmp/e2b/owned.txt', 'x', { user: 'nobody' });
		const owner = await sbx.commands.run('stat -c %U /tmp/e2b/owned.txt');
		if (owner.stdout !== 'nobody\n') return `file owner ${JSON.stringify(owner.stdout)}`;
		const who = await sbx.commands.run('id -un', { user: 'nobody' });
		if (who.stdout !== 'nobody\n') return `command ran as ${JSON.stringify(who.stdout)}`;
	});

if (real)
	await check('files_rename', async () => {
		const e = await sbx.files.rename('/tmp/e2b/b', '/tmp/e2b/c');
		if (e.path !== '/tmp/e2b/c' || (await sbx.files.read('/tmp/e2b/c')) !== 'B') return JSON.stringify(e);
	});

await check('watch_dir', async () => {
	await sbx.files.makeDir('/tmp/e2b/w');
	const seen = [];
	let removed;
	const gone = new Promise((res) => (removed = res));
	const h = await sbx.files.watchDir('/tmp/e2b/w', (e) => {
		seen.push(`${e.type}:${e.name}`);
		if (e.type === 'remove' && e.name === 'x.txt') removed();
	});
	await sbx.files.write('/tmp/e2b/w/x.txt', 'x');
	await sbx.files.remove('/tmp/e2b/w/x.txt');
	// The remove's event ends the wait; 60 s is only the bound of a broken run.
	const t = setTimeout(() => removed('timeout'), 60_000);
	const why = await gone;
	clearTimeout(t);
	await h.stop();
	if (why === 'timeout') return `no remove event: ${seen.join(',')}`;
	if (!seen.includes('create:x.txt') || seen.indexOf('create:x.txt') > seen.indexOf('remove:x.txt')) return seen.join(',');
});

await check('metrics', async () => {
	const m = await sbx.getMetrics();
	if (m.length !== 1) return `${m.length} samples`;
	const s = m[0];
	if (!(s.memTotal > 0 && s.memUsed >= 0 && s.memUsed <= s.memTotal && s.diskTotal > 0 && s.diskUsed <= s.diskTotal && s.cpuCount >= 1)) return JSON.stringify(s);
	if (!(s.cpuUsedPct >= 0 && s.cpuUsedPct <= 100) || (!real && Math.abs(s.cpuUsedPct - 25) > 0.01)) return `cpuUsedPct ${s.cpuUsedPct}`;
	if (!(s.timestamp instanceof Date) || Math.abs(s.timestamp - Date.now()) > 600_000) return `timestamp ${s.timestamp}`;
});

await check('list_with_metadata', async () => {
	const page = await Sandbox.list({ query: { metadata: { run: String(process.pid) } } }).nextItems();
	if (page.length !== 1 || page[0].sandboxId !== sbx.sandboxId) return JSON.stringify(page);
	const none = await Sandbox.list({ query: { metadata: { run: 'no-such' } } }).nextItems();
	if (none.length) return `a filter matching nothing gave ${none.length}`;
});

await check('list_pages', async () => {
	const s2 = await Sandbox.create(template, { metadata: { suite: 'e2b', run: String(process.pid) } });
	try {
		const pager = Sandbox.list({ query: { metadata: { run: String(process.pid) } }, limit: 1 });
		const a = await pager.nextItems();
		if (a.length !== 1 || !pager.hasNext) return `first page: ${a.length}, hasNext ${pager.hasNext}`;
		const b = await pager.nextItems();
		if (b.length !== 1 || pager.hasNext) return `second page: ${b.length}, hasNext ${pager.hasNext}`;
		const ids = [a[0].sandboxId, b[0].sandboxId].sort();
		if (ids.join() !== [sbx.sandboxId, s2.sandboxId].sort().join()) return `pages ${ids}`;
	} finally {
		await s2.kill();
	}
});

await check('pause_and_connect', async () => {
	await sbx.files.write('/tmp/e2b/kept.txt', 'kept');
	if (!(await Sandbox.pause(sbx.sandboxId))) return 'pause said already paused';
	if ((await Sandbox.getInfo(sbx.sandboxId)).state !== 'paused') return 'not paused';
	if (await Sandbox.pause(sbx.sandboxId)) return 'a second pause paused it';
	const again = await Sandbox.connect(sbx.sandboxId);
	if ((await again.files.read('/tmp/e2b/kept.txt')) !== 'kept') return 'the file did not survive';
	if ((await Sandbox.getInfo(sbx.sandboxId)).state !== 'running') return 'not running after connect';
});

await check('snapshot_create_list_delete', async () => {
	await sbx.files.write('/tmp/e2b/snap.txt', 'in the snapshot');
	const snap = await Sandbox.createSnapshot(sbx.sandboxId, { name: `e2b-snap-${process.pid}` });
	if (!snap.snapshotId.startsWith('snp_') || snap.names[0] !== `e2b-snap-${process.pid}`) return JSON.stringify(snap);
	const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems();
	if (!listed.some((s) => s.snapshotId === snap.snapshotId)) return `not listed: ${JSON.stringify(listed)}`;
	const child = await Sandbox.create(snap.snapshotId);
	const text = await child.files.read('/tmp/e2b/snap.txt');
	await child.kill();
	if (text !== 'in the snapshot') return `child read ${JSON.stringify(text)}`;
	if (!(await Sandbox.deleteSnapshot(snap.snapshotId))) return 'delete said not found';
	if (await Sandbox.deleteSnapshot(snap.snapshotId)) return 'a second delete found it';
});

await check('fork', async () => {
	await sbx.files.write('/tmp/e2b/fork.txt', 'before the fork');
	const kids = await sbx.fork({ count: 2, timeoutMs: 120_000 });
	if (kids.length !== 2 || kids.some((k) => !(k instanceof Sandbox))) return `forks: ${kids.map((k) => k?.message ?? k?.sandboxId)}`;
	if (kids[0].sandboxId === kids[1].sandboxId || kids.some((k) => k.sandboxId === sbx.sandboxId)) return 'ids not distinct';
	for (const k of kids) {
		if ((await k.files.read('/tmp/e2b/fork.txt')) !== 'before the fork') return `${k.sandboxId} lacks the file`;
		const r = await k.commands.run('echo forked');
		if (r.stdout !== 'forked\n') return `${k.sandboxId}: ${JSON.stringify(r.stdout)}`;
	}
	await kids[0].files.write('/tmp/e2b/fork.txt', 'changed in one');
	if ((await kids[1].files.read('/tmp/e2b/fork.txt')) !== 'before the fork') return "a sibling's write is seen";
	if ((await sbx.files.read('/tmp/e2b/fork.txt')) !== 'before the fork') return "a fork's write reached its parent";
	if ((await sbx.getInfo()).state !== 'running') return 'the parent is not running after the fork';
	for (const k of kids) await k.kill();
});

await check('network_update_needs_network', async () => {
	try {
		await sbx.updateNetwork({ allowOut: ['198.51.100.7'] });
		return 'updated the lists of a sandbox without network';
	} catch (e) {
		if (!/network/i.test(e?.message) || !/^400/.test(e?.message)) return `${e?.name}: ${e?.message}`;
	}
});

await check('envd_needs_the_token', async () => {
	const r = await fetch(`${base}/e2b/envd/process.Process/List`, {
		method: 'POST',
		headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': 'f'.repeat(32) },
		body: '{}',
	});
	const j = await r.json();
	if (r.status !== 401 || j.code !== 'unauthenticated') return `${r.status} ${JSON.stringify(j)}`;
});

await check('unknown_template_named', async () => {
	try {
		await Sandbox.create('no-such-template');
		return 'created';
	} catch (e) {
		if (!/no-such-template.*neither a husk runtime/.test(e?.message)) return `${e?.name}: ${e?.message}`;
	}
});

await check('rest_needs_a_key', async () => {
	try {
		await Sandbox.list({ apiKey: 'not-a-key' }).nextItems();
		return 'listed with a bad key';
	} catch (e) {
		if (e?.name !== 'AuthenticationError') return `${e?.name}: ${e?.message}`;
	}
});

await check('set_timeout_ends_it', async () => {
	const s = await Sandbox.create(template, { timeoutMs: 600_000 });
	await s.setTimeout(1000);
	await waitStatus(s.sandboxId, 'terminated');
	try {
		await Sandbox.getInfo(s.sandboxId);
		return 'getInfo found it after its timeout';
	} catch (e) {
		if (!(e instanceof SandboxNotFoundError)) return `${e?.name}: ${e?.message}`;
	}
});

// lifecycle.onTimeout 'pause' (E2B's autoPause): at its timeout it is paused, not ended.
await check('timeout_pauses_on_timeout_pause', async () => {
	const s = await Sandbox.create(template, { timeoutMs: 600_000, lifecycle: { onTimeout: 'pause' } });
	await s.setTimeout(1000);
	await waitStatus(s.sandboxId, 'paused,terminated,failed');
	const info = await Sandbox.getInfo(s.sandboxId);
	await Sandbox.kill(s.sandboxId);
	if (info.state !== 'paused') return `state ${info.state} after its timeout, not paused`;
});

await check('kill', async () => {
	if (!(await Sandbox.kill(sbx.sandboxId))) return 'kill said not found';
	if (await Sandbox.kill(sbx.sandboxId)) return 'a second kill found it';
	if (await sbx.isRunning()) return 'isRunning after kill';
});

// By domain alone (E2B_DOMAIN=D, what a self-hosted E2B is pointed at; huskd
// --public-domain D, here E2B_TEST_DOMAIN): E2B's API at api.D, a sandbox's
// envd at 49983-<id>.D. Sent to huskd's own address with that Host.
function byHost(method, host, path, headers = {}, body) {
	const u = new URL(base);
	return new Promise((resolve, reject) => {
		const q = http.request({ host: u.hostname, port: u.port, method, path, agent: false, headers: { host, ...headers, ...(body ? { 'content-type': 'application/json' } : {}) } }, (res) => {
			let text = '';
			res.setEncoding('utf8');
			res.on('data', (d) => (text += d));
			res.on('end', () => {
				let json = null;
				try {
					json = JSON.parse(text);
				} catch {}
				resolve({ status: res.statusCode, text, json });
			});
		});
		q.on('error', reject);
		q.end(body ? JSON.stringify(body) : undefined);
	});
}
const domain = process.env.E2B_TEST_DOMAIN;
if (domain)
	await check('served_by_domain', async () => {
		const api = `api.${domain}`;
		const none = await byHost('GET', api, '/v2/sandboxes');
		if (none.status !== 401) return `list without a key: ${none.status} ${none.text.slice(0, 120)}`;
		const c = await byHost('POST', api, '/v2/sandboxes', { 'X-API-Key': key }, { templateID: template, timeout: 300 });
		const id = c.json?.sandboxID;
		if (c.status !== 201 || !id || c.json.domain !== domain) return `create: ${c.status} ${c.text.slice(0, 200)}`;
		const envd = `49983-${id}.${domain}`;
		const auth = { 'E2b-Sandbox-Id': id, 'X-Access-Token': c.json.envdAccessToken };
		const h = await byHost('GET', envd, '/health', auth);
		if (h.status !== 204) return `envd health: ${h.status} ${h.text.slice(0, 120)}`;
		const st = await byHost('POST', envd, '/filesystem.Filesystem/Stat', auth, { path: '/' });
		if (st.status !== 200 || st.json?.entry?.type !== 'FILE_TYPE_DIRECTORY') return `Stat: ${st.status} ${st.text.slice(0, 200)}`;
		const bad = await byHost('GET', envd, '/health', { 'E2b-Sandbox-Id': id, 'X-Access-Token': '0'.repeat(32) });
		if (bad.status !== 401) return `envd with a wrong token: ${bad.status}`;
		const k = await byHost('DELETE', api, `/sandboxes/${id}`, { 'X-API-Key': key });
		if (k.status !== 204) return `kill: ${k.status} ${k.text.slice(0, 120)}`;
	});

if (process.env.E2B_KEEP)
	await check('deadline_kept', async () => {
		const s = await Sandbox.create(template, { timeoutMs: 3_600_000 });
		const info = await s.getInfo();
		writeFileSync(process.env.E2B_KEEP, JSON.stringify({ id: s.sandboxId, endAt: info.endAt.toISOString() }));
	});

process.exit(failed() ? 1 : 0);
