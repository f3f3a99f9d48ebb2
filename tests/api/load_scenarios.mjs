// The scenarios of the load test (tests/api/load.mjs): each takes the test's
// context ctx (client, api, must, track, ok, fail, scenario, expectRecord,
// hold, ping, killedChild, randomFor, LIMIT, BASE: see load.mjs) and records
// its checks through it.
import { ENDLESS, Exact, MiB, PAT, YesCheck, healthySpec, outputProblem, readStream, sink } from './load_check.mjs';

// ---- 1. healthy executions: random output, every byte checked ----

export const healthyExec = async (ctx, sb, tag, R) => {
	const { track, ok, fail, expectRecord } = ctx;
	const spec = healthySpec(R);
	const what = `${sb.id} ${tag} ${spec.command.join(' ').slice(0, 60)}`;
	const out = sink(spec.yes !== undefined ? new YesCheck() : new Exact());
	const err = sink(new Exact());
	const r = await track(`execute ${what}`, sb.execute({ command: spec.command, pipe: { stdout: out, stderr: err } }));
	expectRecord('exit_codes', what, r, spec.status, spec.exit);
	// The client's own read of the streams (its pipe option), to EOF.
	const p1 = outputProblem(spec, out.checker, 'stdout') ?? outputProblem(spec, err.checker, 'stderr');
	if (p1) fail('streams_exact', `${what}: through the client's pipe: ${p1}`);
	else ok('streams_exact');
	// A late reader gets it all again, from the first byte.
	const again = await track(`replay ${what}`, Promise.all([readStream(r.stdoutStreamUrl, spec.yes !== undefined ? new YesCheck() : new Exact()), readStream(r.stderrStreamUrl, new Exact())]));
	const bad = again.find((s) => !s.ended);
	const p2 = bad ? `${bad.error ?? 'not ended'}` : (outputProblem(spec, again[0].checker, 'stdout') ?? outputProblem(spec, again[1].checker, 'stderr'));
	if (p2) fail('streams_exact', `${what}: read again: ${p2}`);
	else ok('streams_exact');
};

// ---- 2. clients that vanish ----

/* yes without end; readers abort mid-stream (and a child is killed); then cancel. */
export const abortedReaders = async (ctx, sb, i, { rint }) => {
	const { client, api, must, track, ok, fail, expectRecord, killedChild, LIMIT } = ctx;
	const name = 'aborted_readers';
	const viaClient = i % 8 === 5;
	let ex, early;
	const abortAt = rint(1, 4 * MiB);
	if (viaClient) {
		// The client's own execute, its pipe aborted through its signal mid-stream.
		const ac = new AbortController();
		const w = sink(new YesCheck(), (n) => n >= abortAt && ac.abort());
		const p = sb.execute({ command: ['yes', ENDLESS], pipe: { stdout: w }, signal: ac.signal });
		const e = await track(`${name}: ${sb.id} client execute aborted`, p.then(
			() => null,
			(e) => e
		));
		if (e?.name !== 'AbortError' && e?.cause?.name !== 'AbortError') return fail(name, `${sb.id}: aborted execute ended with ${e?.name}: ${e?.message}`);
		if (w.checker.bad || w.checker.n < abortAt) return fail(name, `${sb.id}: aborted pipe: ${w.checker.bad ?? `${w.checker.n} bytes`}`);
		const list = await client.listExecutions(sb.id, 10);
		ex = (list.executions ?? []).find((x) => x.status === 'running' || x.status === 'queued');
		if (!ex) return fail(name, `${sb.id}: the aborted execution is not running: ${JSON.stringify(list).slice(0, 400)}`);
	} else {
		ex = await must('POST', `/sandbox/${sb.id}/execute`, { command: ['yes', ENDLESS] });
	}
	// A reader that stays to the end, beside ones that vanish.
	const full = track(`${name}: ${sb.id} full reader of ${ex.executionId}`, readStream(ex.stdoutStreamUrl, new YesCheck()));
	if (!viaClient) early = track(`${name}: ${sb.id} aborted reader`, readStream(ex.stdoutStreamUrl, new YesCheck(), { abortAt }));
	const late = track(`${name}: ${sb.id} second aborted reader`, readStream(ex.stdoutStreamUrl, new YesCheck(), { abortAt: rint(1, 2 * MiB) }));
	for (const r of await Promise.all([early, late].filter(Boolean))) {
		if (!r.aborted || r.checker.bad) fail(name, `${sb.id}: a reader meant to vanish mid-stream: ${r.error ?? (r.ended ? 'the stream ended first' : r.checker.bad)}`);
		else ok(name);
	}
	if (i % 8 === 1) await killedChild('killed_clients', 'stream', ex.stdoutStreamUrl, sb.id);
	const c = await track(`${name}: cancel ${ex.executionId}`, api('DELETE', `/sandbox/execution/${ex.executionId}`));
	if (c.status !== 200) fail('cancels', `${sb.id}: DELETE /sandbox/execution/${ex.executionId}: ${c.status} ${c.text.slice(0, 300)}`);
	else expectRecord('cancels', `${sb.id} cancel of yes`, c.json?.data, 'cancelled', 'nonzero');
	const f = await full;
	if (!f.ended || f.checker.bad) return fail('healthy_streams_complete', `${sb.id}: the reader beside aborted ones: ${f.error ?? f.checker.bad ?? 'not ended'} after ${f.checker.n} bytes`);
	if (f.checker.n > LIMIT) return fail('healthy_streams_complete', `${sb.id}: ${f.checker.n} bytes, over the output limit ${LIMIT}`);
	// Once ended, every reader gets the same bytes.
	const again = await track(`${name}: ${sb.id} replay`, readStream(ex.stdoutStreamUrl, new YesCheck()));
	if (!again.ended || again.checker.bad || again.checker.n !== f.checker.n) return fail('healthy_streams_complete', `${sb.id}: replay after cancel: ${again.error ?? again.checker.bad ?? ''} ${again.checker.n} bytes, the live reader had ${f.checker.n}`);
	const rec = await client.getExecution(ex.executionId);
	if (f.checker.n < LIMIT && rec.outputTruncated) return fail('healthy_streams_complete', `${sb.id}: outputTruncated with ${f.checker.n} of ${LIMIT} bytes`);
	ok('healthy_streams_complete');
};

