// User streams against huskd with the fake VMM (tests/api/streams.sh): a
// command's stdin from a stream written while it runs, output routed into a
// stream, timestamps, and the refusals. HUSK_URL, HUSK_API_KEY.
// Prints PASS/FAIL lines "streams/<name>".
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { SandboxClient } from '@agentuity/core';
import { checks, request } from './checks.mjs';

const base = process.env.HUSK_URL;
const key = process.env.HUSK_API_KEY;
// The published client creates run()'s stdin stream here (API.md §6.2).
process.env.AGENTUITY_STREAM_URL = `${base}/streams`;
const client = new SandboxClient({ apiKey: key, url: base });
const { check, failed } = checks('streams');
const req = (method, path, body, auth = true) => request(base, auth ? key : null, method, path, body);

const sha = (b) => createHash('sha256').update(b).digest('hex');

async function newStream(name = 'test') {
	const r = await req('POST', '/streams', { name });
	if (r.status !== 201 || !r.json?.id?.startsWith('str_')) throw new Error(`POST /streams: ${r.status} ${r.text}`);
	return r.json;
}

// A PUT whose body the test writes piece by piece: push(text), end().
function openPut(id) {
	let ctl;
	const body = new ReadableStream({ start: (c) => (ctl = c) });
	const done = fetch(`${base}/streams/${id}`, {
		method: 'PUT',
		headers: { Authorization: `Bearer ${key}` },
		body,
		duplex: 'half',
	}).then(async (r) => ({ status: r.status, text: await r.text() }));
	return { push: (t) => ctl.enqueue(new TextEncoder().encode(t)), end: () => ctl.close(), done };
}

// Reads a stream URL until want(text) holds or it ends; the text so far.
async function readUntil(url, want) {
	const r = await fetch(url, { headers: { Authorization: `Bearer ${key}` } });
	if (r.status !== 200) return `status ${r.status}`;
	const dec = new TextDecoder();
	let text = '';
	for await (const chunk of r.body) {
		text += dec.decode(chunk, { stream: true });
		if (want(text)) break;
	}
	return text;
}

// Phase 2 (tests/api/streams.sh, after huskd's restart): the job's output is followed again.
if (process.argv[2] === 'restarted') {
	const kept = JSON.parse((await import('node:fs')).readFileSync(process.env.STREAMS_KEEP, 'utf8'));
	await check('job_stream_after_restart', async () => {
		let ended = false;
		const reading = readUntil(kept.url, () => false).then((t) => ((ended = true), t));
		const j = (await req('GET', `/sandbox/sandboxes/${kept.sbx}/jobs/${kept.job}`)).json?.data;
		if (j?.status !== 'running') return `the job is ${j?.status}`;
		if (ended) return 'the stream ended while the job ran';
		await req('DELETE', `/sandbox/sandboxes/${kept.sbx}/jobs/${kept.job}`);
		const text = await reading;
		if (text !== '') return `stdout ${JSON.stringify(text)}`;
	});
	await client.destroy(kept.sbx).catch(() => {});
	process.exit(failed() ? 1 : 0);
}

const made = await client.create({ runtime: 'base:latest' });
const sbx = made.id;

await check('run_with_stdin', async () => {
	const r = await client.run({ runtime: 'base:latest', command: { exec: ['cat'] } }, { stdin: Readable.from(['hello ', 'from stdin']) });
	if (r.exitCode !== 0) return `exit ${r.exitCode}`;
	if (r.stdout !== 'hello from stdin') return `stdout ${JSON.stringify(r.stdout)}`;
});

await check('run_with_big_stdin', async () => {
	const data = randomBytes(3 << 20);
	const parts = [];
	for (let i = 0; i < data.length; i += 100000) parts.push(data.subarray(i, i + 100000));
	const out = [];
	const sink = new (await import('node:stream')).Writable({
		write(c, _e, cb) {
			out.push(Buffer.from(c));
			cb();
		},
	});
	const r = await client.run({ runtime: 'base:latest', command: { exec: ['cat'] } }, { stdin: Readable.from(parts), stdout: sink });
	const got = Buffer.concat(out);
	if (r.exitCode !== 0) return `exit ${r.exitCode}`;
	if (sha(got) !== sha(data)) return `${got.length} bytes back of ${data.length}, or different`;
});

