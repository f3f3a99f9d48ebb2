// Template benchmark (issue J) with the published client: create -> first
// exec of base:latest, 256Mi, N times (HUSK_BENCH_TEMPLATE_RUNS, default 5),
// each sandbox destroyed before the next. MODE=cold: huskd runs with
// --templates off, every create boots. MODE=template: the first create makes
// the shape's template (its own figure is not counted), the bench waits for
// it (the huskd log says ready), then the N creates restore it; then
// HUSK_BENCH_CHILDREN (20) held at once, their VMMs' PSS summed; MODE=cold
// also gives the RSS of one booted sandbox's VMM (a copy of its memory).
// Both: a sandbox writes HUSK_BENCH_DIRTY_MIB (64) of random bytes into its
// RAM (/dev/shm) and is paused: a full snapshot when booted, a diff over the
// template's memory when restored; MODE=template also times a raw write of
// as many bytes into huskd's state folder (HUSK_STATE), fsynced.
// MODE=warm (huskd --warm-pool 1, the template made by the run before): the
// first create makes a warm VMM; each of the N creates waits until one is
// ready (the huskd log says so), takes it, and is timed to its first exec; then
// the same for a snapshot's children (the first child leaves a warm VMM of it);
// then a template child paused and resumed with its next VMM made ahead
// (huskd --resume-ahead; the cold and template runs have it off).
// Every timed start comes after a scrub (scrub() below).
// Prints key=value lines for tools/bench/templates.sh.
import { createRequire } from 'node:module';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, readdirSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { createCipheriv, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';

const req = createRequire(new URL('../../tests/api/client/package.json', import.meta.url));
const { SandboxClient } = await import(req.resolve('@agentuity/core'));
const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
const mode = process.env.MODE;
const runs = Number(process.env.HUSK_BENCH_TEMPLATE_RUNS ?? 5);
const children = Number(process.env.HUSK_BENCH_CHILDREN ?? 20);
const now = () => performance.now();
// Before each timed start, as between the boot bench's boots (tools/bench/scrub.sh says why).
const scrub = () => execFileSync(new URL('scrub.sh', import.meta.url).pathname, { stdio: 'ignore' });
const out = (k, v) => console.log(`${k}=${typeof v === 'number' ? v.toFixed(1) : v}`);
const pct = (a, p) => {
	const s = [...a].sort((x, y) => x - y);
	return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
};
const shape = { runtime: 'base:latest', resources: { memory: '256Mi' } };
const dirtyMib = Number(process.env.HUSK_BENCH_DIRTY_MIB ?? 64);
// MODE=template: this many creates (each to its first exec, then destroyed), so many at a time
// (the nested host's own kernel has crashed with 45 and more guests up at once).
const burst = Number(process.env.HUSK_BENCH_BURST ?? 100);
const burstAtOnce = Number(process.env.HUSK_BENCH_BURST_AT_ONCE ?? 8);

// KiB of field (Pss, Rss) of each running husk-vmm (those whose arguments pick
// says yes to: all by default), from /proc.
function vmmKib(field, pick = () => true) {
	const out = [];
	for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
		try {
			const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
			if (!/husk-vmm$/.test(args[0]) || !args.includes('--vsock') || !pick(args)) continue;
			const m = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+)`, 'm'));
			if (m) out.push(Number(m[1]));
		} catch {
			/* gone meanwhile */
		}
	}
	return out;
}

async function once() {
	const t0 = now();
	const sb = await client.create(shape);
	const ex = await sb.execute({ command: ['true'] });
	if (ex.exitCode !== 0) {
		// What huskd saw of this sandbox: a child that died should say why somewhere.
		const story = readFileSync(process.env.HUSKD_LOG, 'utf8')
			.split('\n')
			.filter((l) => l.includes(`[${sb.id}]`))
			.slice(-8)
			.join('\n  ');
		throw new Error(`true: exit ${ex.exitCode} (${ex.status}: ${ex.error ?? 'no error given'})\n  ${story}`);
	}
	return { ms: now() - t0, sb };
}

// Until the huskd log holds n lines matching re (a hang guard bounds it).
async function logLines(re, n) {
	for (let i = 0; ; i++) {
		if ((readFileSync(process.env.HUSKD_LOG, 'utf8').match(re) ?? []).length >= n) return;
		if (i > 3000) throw new Error(`${re} not in the huskd log ${n} times`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

if (mode === 'warm') {
	const first = await once();
	await first.sb.destroy();
	const t = [];
	let taken = 0;
	for (let i = 0; i < runs; i++) {
		await logLines(/a warm VMM of base:latest \(256 MiB, 1 vCPUs\) is ready/g, i + 1);
		scrub();
		const { ms, sb } = await once();
		const log = readFileSync(process.env.HUSKD_LOG, 'utf8');
		if (new RegExp(`\\[${sb.id}\\] created: .*a warm VMM`).test(log)) taken++;
		t.push(ms);
		console.error(`templates bench: warm create -> first exec ${ms.toFixed(0)} ms`);
		await sb.destroy();
	}
	out('warm_first_exec_p50_ms', pct(t, 50));
	out('warm_first_exec_max_ms', Math.max(...t));
	out('warm_taken', taken);
	out('warm_runs', runs);
	// A snapshot's children the same way: its first child leaves a warm VMM of the snapshot.
	const { sb: src } = await once();
	const snap = await client.createSnapshot(src.id, { name: 'bench-warm-snap' });
	await src.destroy();
	const child = { snapshot: snap.snapshotId, resources: { memory: '256Mi' } };
	await (await client.create(child)).destroy();
	const ready = new RegExp(`a warm VMM of snapshot ${snap.snapshotId} \\(256 MiB, 1 vCPUs\\) is ready`, 'g');
	const ts = [];
	let staken = 0;
	for (let i = 0; i < runs; i++) {
		await logLines(ready, i + 1);
		scrub();
		const t0 = now();
		const c = await client.create(child);
		const ex = await c.execute({ command: ['true'] });
		if (ex.exitCode !== 0) throw new Error(`true: exit ${ex.exitCode}`);
		ts.push(now() - t0);
		if (new RegExp(`\\[${c.id}\\] created: .*a warm VMM of its snapshot`).test(readFileSync(process.env.HUSKD_LOG, 'utf8'))) staken++;
		console.error(`templates bench: warm snapshot child -> first exec ${ts[i].toFixed(0)} ms`);
		await c.destroy();
	}
	out('warm_snapchild_first_exec_p50_ms', pct(ts, 50));
	out('warm_snap_taken', staken);
	await client.deleteSnapshot(snap.snapshotId);
	// A template child's resume with its next VMM made ahead (huskd --resume-ahead, on here).
	await pauseResume('ahead', true);
	process.exit(0);
}

if (mode === 'template') {
	const first = await once();
	await first.sb.destroy();
	// The template is made in the background; its log line is the event (a hang guard bounds it).
	for (let i = 0; ; i++) {
		const log = readFileSync(process.env.HUSKD_LOG, 'utf8');
		if (/template of base:latest \(256 MiB, 1 vCPUs\) ready/.test(log)) break;
		const failed = log.match(/template of .* not made: .*/);
		if (failed) throw new Error(failed[0]);
		if (i > 3000) throw new Error('the template was not made; see the huskd log');
		await new Promise((r) => setTimeout(r, 100));
	}
	console.error('templates bench: the template is made');
}
const t = [];
for (let i = 0; i < runs; i++) {
	scrub();
	const { ms, sb } = await once();
	t.push(ms);
	console.error(`templates bench: ${mode} create -> first exec ${ms.toFixed(0)} ms`);
	await sb.destroy();
}
out(`${mode}_first_exec_p50_ms`, pct(t, 50));
out(`${mode}_first_exec_max_ms`, Math.max(...t));
if (mode === 'cold') {
	const { sb } = await once();
	const rss = vmmKib('Rss');
	if (rss.length !== 1) throw new Error(`${rss.length} VMMs running, wanted the one`);
	out('copy_rss_kib', rss[0]);
	await sb.destroy();
}
if (mode === 'template') {
	// N children held at once: their VMMs' PSS summed.
	const held = [];
	for (let i = 0; i < children; i++) {
		held.push((await once()).sb);
		console.error(`templates bench: ${i + 1} of ${children} held`);
	}
	const pss = vmmKib('Pss');
	out('children_n', pss.length);
	out('children_pss_kib', pss.reduce((a, b) => a + b, 0));
	await Promise.all(held.map((s) => s.destroy()));
}

if (mode === 'template') {
	const t = [],
		failed = [];
	let next = 0;
	const t0 = now();
	await Promise.all(
		Array.from({ length: burstAtOnce }, async () => {
			while (next < burst) {
				next++;
				// A failed start is counted and said, not the end of the run.
				try {
					const r = await once();
					t.push(r.ms);
					await r.sb.destroy();
				} catch (e) {
					failed.push(String(e.message ?? e).slice(0, 2000));
					console.error(`templates bench: a create failed: ${failed.at(-1)}`);
				}
			}
		})
	);
	const wall = now() - t0;
	console.error(`templates bench: ${burst} creates in ${(wall / 1000).toFixed(1)} s`);
	out('burst_n', burst);
	out('burst_failed', failed.length);
	out('burst_at_once', burstAtOnce);
	out('burst_per_s', (burst * 1000) / wall);
	out('burst_first_exec_p50_ms', pct(t, 50));
	out('burst_first_exec_p99_ms', pct(t, 99));
}

// A child of a snapshot with memory, once the snapshot's memory file is made (after its
// first child): create -> first exec, as a template's child.
if (mode === 'template') {
	const { sb: src } = await once();
	const snap = await client.createSnapshot(src.id, { name: 'bench-memfile' });
	await src.destroy();
	console.error(`templates bench: snapshot ${snap.snapshotId} taken`);
	const first = await client.create({ snapshot: snap.snapshotId, resources: { memory: '256Mi' } });
	await first.destroy();
	console.error('templates bench: its first child made; waiting for its memory file');
	for (let i = 0; ; i++) {
		if (readFileSync(process.env.HUSKD_LOG, 'utf8').includes(`snapshot ${snap.snapshotId} has a memory file`)) break;
		if (i > 3000) throw new Error('the snapshot got no memory file; see the huskd log');
		await new Promise((r) => setTimeout(r, 100));
	}
	const t = [];
	for (let i = 0; i < runs; i++) {
		scrub();
		const t0 = now();
		const c = await client.create({ snapshot: snap.snapshotId, resources: { memory: '256Mi' } });
		const ex = await c.execute({ command: ['true'] });
		if (ex.exitCode !== 0) throw new Error(`true: exit ${ex.exitCode}`);
		t.push(now() - t0);
		await c.destroy();
	}
	out('snapchild_first_exec_p50_ms', pct(t, 50));
	await client.deleteSnapshot(snap.snapshotId);
}

// Pause after dirtying: huskd's own figure (its log's "paused in N ms") and the file's size; then
// resume -> first exec. ahead: huskd makes the sandbox's next VMM once it is paused (--resume-ahead)
// and the resume waits until that VMM listens (its control socket is there), as a later resume would.
async function pauseResume(tag, ahead) {
	const { sb } = await once();
	const ex = await sb.execute({ command: ['sh', '-c', `head -c ${dirtyMib}M /dev/urandom >/dev/shm/d`] });
	if (ex.exitCode !== 0) throw new Error(`dirtying: exit ${ex.exitCode}`);
	await sb.pause();
	let m = null;
	for (let i = 0; !m; i++) {
		m = readFileSync(process.env.HUSKD_LOG, 'utf8').match(new RegExp(`\\[${sb.id}\\] paused in (\\d+) ms.*`));
		if (i > 3000) throw new Error(`${sb.id} did not pause`);
		if (!m) await new Promise((r) => setTimeout(r, 100));
	}
	if ((mode !== 'cold') !== /a diff over its memory file/.test(m[0])) throw new Error(`unexpected: ${m[0]}`);
	const dir = `${process.env.HUSK_STATE}/sandboxes/${sb.id}`;
	if (!ahead) {
		out(`${tag}_pause_ms`, Number(m[1]));
		out(`${tag}_pause_bytes`, statSync(`${dir}/memory.snap`).size);
	}
	for (let i = 0; ahead && !existsSync(`${dir}/control.sock`); i++) {
		if (i > 3000) throw new Error(`${sb.id}: no VMM made ahead`);
		await new Promise((r) => setTimeout(r, 100));
	}
	if (ahead) {
		// Its control socket answers once the restore is done and the guest held: what it holds then.
		const agentctl = new URL('../../build/bin/husk-agentctl', import.meta.url).pathname;
		const st = execFileSync(agentctl, ['--control', `${dir}/control.sock`, 'status'], { encoding: 'utf8' }).trim();
		if (st !== 'paused') throw new Error(`${sb.id}: its VMM made ahead says '${st}'`);
		const held = (f) => vmmKib(f, (args) => args.includes('--held'));
		const [rss, pss] = [held('Rss'), held('Pss')];
		if (rss.length !== 1) throw new Error(`${rss.length} VMMs held, wanted the one`);
		out('held_rss_kib', rss[0]);
		out('held_pss_kib', pss[0]);
	}
	// And back: resume -> first exec, the dirtied pages read back from the pause's file.
	scrub();
	const t0 = now();
	await client.resume(sb.id);
	const rx = await sb.execute({ command: ['true'] });
	if (rx.exitCode !== 0) throw new Error(`true after resume: exit ${rx.exitCode}`);
	out(`${tag}_resume_first_exec_ms`, now() - t0);
	const held = new RegExp(`\\[${sb.id}\\] resuming on its VMM made ahead`).test(readFileSync(process.env.HUSKD_LOG, 'utf8'));
	if (held !== ahead) throw new Error(`${sb.id}: resumed ${held ? '' : 'not '}on a VMM made ahead`);
	await sb.destroy();
}
if (mode !== 'warm') await pauseResume(mode, false);
if (mode === 'template') {
	const buf = randomBytes(dirtyMib << 20), path = `${process.env.HUSK_STATE}/bench-raw-write`;
	const t0 = now();
	const fd = openSync(path, 'w');
	for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
	fsyncSync(fd);
	closeSync(fd);
	out('raw_write_ms', now() - t0);
	out('dirty_mib', dirtyMib);
	unlinkSync(path);
	// Pauses are sealed: each 2 MiB chunk's frame is AES-256-GCM on its own (FORMAT.md), which
	// no raw write pays. The same bytes sealed that way here, on one thread, through node's
	// OpenSSL: what encryption alone costs this host (emulated AES-NI is slow when nested).
	const key = randomBytes(32), t1 = now();
	for (let off = 0, n = 0; off < buf.length; off += 2 << 20, n++) {
		const iv = Buffer.alloc(12);
		iv.writeUInt32BE(n, 8);
		const c = createCipheriv('aes-256-gcm', key, iv);
		c.update(buf.subarray(off, off + (2 << 20)));
		c.final();
		c.getAuthTag();
	}
	out('seal_ms', now() - t1);
}