/* sleep 600 with long-polls on it, some aborted (one by a killed process), then cancel. */
export const abortedLongPolls = async (ctx, sb, i) => {
	const { client, api, track, ok, fail, expectRecord, hold, ping, killedChild, BASE } = ctx;
	const name = 'aborted_longpolls';
	// Started by the client's execute, whose long-poll for the result is aborted by its signal.
	const cac = new AbortController();
	const cexec = sb.execute({ command: ['sleep', '600'], signal: cac.signal }).then(
		() => null,
		(e) => e
	);
	const s = await track(`${name}: ${sb.id} waits for running`, api('GET', `/sandbox/status/${sb.id}?waitForStatus=running&waitMs=60000`));
	if (s.json?.data?.status !== 'running') return fail(name, `${sb.id}: status ${s.status} ${s.text.slice(0, 200)}, want running`);
	const list = await client.listExecutions(sb.id, 10);
	const ex = (list.executions ?? []).find((x) => x.status === 'running' || x.status === 'queued');
	if (!ex) return fail(name, `${sb.id}: no running execution listed: ${JSON.stringify(list).slice(0, 400)}`);
	const eid = ex.executionId;
	const gone = [hold(`/sandbox/execution/${eid}?wait=5m`), hold(`/sandbox/status/${sb.id}?waitForStatus=idle&waitMs=300000`), hold(`/sandbox/${sb.id}?waitForStatus=idle&waitMs=300000`)];
	const kept = {
		exec: hold(`/sandbox/execution/${eid}?wait=5m`),
		status: hold(`/sandbox/status/${sb.id}?waitForStatus=idle%2Cterminated%2Cfailed&waitMs=300000`),
		viaClient: track(`${name}: client.getExecution wait 5m`, client.getExecution(eid, '5m')),
	};
	await Promise.all([...gone, kept.exec, kept.status].map((g) => track(`${name}: sending`, g.sent)));
	await ping(sb.id);
	gone.forEach((g) => g.abort());
	cac.abort();
	for (const g of gone) {
		const r = await track(`${name}: aborted`, g.result);
		if (r.aborted) ok(name);
		else fail(name, `${sb.id}: a long-poll meant to be held was answered before its client left: ${JSON.stringify(r).slice(0, 300)}`);
	}
	const ce = await track(`${name}: client execute aborted`, cexec);
	// (The client wraps the AbortError of its long-poll in an APIError of status 0.)
	if (ce?.name !== 'AbortError' && ce?.cause?.name !== 'AbortError') fail(name, `${sb.id}: the client's aborted execute ended with ${ce ? `${ce.name}: ${ce.message} (cause ${ce.cause?.name})` : 'a result'}`);
	else ok(name);
	if (i % 8 === 2) await killedChild('killed_clients', 'longpoll', `${BASE}/sandbox/execution/${eid}?wait=5m`, sb.id);
	const c = await track(`${name}: cancel ${eid}`, api('DELETE', `/sandbox/execution/${eid}`));
	if (c.status !== 200) fail('cancels', `${sb.id}: DELETE /sandbox/execution/${eid}: ${c.status} ${c.text.slice(0, 300)}`);
	else expectRecord('cancels', `${sb.id} cancel of sleep`, c.json?.data, 'cancelled', 'nonzero');
	// The long-polls that stayed wake on the end.
	const e = await track(`${name}: held execution long-poll`, kept.exec.result);
	if (e.status !== 200) fail('longpolls_wake', `${sb.id}: execution long-poll: ${JSON.stringify(e).slice(0, 300)}`);
	else expectRecord('longpolls_wake', `${sb.id} held execution long-poll`, e.json?.data, 'cancelled', 'nonzero');
	const st = await track(`${name}: held status long-poll`, kept.status.result);
	if (st.status !== 200 || st.json?.data?.status !== 'idle') fail('longpolls_wake', `${sb.id}: status long-poll: ${JSON.stringify(st).slice(0, 300)}, want idle`);
	else ok('longpolls_wake');
	expectRecord('longpolls_wake', `${sb.id} client.getExecution(5m)`, await kept.viaClient, 'cancelled', 'nonzero');
};