await check('run_without_stdin_is_empty', async () => {
	const r = await client.run({ runtime: 'base:latest', command: { exec: ['cat'] } });
	if (r.exitCode !== 0 || r.stdout !== '') return `exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}`;
});

// A oneshot's command ran to its end: lifecycle:completed (with its exit code), then terminated.
await check('oneshot_events_completed', async () => {
	const r = await client.run({ runtime: 'base:latest', command: { exec: ['exit', '3'] } });
	const ev = (await client.listEvents(r.sandboxId)).events ?? [];
	const types = ev.map((e) => e.type);
	const done = ev.find((e) => e.type === 'lifecycle:completed');
	if (r.exitCode !== 3 || !done || types.indexOf('lifecycle:completed') > types.indexOf('lifecycle:terminated')) return `exit ${r.exitCode}, events ${types}`;
	if (done.event?.exitCode !== 3) return `its event ${JSON.stringify(done)}`;
});

// The command reads stdin as it is written: its first line is out before the PUT ends.
await check('stdin_live', async () => {
	const s = await newStream();
	const ex = await req('POST', `/sandbox/${sbx}/execute`, { command: ['cat'], stream: { stdin: s.id } });
	if (ex.status !== 200) return `execute ${ex.status} ${ex.text}`;
	const put = openPut(s.id);
	put.push('first\n');
	const early = await readUntil(ex.json.data.stdoutStreamUrl, (t) => t.includes('first\n'));
	if (early !== 'first\n') return `before the end: ${JSON.stringify(early)}`;
	const st = await req('GET', `/sandbox/execution/${ex.json.data.executionId}`);
	if (st.json?.data?.status !== 'running') return `the command is ${st.json?.data?.status} while stdin is open`;
	put.push('second\n');
	put.end();
	const p = await put.done;
	if (p.status !== 200) return `PUT ${p.status} ${p.text}`;
	const w = await req('GET', `/sandbox/execution/${ex.json.data.executionId}?wait=1m`);
	if (w.json?.data?.status !== 'completed') return `execution ${w.json?.data?.status}`;
	const all = await readUntil(ex.json.data.stdoutStreamUrl, () => false);
	if (all !== 'first\nsecond\n') return `stdout ${JSON.stringify(all)}`;
});

// A stream written (and ended) before the command starts is its whole stdin; it can be read again.
await check('stdin_written_before', async () => {
	const s = await newStream();
	const put = openPut(s.id);
	put.push('already here');
	put.end();
	if ((await put.done).status !== 200) return 'PUT failed';
	for (const round of [1, 2]) {
		const ex = await req('POST', `/sandbox/${sbx}/execute`, { command: ['cat'], stream: { stdin: s.id } });
		if (ex.status !== 200) return `execute ${ex.status} ${ex.text}`;
		const w = await req('GET', `/sandbox/execution/${ex.json.data.executionId}?wait=1m`);
		const out = await readUntil(ex.json.data.stdoutStreamUrl, () => false);
		if (w.json?.data?.status !== 'completed' || out !== 'already here') return `round ${round}: ${w.json?.data?.status}, ${JSON.stringify(out)}`;
	}
	const again = await readUntil(s.url, () => false);
	if (again !== 'already here') return `its signed url read ${JSON.stringify(again)}`;
});

