// End-to-end tests of huskd with the unmodified published client, part 2:
// pause and resume, disk checkpoints, snapshots and builds (run.mjs has the
// rest). Prints PASS/FAIL lines; HUSK_URL and HUSK_API_KEY say where huskd is.
import { check, client, failures, raw, text, vmmsOf } from './e2e_lib.mjs';

// Pause writes the guest to disk and ends its VMM (its next one may wait held, made ahead of the
// resume: vmmsOf() leaves it out); resume runs a new one from the snapshot: a counting job stops counting and goes on
// after the resume; an execute on a paused sandbox resumes it (autoResumed).
await check('pause_resume', async () => {
	const sb = await client.create({ runtime: 'base:latest', timeout: { paused: '1h' } });
	const count = async () => Number(await text(await sb.readFile('/tmp/count')));
	await client.createJob(sb.id, {
		command: ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done'],
	});
	// Under emulation on a busy machine the job may take a while to write its first number.
	let before = 0;
	for (let i = 0; i < 120 && !(before > 0); i++) {
		await new Promise((ok) => setTimeout(ok, 500));
		before = await count().catch(() => 0);
	}
	const p = await sb.pause();
	const st = (await client.get(sb.id)).status;
	const vmms = vmmsOf(sb.id);
	let again = '';
	try {
		await sb.pause();
	} catch (e) {
		again = e?.name ?? String(e);
	}
	await sb.resume();
	const justAfter = await count();
	// The job counts every 0.1 s: it goes on by itself, or it does not (bounded, as before: 60 s).
	let later = justAfter;
	for (let i = 0; i < 120 && !(later > justAfter); i++) {
		await new Promise((ok) => setTimeout(ok, 500));
		later = await count().catch(() => later);
	}
	await sb.pause();
	const auth = { authorization: `Bearer ${process.env.HUSK_API_KEY}`, 'content-type': 'application/json' };
	const ex = await (await fetch(`${process.env.HUSK_URL}/sandbox/${sb.id}/execute`, {
		method: 'POST', headers: auth, body: JSON.stringify({ command: ['cat', '/tmp/count'] }),
	})).json();
	const info = await client.getExecution(ex.data.executionId, '1m');
	const ev = await client.listEvents(sb.id);
	await sb.destroy();
	if (p.status !== 'paused' || !p.terminatesAt) return `pause answered ${JSON.stringify(p)}`;
	if (st !== 'paused') return `get said ${st} while paused`;
	if (vmms) return `${vmms} husk-vmm process(es) still run for the paused sandbox (its memory should be on disk)`;
	if (!/InvalidState|409|Conflict|Error/.test(again)) return `a second pause gave ${again || 'no error'}`;
	if (!(before > 0)) return `the job did not count before the pause (${before})`;
	if (!(later > justAfter)) return `the job did not go on counting after the resume (${justAfter}, then ${later})`;
	if (ex.autoResumed !== true) return `execute on a paused sandbox: ${JSON.stringify(ex)}`;
	if (info.exitCode !== 0) return `the auto-resumed command: ${JSON.stringify(info)}`;
	const types = (ev.events ?? []).map((e) => e.type).join(' ');
	if (!/\bpause\b/.test(types) || !/\bresume\b/.test(types)) return `events: ${types}`;
});

await check('paused_timeout', async () => {
	const sb = await client.create({ runtime: 'base:latest', timeout: { paused: '2s' } });
	await sb.execute({ command: ['true'] });
	const p = await sb.pause();
	// huskd's own long-poll answers as the sandbox terminates (or after a minute: a failure).
	const w = await raw('GET', `/sandbox/status/${sb.id}?waitForStatus=terminated&waitMs=60000`);
	const woke = Date.now();
	const info = await client.get(sb.id);
	if (!p.terminatesAt) return 'no terminatesAt for a 2s paused timeout';
	if (info.status !== 'terminated') return `status ${info.status} (the long-poll: ${w.status} ${JSON.stringify(w.data)}) a minute after a 2s paused timeout`;
	// Not before its time (both clocks are this machine's).
	const due = Date.parse(p.terminatesAt);
	if (Number.isNaN(due)) return `terminatesAt ${JSON.stringify(p.terminatesAt)} is not a time`;
	const early = due - woke;
	if (early > 500) return `terminated ${early} ms before its terminatesAt ${p.terminatesAt}`;
});