/* sleep 600 cancelled at once (twice at the same time for some); a child killed mid-upload. */
export const cancelAtOnce = async (ctx, sb, i) => {
	const { api, must, track, ok, fail, expectRecord, killedChild, BASE } = ctx;
	if (i % 8 === 3) await killedChild('killed_clients', 'upload', `${BASE}/fs/${sb.id}`, sb.id);
	const ex = await must('POST', `/sandbox/${sb.id}/execute`, { command: ['sleep', '600'] });
	const twice = i % 8 === 7;
	const answers = await track(`cancel ${ex.executionId}`, Promise.all([api('DELETE', `/sandbox/execution/${ex.executionId}`), twice ? api('DELETE', `/sandbox/execution/${ex.executionId}`) : null]));
	// Two at once reach huskd in either order: the one answered 200 is the first.
	const [a, b] = answers[1]?.status === 200 && answers[0].status !== 200 ? [answers[1], answers[0]] : answers;
	if (a.status !== 200) fail('cancels', `${sb.id}: DELETE /sandbox/execution/${ex.executionId}: ${a.status} ${a.text.slice(0, 300)}`);
	else expectRecord('cancels', `${sb.id} cancel at once`, a.json?.data, 'cancelled', 'nonzero');
	// A second cancel while the first is under way: 409; after it: the record.
	if (b && !(b.status === 409 || (b.status === 200 && b.json?.data?.status === 'cancelled'))) fail('cancels', `${sb.id}: a second DELETE at the same time: ${b.status} ${b.text.slice(0, 300)}`);
	const again = await api('DELETE', `/sandbox/execution/${ex.executionId}`);
	if (again.status !== 200) fail('cancels', `${sb.id}: DELETE of an ended execution: ${again.status} ${again.text.slice(0, 200)}`);
	else expectRecord('cancels', `${sb.id} DELETE after the end`, again.json?.data, 'cancelled', 'nonzero');
	for (const url of [ex.stdoutStreamUrl, ex.stderrStreamUrl]) {
		const r = await readStream(url, new Exact());
		if (!r.ended || r.checker.n) fail('healthy_streams_complete', `${sb.id}: stream of a cancelled sleep: ${r.error ?? ''} ${r.checker.n} bytes`);
		else ok('healthy_streams_complete');
	}
};