// Output into a stream of the caller's: the answer's URL names it, and a key of the org reads it.
await check('stdout_and_stderr_into_a_stream', async () => {
	const s = await newStream('out');
	const ex = await req('POST', `/sandbox/${sbx}/execute`, { command: ['stderr', 'to the same'], stream: { stdout: s.id, stderr: s.id } });
	if (ex.status !== 200) return `execute ${ex.status} ${ex.text}`;
	const d = ex.json.data;
	if (!d.stdoutStreamUrl?.includes(`/streams/${s.id}?`) || d.stdoutStreamUrl !== d.stderrStreamUrl) return `urls ${d.stdoutStreamUrl} ${d.stderrStreamUrl}`;
	await req('GET', `/sandbox/execution/${d.executionId}?wait=1m`);
	const r = await fetch(`${base}/streams/${s.id}`, { headers: { Authorization: `Bearer ${key}` } });
	const text = await r.text();
	if (r.status !== 200 || text !== 'to the same\n') return `GET with the key: ${r.status} ${JSON.stringify(text)}`;
	const put = await req('PUT', `/streams/${s.id}`, 'more');
	if (put.status !== 409) return `a PUT into a written stream: ${put.status}`;
});

await check('timestamps', async () => {
	const ex = await req('POST', `/sandbox/${sbx}/execute`, { command: ['echo', 'stamped'], stream: { timestamps: true } });
	await req('GET', `/sandbox/execution/${ex.json?.data?.executionId}?wait=1m`);
	const out = await readUntil(ex.json.data.stdoutStreamUrl, () => false);
	if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z stamped\n$/.test(out)) return `stdout ${JSON.stringify(out)}`;
	const plain = await req('POST', `/sandbox/${sbx}/execute`, { command: ['echo', 'plain'] });
	await req('GET', `/sandbox/execution/${plain.json?.data?.executionId}?wait=1m`);
	const p = await readUntil(plain.json.data.stdoutStreamUrl, () => false);
	if (p !== 'plain\n') return `without timestamps: ${JSON.stringify(p)}`;
});

// Past huskd's --output-limit (4 MiB here) a PUT is refused and the stream ends at the limit.
await check('put_over_the_limit', async () => {
	const s = await newStream();
	const r = await fetch(`${base}/streams/${s.id}`, { method: 'PUT', headers: { Authorization: `Bearer ${key}` }, body: Buffer.alloc(5 << 20, 0x61) }).catch((e) => ({ status: `error ${e.message}` }));
	if (r.status !== 413) return `status ${r.status}`;
	const got = await readUntil(s.url, () => false);
	if (got.length !== 4 << 20) return `the stream holds ${got.length} bytes`;
});

// The writer vanishing mid-body ends the stream there: the command sees the end of its stdin.
await check('put_aborted_ends_stdin', async () => {
	const s = await newStream();
	const ex = await req('POST', `/sandbox/${sbx}/execute`, { command: ['cat'], stream: { stdin: s.id } });
	const ac = new AbortController();
	let ctl;
	const body = new ReadableStream({ start: (c) => (ctl = c) });
	const put = fetch(`${base}/streams/${s.id}`, { method: 'PUT', headers: { Authorization: `Bearer ${key}` }, body, duplex: 'half', signal: ac.signal }).catch(() => null);
	ctl.enqueue(new TextEncoder().encode('partial'));
	const early = await readUntil(ex.json.data.stdoutStreamUrl, (t) => t.includes('partial'));
	if (early !== 'partial') return `before the abort: ${JSON.stringify(early)}`;
	ac.abort();
	await put;
	const w = await req('GET', `/sandbox/execution/${ex.json.data.executionId}?wait=1m`);
	if (w.json?.data?.status !== 'completed') return `execution ${w.json?.data?.status}`;
});