// Disk checkpoints: a file written after a checkpoint is gone after its
// restore, one written before is back; later checkpoints go with the restore.
await check('disk_checkpoints', async () => {
	const sb = await client.create({ runtime: 'base:latest' });
	const sh = async (cmd) => {
		const ex = await sb.execute({ command: ['sh', '-c', cmd] });
		return ex.exitCode === 0 && ex.stdoutStreamUrl ? (await (await fetch(ex.stdoutStreamUrl)).text()).trim() : `exit ${ex.exitCode}`;
	};
	await sh('echo one > /root/a');
	const c1 = await client.createDiskCheckpoint(sb.id, 'first');
	const afterCkpt = await sh('cat /root/a; echo two > /root/b');
	const c2 = await client.createDiskCheckpoint(sb.id, 'second');
	let dup = '';
	try {
		await client.createDiskCheckpoint(sb.id, 'first');
	} catch (e) {
		dup = String(e?.message ?? e);
	}
	await sh('echo three > /root/c; rm /root/a');
	const list = await client.listDiskCheckpoints(sb.id);
	const got = await client.getDiskCheckpoint(sb.id, c1.id);
	await got.restore();
	const restored = await sh('cat /root/a 2>&1; cat /root/b 2>&1; cat /root/c 2>&1; true');
	const after = await client.listDiskCheckpoints(sb.id);
	await c1.delete();
	const last = await client.listDiskCheckpoints(sb.id);
	await sb.destroy();
	if (c1.name !== 'first' || c1.parent !== '' || !/^ckpt_/.test(c1.id)) return `create: ${JSON.stringify(c1)}`;
	if (c2.parent !== 'first') return `second's parent ${JSON.stringify(c2.parent)}`;
	if (afterCkpt !== 'one') return `the sandbox after a checkpoint read ${JSON.stringify(afterCkpt)}`;
	if (!/first/.test(dup)) return `a second checkpoint named first: ${dup || 'no error'}`;
	if (list.map((c) => c.name).join(',') !== 'first,second') return `list ${JSON.stringify(list)}`;
	if (!/^one\n.*No such file.*\n.*No such file/s.test(restored)) return `after restore: ${JSON.stringify(restored)}`;
	if (after.map((c) => c.name).join(',') !== 'first') return `after restore the list is ${JSON.stringify(after)}`;
	if (last.length !== 0) return `after delete the list is ${JSON.stringify(last)}`;
});

// Snapshots: children see the snapshot's files and not each other's; with its
// memory (the default) they resume from it (a file on devtmpfs, which lives
// only in memory, survives); lineage, tags, delete while in use.
await check('snapshots', async () => {
	const sh = async (sb, cmd) => {
		const ex = await sb.execute({ command: ['sh', '-c', cmd] });
		return ex.stdoutStreamUrl ? (await (await fetch(ex.stdoutStreamUrl)).text()).trim() : `exit ${ex.exitCode}`;
	};
	const sb = await client.create({ runtime: 'base:latest' });
	await sh(sb, 'echo from-parent > /root/p; echo in-memory > /dev/husk-marker');
	const s1 = await client.createSnapshot(sb.id, { name: 'e2e-snap', description: 'the parent', tag: 'v1' });
	const srcAfter = await sh(sb, 'cat /root/p; echo more > /root/q');
	// The snapshot's clock stands still while it waits: a child must not inherit that.
	await new Promise((ok) => setTimeout(ok, 15000));
	const c1 = await client.create({ snapshot: 'e2e-snap:v1' });
	const c2 = await client.create({ snapshot: s1.snapshotId });
	await sh(c1, 'echo c1 > /root/only-c1');
	const c1sees = await sh(c1, 'cat /root/p; cat /dev/husk-marker 2>&1; cat /root/q 2>&1; true');
	const c2sees = await sh(c2, 'cat /root/p; cat /root/only-c1 2>&1; true');
	const skew = Number(await sh(c1, 'date +%s')) - Date.now() / 1000;
	const rand = [await sh(c1, 'od -An -tx1 -N16 /dev/urandom'), await sh(c2, 'od -An -tx1 -N16 /dev/urandom')];
	const s2 = await client.createSnapshot(c1.id, { name: 'e2e-snap', tag: 'v2' });
	const lineage = await client.getSnapshotLineage({ snapshot: s2.snapshotId });
	const list = await client.listSnapshots();
	const got = await client.getSnapshot(s1.snapshotId);
	const tagged = await client.tagSnapshot(s1.snapshotId, 'stable');
	const byTag = await client.create({ snapshot: 'e2e-snap:stable' });
	const byTagSees = await sh(byTag, 'cat /root/p');
	const untagged = await client.tagSnapshot(s1.snapshotId, null);
	await client.deleteSnapshot(s1.snapshotId);
	let getErr = '';
	try {
		await client.getSnapshot(s1.snapshotId);
	} catch (e) {
		getErr = `${e?.name}: ${e?.message}`;
	}
	const c2still = await sh(c2, 'cat /root/p');
	let createErr = '';
	try {
		await client.create({ snapshot: s1.snapshotId });
	} catch (e) {
		createErr = String(e?.message ?? e);
	}
	const lineageAfter = await client.getSnapshotLineage({ snapshot: s2.snapshotId });
	for (const x of [sb, c1, c2, byTag]) await x.destroy();
	await client.deleteSnapshot(s2.snapshotId);
	if (!/^snp_/.test(s1.snapshotId) || s1.name !== 'e2e-snap' || s1.tag !== 'v1' || s1.description !== 'the parent')
		return `create: ${JSON.stringify(s1)}`;
	if (srcAfter !== 'from-parent') return `the parent after its snapshot read ${JSON.stringify(srcAfter)}`;
	if (!/^from-parent\nin-memory\n.*No such file/s.test(c1sees)) return `child 1 saw ${JSON.stringify(c1sees)}`;
	if (!/^from-parent\n.*No such file/s.test(c2sees)) return `child 2 saw ${JSON.stringify(c2sees)}`;
	if (!(Math.abs(skew) < 5)) return `a child's clock is ${skew.toFixed(1)} s off the host's`;
	if (rand[0] === rand[1] || rand[0].length < 32) return `two children read the same random bytes: ${JSON.stringify(rand)}`;
	if (s2.parentSnapshotId !== s1.snapshotId) return `s2's parent ${s2.parentSnapshotId}`;
	if (lineage.lineage.map((l) => l.snapshotId).join() !== [s2.snapshotId, s1.snapshotId].join())
		return `lineage ${JSON.stringify(lineage)}`;
	if (!list.snapshots.some((s) => s.snapshotId === s1.snapshotId) || list.total < 2) return `list ${JSON.stringify(list)}`;
	if (got.snapshotId !== s1.snapshotId) return `get ${JSON.stringify(got)}`;
	if (tagged.tag !== 'stable' || untagged.tag) return `tag ${tagged.tag}, untag ${untagged.tag}`;
	if (byTagSees !== 'from-parent') return `a child by tag saw ${JSON.stringify(byTagSees)}`;
	if (!/not found/i.test(getErr)) return `get after delete: ${getErr || 'no error'}`;
	if (c2still !== 'from-parent') return `a child after its snapshot's delete saw ${JSON.stringify(c2still)}`;
	if (!/not found/.test(createErr)) return `create from a deleted snapshot: ${createErr || 'no error'}`;
	if (!lineageAfter.lineage[1]?.deleted) return `lineage after delete ${JSON.stringify(lineageAfter)}`;
});