// A worker: one sandbox, executions one after another (a sandbox takes one at a time).
export const worker = async (ctx, i, createdOne) => {
	const { client, track, ok, fail, scenario, randomFor } = ctx;
	const R = randomFor(`worker ${i}`);
	const sb = await track(`create worker ${i}`, client.create({ runtime: 'base:latest', name: `load-${i}`, env: { LOAD_INDEX: String(i) } }));
	createdOne(sb.id);
	const special = [null, abortedReaders, abortedLongPolls, cancelAtOnce][i % 4];
	const at = R.rint(1, 4);
	for (let k = 0; k <= 4; k++) {
		if (k === at && special) await scenario(special === abortedReaders ? 'aborted_readers' : special === abortedLongPolls ? 'aborted_longpolls' : 'cancels', `${sb.id} (worker ${i})`, () => special(ctx, sb, i, R));
		else if (special || k < 4) await scenario('streams_exact', `${sb.id} (worker ${i})`, () => healthyExec(ctx, sb, `#${k}`, R));
	}
	// Its environment survived it all.
	const env = new Exact();
	const pe = await sb.execute({ command: ['printenv', 'LOAD_INDEX'], pipe: { stdout: sink(env) } });
	if (pe.exitCode !== 0 || env.text() !== `${i}\n`) fail('exit_codes', `${sb.id}: printenv LOAD_INDEX: exit ${pe.exitCode}, ${JSON.stringify(env.text())}`);
	else ok('exit_codes');
	return sb.id;
};

// ---- 3. destroyed in the middle ----

/* A sandbox destroyed while its command runs (sleep or endless yes, read through the client). */
export const destroyMid = async (ctx, j) => {
	const { client, api, track, ok, fail, expectRecord } = ctx;
	const name = 'destroy_mid_command';
	const sb = await track(`create destroy ${j}`, client.create({ runtime: 'base:latest', name: `load-destroy-${j}` }));
	if (j % 2) await sb.execute({ command: ['true'] });
	const yes = j % 4 < 2;
	const out = sink(yes ? new YesCheck() : new Exact());
	const err = sink(new Exact());
	const p = sb.execute({ command: yes ? ['yes', ENDLESS] : ['sleep', '600'], pipe: { stdout: out, stderr: err } }).catch((e) => e);
	if (yes) {
		await track(`${name}: ${sb.id} first bytes`, Promise.race([out.first, p]));
	} else {
		const s = await track(`${name}: ${sb.id} waits for running`, api('GET', `/sandbox/status/${sb.id}?waitForStatus=running&waitMs=60000`));
		if (s.json?.data?.status !== 'running') return fail(name, `${sb.id}: status ${s.status} ${s.text.slice(0, 200)}, want running`);
	}
	await track(`${name}: destroy ${sb.id}`, client.destroy(sb.id));
	const r = await track(`${name}: ${sb.id} execute after destroy`, p);
	if (r instanceof Error) return fail(name, `${sb.id}: execute of a destroyed sandbox's command: ${r.name}: ${r.message}`);
	expectRecord(name, `${sb.id} its execution`, r, 'cancelled', 'nonzero');
	if (out.checker.bad || err.checker.n || (!yes && out.checker.n)) fail('healthy_streams_complete', `${sb.id}: output of a destroyed command: ${out.checker.bad ?? ''} ${out.checker.n}/${err.checker.n} bytes`);
	else ok('healthy_streams_complete');
	const info = (await api('GET', `/sandbox/${sb.id}?includeDeleted=true`)).json?.data ?? {};
	if (info.status !== 'deleted') fail(name, `${sb.id}: status ${info.status} after destroy, want deleted`);
	else ok(name);
	const again = await api('POST', `/sandbox/${sb.id}/execute`, { command: ['true'] });
	if (again.status !== 410 || again.json?.code !== 'SANDBOX_TERMINATED') fail(name, `${sb.id}: execute on a deleted sandbox: ${again.status} ${again.text.slice(0, 200)}, want 410 SANDBOX_TERMINATED`);
};

/*
 * A request that needs the sandbox sent together with its destroy: a
 * pause, a checkpoint, a file write, an env change. Each is answered (no
 * hang, no 5xx): done, 410 because the sandbox has ended, or 409 because it is
 * in no state for it.
 */