await check('refusals', async () => {
	const bad = [];
	const expect = async (what, p, status, code) => {
		const r = await p;
		if (r.status !== status || (code && r.json?.code !== code) || !(r.json?.message || r.text)) bad.push(`${what}: ${r.status} ${r.text.slice(0, 120)}`);
	};
	const s = await newStream();
	await expect('unknown_stdin', req('POST', `/sandbox/${sbx}/execute`, { command: ['cat'], stream: { stdin: 'str_nosuch' } }), 400);
	await expect('unknown_stdout', req('POST', `/sandbox/${sbx}/execute`, { command: ['true'], stream: { stdout: 'str_nosuch' } }), 400);
	await expect('stream_not_object', req('POST', `/sandbox/${sbx}/execute`, { command: ['true'], stream: 'x' }), 400);
	await expect('stdin_not_string', req('POST', `/sandbox/${sbx}/execute`, { command: ['true'], stream: { stdin: 5 } }), 400);
	await expect('timestamps_not_bool', req('POST', `/sandbox/${sbx}/execute`, { command: ['true'], stream: { timestamps: 'yes' } }), 400);
	await expect('create_unknown_stdin', req('POST', '/sandbox', { runtime: 'base:latest', command: { exec: ['cat'], mode: 'oneshot' }, stream: { stdin: 'str_nosuch' } }), 400);
	await expect('put_unknown', req('PUT', '/streams/str_nosuch', 'x'), 404, 'STREAM_NOT_FOUND');
	await expect('name_not_string', req('POST', '/streams', { name: 5 }), 400);
	await expect('name_control_chars', req('POST', '/streams', { name: 'a\nb' }), 400);
	await expect('no_key_create', req('POST', '/streams', { name: 'x' }, false), 401);
	await expect('no_key_put', req('PUT', `/streams/${s.id}`, 'x', false), 401);
	await expect('get_unsigned_without_key', req('GET', `/streams/${s.id}`, undefined, false), 403);
	await expect('put_once', req('PUT', `/streams/${s.id}`, 'one'), 200);
	await expect('put_twice', req('PUT', `/streams/${s.id}`, 'two'), 409);
	await expect('stdout_written_already', req('POST', `/sandbox/${sbx}/execute`, { command: ['true'], stream: { stdout: s.id } }), 400);
	if (bad.length) return bad.join('; ');
});

// Jobs (API.md §5.4): stdoutStreamUrl / stderrStreamUrl, `streams`, `limit`.
const jobOf = async (jobId) => (await req('GET', `/sandbox/sandboxes/${sbx}/jobs/${jobId}`)).json?.data;

await check('job_stream_urls', async () => {
	const job = await client.createJob(sbx, { command: ['echo', 'from a job'] });
	const got = await client.getJob(sbx, job.id);
	const j = await jobOf(job.id);
	if (!j?.stdoutStreamUrl?.includes('?exp=') || !j?.stderrStreamUrl) return `urls ${JSON.stringify(j)}`;
	const out = await readUntil(j.stdoutStreamUrl, () => false);
	const err = await readUntil(j.stderrStreamUrl, () => false);
	if (out !== 'from a job\n' || err !== '') return `stdout ${JSON.stringify(out)}, stderr ${JSON.stringify(err)}`;
	if (got.id !== job.id) return `getJob ${JSON.stringify(got)}`;
});

// A running job's stream stays open (no EOF) until the job ends: here, its stop.
await check('job_stream_ends_with_the_job', async () => {
	const job = await client.createJob(sbx, { command: ['sleep', '600'] });
	const j = await jobOf(job.id);
	let ended = false;
	const reading = readUntil(j.stdoutStreamUrl, () => false).then((t) => ((ended = true), t));
	const listed = (await req('GET', `/sandbox/sandboxes/${sbx}/jobs`)).json?.data?.jobs ?? [];
	if (ended) return 'the stream ended while the job ran';
	if (!listed.some((x) => x.jobId === job.id && x.stdoutStreamUrl?.includes('&sig='))) return `listed ${JSON.stringify(listed.slice(0, 2))}`;
	await job.stop();
	const text = await reading;
	if (text !== '') return `stdout ${JSON.stringify(text)}`;
});

await check('job_streams_ignore_and_routed', async () => {
	const s = await newStream('job-out');
	const r = await req('POST', `/sandbox/sandboxes/${sbx}/jobs`, { command: ['stderr', 'job err'], streams: { stdout: 'ignore', stderr: s.id } });
	const j = r.json?.data;
	if (r.status !== 200 || j?.stdoutStreamUrl || !j?.stderrStreamUrl?.includes(`/streams/${s.id}?`)) return `create ${r.status} ${r.text.slice(0, 300)}`;
	const text = await readUntil(s.url, () => false);
	if (text !== 'job err\n') return `the routed stream holds ${JSON.stringify(text)}`;
	const bad = await req('POST', `/sandbox/sandboxes/${sbx}/jobs`, { command: ['true'], streams: { stdout: 'str_nosuch' } });
	const bad2 = await req('POST', `/sandbox/sandboxes/${sbx}/jobs`, { command: ['true'], streams: 'x' });
	const bad3 = await req('POST', `/sandbox/sandboxes/${sbx}/jobs`, { command: ['true'], streams: { timestamps: true } });
	if (bad.status !== 400 || bad2.status !== 400 || bad3.status !== 400) return `bad streams: ${bad.status} ${bad2.status} ${bad3.status}`;
});