// A declarative build (API.md (38)-(40), what `husk snapshot build` sends):
// the context unpacked into the workspace, the env kept for its sandboxes,
// an unchanged content hash skipped.
await check('snapshot_build', async () => {
	const { spawnSync } = await import('node:child_process');
	const { mkdtempSync, writeFileSync } = await import('node:fs');
	const raw = async (method, path, body, type = 'application/json') => {
		const r = await fetch(`${process.env.HUSK_URL}${path}`, {
			method,
			headers: { Authorization: `Bearer ${process.env.HUSK_API_KEY}`, 'Content-Type': type },
			body: type === 'application/json' ? JSON.stringify(body) : body,
		});
		return r.json();
	};
	const dir = mkdtempSync('/tmp/husk-build-');
	writeFileSync(`${dir}/hello.txt`, 'hello from the context\n');
	const tgz = spawnSync('tar', ['-czf', '-', '-C', dir, '.']).stdout;
	const init = await raw('POST', '/sandbox/snapshots/build', { runtime: 'base:latest', name: 'e2e-build', tag: 'v1', contentHash: 'h1' });
	const id = init.data?.snapshotId;
	const up = await raw('PUT', `/sandbox/snapshots/${id}/upload`, tgz, 'application/gzip');
	const fin = await raw('POST', `/sandbox/snapshots/${id}/finalize`, {
		sizeBytes: 23,
		fileCount: 1,
		files: [{ path: 'hello.txt', size: 23, sha256: 'x', contentType: 'text/plain', mode: 420 }],
		env: { BUILT: 'yes' },
		metadata: { purpose: 'e2e' },
	});
	const sb = await client.create({ snapshot: 'e2e-build:v1' });
	const ex = await sb.execute({ command: ['sh', '-c', 'cat /home/agentuity/hello.txt; echo "$BUILT"'] });
	const out = ex.stdoutStreamUrl ? (await (await fetch(ex.stdoutStreamUrl)).text()).trim() : '';
	await sb.destroy();
	const again = await raw('POST', '/sandbox/snapshots/build', { runtime: 'base:latest', name: 'e2e-build', tag: 'v1', contentHash: 'h1' });
	const forced = await raw('POST', '/sandbox/snapshots/build', { runtime: 'base:latest', name: 'e2e-build', tag: 'v1', contentHash: 'h1', force: true });
	const info = await client.getSnapshot(id);
	await client.deleteSnapshot(id);
	if (!/^snp_/.test(id ?? '')) return `init: ${JSON.stringify(init)}`;
	if (!up.success || up.data?.success !== true) return `upload: ${JSON.stringify(up)}`;
	if (!fin.success || fin.data?.snapshotId !== id) return `finalize: ${JSON.stringify(fin)}`;
	if (out !== 'hello from the context\nyes') return `a sandbox from the build read ${JSON.stringify(out)}`;
	if (!again.data?.unchanged || again.data.existingId !== id) return `an unchanged rebuild: ${JSON.stringify(again)}`;
	if (forced.data?.unchanged || !/^snp_/.test(forced.data?.snapshotId ?? '') || forced.data.snapshotId === id)
		return `a forced rebuild: ${JSON.stringify(forced)}`;
	if (info.userMetadata?.purpose !== 'e2e' || info.files?.[0]?.path !== 'hello.txt') return `info ${JSON.stringify(info)}`;
});


process.exit(failures() ? 1 : 0);