export const destroyRace = async (ctx, j) => {
	const { client, api, track, ok, fail } = ctx;
	const name = 'destroy_races';
	const sb = await track(`create race ${j}`, client.create({ runtime: 'base:latest', name: `load-race-${j}` }));
	await sb.execute({ command: ['true'] });
	const reqs = [
		['POST', `/sandbox/${sb.id}/pause`],
		['POST', `/sandbox/${sb.id}/checkpoint`, { name: `race-${j}` }],
		['POST', `/fs/${sb.id}`, { files: [{ path: 'race.txt', content: Buffer.from('x').toString('base64') }] }],
		['PATCH', `/sandbox/env/${sb.id}`, { env: { RACE: String(j) } }],
	];
	const [mine] = reqs.splice(j % reqs.length, 1);
	const answers = await track(
		`${name}: ${mine[0]} ${mine[1]} beside a destroy`,
		Promise.all([api(...mine), api('DELETE', `/sandbox/${sb.id}`)])
	);
	const [r, d] = answers;
	if (d.status !== 200) fail(name, `${sb.id}: destroy answered ${d.status} ${d.text.slice(0, 200)}`);
	else if (![200, 201, 409, 410].includes(r.status) || (r.status === 410 && r.json?.code !== 'SANDBOX_TERMINATED') || (r.status === 409 && r.json?.code !== 'INVALID_STATE' && r.json?.code !== 'SANDBOX_TERMINATED'))
		fail(name, `${sb.id}: ${mine[0]} ${mine[1]} beside its destroy answered ${r.status} ${r.text.slice(0, 300)}`);
	else ok(name);
};

/* Destroyed (or its queued execution cancelled) before it even finished starting. */
export const whileCreating = async (ctx, j) => {
	const { client, api, must, track, ok, fail, expectRecord, randomFor } = ctx;
	const destroy = j % 2 === 0;
	const name = destroy ? 'destroy_mid_command' : 'cancels';
	const sb = await track(`create early ${j}`, client.create({ runtime: 'base:latest', name: `load-early-${j}` }));
	const ex = await must('POST', `/sandbox/${sb.id}/execute`, { command: ['sleep', '600'] });
	if (destroy) {
		await client.destroy(sb.id);
		expectRecord(name, `${sb.id} queued execution of a sandbox destroyed while starting`, await track(`wait ${ex.executionId}`, client.getExecution(ex.executionId, '1m')), 'cancelled', 'nonzero');
		const info = (await api('GET', `/sandbox/${sb.id}?includeDeleted=true`)).json?.data ?? {};
		if (info.status !== 'deleted') fail(name, `${sb.id}: status ${info.status} after destroy, want deleted`);
	} else {
		const c = await api('DELETE', `/sandbox/execution/${ex.executionId}`);
		if (c.status !== 200) fail(name, `${sb.id}: DELETE of a queued execution: ${c.status} ${c.text.slice(0, 300)}`);
		else expectRecord(name, `${sb.id} queued execution cancelled`, c.json?.data, 'cancelled', 'nonzero');
		await healthyExec(ctx, sb, 'after a cancelled queued one', randomFor(`early ${j}`));
	}
	for (const url of [ex.stdoutStreamUrl, ex.stderrStreamUrl]) {
		const r = await readStream(url, new Exact());
		if (!r.ended || r.checker.n) fail('healthy_streams_complete', `${sb.id}: stream of a never-run command: ${r.error ?? ''} ${r.checker.n} bytes`);
		else ok('healthy_streams_complete');
	}
	return destroy ? null : sb.id;
};

/* client.run(): one-shot sandboxes, output captured by the client. */
export const oneshot = async (ctx, j) => {
	const { client, api, track, ok, fail, randomFor } = ctx;
	const n = j === 0 ? MiB : randomFor(`run ${j}`).rint(0, MiB);
	const r = await track(`run ${j}`, client.run({ runtime: 'base:latest', command: { exec: ['yes', String(n)] } }));
	if (r.exitCode !== 0) fail('oneshot_runs', `run yes ${n}: exit ${r.exitCode}`);
	else if (r.stdout.length !== n || r.stdout !== PAT.subarray(0, n).toString()) fail('oneshot_runs', `run yes ${n}: stdout of ${r.stdout.length} characters, not the ${n} bytes of yes`);
	else ok('oneshot_runs');
	const s = await api('GET', `/sandbox/status/${r.sandboxId}?waitForStatus=terminated%2Cfailed&waitMs=30000`);
	if (s.json?.data?.status !== 'terminated' || s.json?.data?.exitCode !== 0) fail('oneshot_runs', `${r.sandboxId}: status ${s.text.slice(0, 200)}, want terminated with exit code 0`);
	return r.sandboxId;
};