await check('job_list_limit', async () => {
	for (let i = 0; i < 3; i++) await client.createJob(sbx, { command: ['true'] });
	const two = (await req('GET', `/sandbox/sandboxes/${sbx}/jobs?limit=2`)).json?.data?.jobs;
	const all = (await req('GET', `/sandbox/sandboxes/${sbx}/jobs`)).json?.data?.jobs;
	const viaClient = await client.listJobs(sbx, 2);
	if (two?.length !== 2 || !(all?.length > 3) || viaClient.jobs.length !== 2) return `limit 2: ${two?.length}, all ${all?.length}, client ${viaClient.jobs.length}`;
	if (two[0].jobId !== all[0].jobId) return 'not the newest first';
});

// POST /sandbox/ID/shell (husk ssh's): agent-protocol frames both ways in one request.
const frame = (type, flags, payload) => {
	const p = Buffer.from(payload);
	const h = Buffer.alloc(12);
	h.writeUInt32BE(8 + p.length, 0);
	h.writeUInt8(type, 4);
	h.writeUInt8(flags, 5);
	h.writeUInt32BE(1, 8);
	return Buffer.concat([h, p]);
};
function frames(buf) {
	const out = [];
	for (let o = 0; o + 12 <= buf.length; ) {
		const n = buf.readUInt32BE(o) - 8;
		out.push({ type: buf.readUInt8(o + 4), payload: buf.subarray(o + 12, o + 12 + n) });
		o += 12 + n;
	}
	return out;
}

await check('shell_frames', async () => {
	const body = Buffer.concat([
		frame(2, 0, JSON.stringify({ command: ['cat'], rows: 30, cols: 100 })),
		frame(10, 0, JSON.stringify({ rows: 40, cols: 120 })),
		frame(7, 0, 'typed '),
		frame(7, 1, 'keys'),
	]);
	const r = await fetch(`${base}/sandbox/${sbx}/shell`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body });
	const got = frames(Buffer.from(await r.arrayBuffer()));
	const out = Buffer.concat(got.filter((f) => f.type === 5).map((f) => f.payload)).toString();
	const last = got[got.length - 1];
	if (r.status !== 200 || out !== 'typed keys' || last?.type !== 3 || JSON.parse(last.payload).exit_code !== 0) return `${r.status}: ${JSON.stringify(got.map((f) => [f.type, f.payload.toString()]))}`;
	const bad = await req('POST', `/sandbox/${sbx}/shell`, Buffer.from('not frames at all, not even one header'));
	const empty = await req('POST', `/sandbox/${sbx}/shell`, Buffer.alloc(0));
	const first = await req('POST', `/sandbox/${sbx}/shell`, frame(7, 1, 'stdin first'));
	if (bad.status !== 400 || empty.status !== 400 || first.status !== 400) return `bad bodies: ${bad.status} ${empty.status} ${first.status} ${first.text.slice(0, 120)}`;
});

if (process.env.STREAMS_KEEP) {
	// For the second phase (after huskd's restart): a running job whose stream must end when it stops.
	const job = await client.createJob(sbx, { command: ['sleep', '600'] });
	const j = await jobOf(job.id);
	(await import('node:fs')).writeFileSync(process.env.STREAMS_KEEP, JSON.stringify({ sbx, job: job.id, url: j.stdoutStreamUrl }));
} else await client.destroy(sbx).catch(() => {});
process.exit(failed() ? 1 : 0);
