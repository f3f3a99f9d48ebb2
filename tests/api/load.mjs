// A load test of huskd with the unmodified published client (@agentuity/core),
// plus plain fetch and node:http where the client has no call. Run by
// tests/api/load.sh against huskd-san with the fake VMM (tests/fakes/README.md);
// prints PASS/FAIL lines "load/<name>" and exits non-zero on any FAIL.
//
// Everything runs at once: 40 sandboxes running executions of random-sized
// output (every byte of every stream checked, every exit code), while
// clients vanish (stream readers aborted mid-stream, long-polls aborted,
// client processes SIGKILLed mid-request and mid-response), executions are
// cancelled (DELETE /sandbox/execution/{id}) and sandboxes are destroyed
// under a running command. Afterwards huskd must still answer with the
// right statuses, no stream may have been cut, no 5xx may have been
// answered (but 503 HOST_FULL with a clear message), and everything is
// destroyed.
//
// Environment: HUSK_URL, HUSK_API_KEY; HUSK_OUTPUT_LIMIT (huskd's
// --output-limit, bytes); LOAD_SEED (to repeat a run; printed at start);
// LOAD_DEADLINE_S (default 100: the whole load must be done by then, else
// FAIL naming what was still waiting); LOAD_SANDBOXES (default 40 workers);
// HUSKD_PID (huskd's pid: if it dies, FAIL at once rather than wait).
//
// Child mode (used by the test itself): load.mjs --child stream|longpoll|upload URL
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';

const BASE = process.env.HUSK_URL;
const KEY = process.env.HUSK_API_KEY;
const AUTH = { Authorization: `Bearer ${KEY}` };
const SELF = fileURLToPath(import.meta.url);
/* A yes that never ends by itself (1 TiB): it runs until cancelled or destroyed. */
const ENDLESS = String(2 ** 40);
const MiB = 1 << 20;

if (process.argv[2] === '--child') {
	await child(process.argv[3], process.argv[4]);
} else {
	await main();
}

// ---- a client process that is SIGKILLed mid-request ----

/* Says "ready" on stdout once it is in the middle of its request, then stays until killed. */
async function child(mode, url) {
	// Alive until the parent kills it; gone by itself if the parent went first.
	const parent = process.ppid;
	setInterval(() => process.ppid !== parent && process.exit(1), 500);
	const u = new URL(url);
	if (mode === 'stream') {
		// Reads the first chunk of a live output stream, then stops reading.
		const res = await fetch(url);
		const reader = res.body.getReader();
		const { value } = await reader.read();
		process.stdout.write(`ready ${res.status} ${value?.length ?? 0}\n`);
	} else if (mode === 'longpoll') {
		const req = http.request(u, { headers: AUTH });
		req.on('finish', () => process.stdout.write('ready\n'));
		req.on('error', (e) => process.stdout.write(`error ${e.message}\n`));
		req.end();
	} else if (mode === 'upload') {
		// A request body promised 8 MiB long, of which 1 MiB is sent.
		const s = net.connect(Number(u.port), u.hostname, () => {
			const head = `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${KEY}\r\n` + `Content-Type: application/json\r\nContent-Length: ${8 * MiB}\r\n\r\n`;
			s.write(head);
			s.write(Buffer.alloc(MiB, 'x'), () => process.stdout.write('ready\n'));
		});
		s.on('error', (e) => process.stdout.write(`error ${e.message}\n`));
	}
}

// ---- the test ----

async function main() {
	const require = createRequire(new URL('./client/package.json', import.meta.url));
	const { SandboxClient } = await import(pathToFileURL(require.resolve('@agentuity/core')));
	const LIMIT = Number(process.env.HUSK_OUTPUT_LIMIT || 64 * MiB);
	const seed = Number(process.env.LOAD_SEED || Math.floor(Math.random() * 2 ** 31));
	const deadline = Number(process.env.LOAD_DEADLINE_S || 100) * 1000;
	const started = Date.now();
	console.log(`load: seed ${seed} (LOAD_SEED=${seed} repeats this run)`);

	// Random numbers (mulberry32), one sequence per scenario so that a seed
	// repeats the same choices however the scenarios interleave.
	const randomFor = (key) => {
		let st = seed >>> 0;
		for (const c of key) st = (Math.imul(st ^ c.charCodeAt(0), 0x01000193) + 0x6d2b79f5) >>> 0;
		const rnd = () => {
			st = (st + 0x6d2b79f5) >>> 0;
			let t = st;
			t = Math.imul(t ^ (t >>> 15), t | 1);
			t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
			return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
		};
		const rint = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
		const token = () => Math.floor(rnd() * 2 ** 48).toString(36) + rint(0, 1e9).toString(36);
		return { rnd, rint, token };
	};

	// ---- results ----
	const checks = new Map(); // name -> {n, fails: []}
	const check = (name) => {
		if (!checks.has(name)) checks.set(name, { n: 0, fails: [] });
		return checks.get(name);
	};
	const ok = (name) => check(name).n++;
	const fail = (name, msg) => {
		check(name).n++;
		check(name).fails.push(msg);
	};
	/* Runs one scenario: an exception is a failure of name, with where it happened. */
	const scenario = async (name, what, fn) => {
		try {
			await fn();
		} catch (e) {
			fail(name, `${what}: ${e?.name}: ${e?.message}${e?.status ? ` (HTTP ${e.status})` : ''}${e?.cause ? ` cause: ${e.cause?.message ?? e.cause}` : ''}`);
		}
	};

	// Operations in flight, named, so a hang says what hung.
	const pending = new Map();
	let opSeq = 0;
	const track = async (what, p) => {
		const id = ++opSeq;
		pending.set(id, what);
		try {
			return await p;
		} finally {
			pending.delete(id);
		}
	};

	// Every HTTP answer seen, and every request that failed without one.
	const responses = []; // {method, path, status, code, message}
	const netErrors = []; // {method, path, error}
	const pathOf = (url) => {
		const u = new URL(url);
		return u.pathname + u.search;
	};
	const realFetch = globalThis.fetch;
	globalThis.fetch = async (input, init = {}) => {
		const url = String(input?.url ?? input);
		const method = init.method ?? input?.method ?? 'GET';
		let res;
		try {
			res = await realFetch(input, init);
		} catch (e) {
			if (!init.signal?.aborted) netErrors.push({ method, path: pathOf(url), error: `${e?.name}: ${e?.message} ${e?.cause?.code ?? e?.cause?.message ?? ''}` });
			throw e;
		}
		const entry = { method, path: pathOf(url), status: res.status };
		responses.push(entry);
		if (res.status >= 500) {
			const text = await res
				.clone()
				.text()
				.catch(() => '');
			try {
				const j = JSON.parse(text);
				entry.code = j.code;
				entry.message = j.message;
			} catch {
				entry.message = text.slice(0, 200);
			}
		}
		return res;
	};

	const client = new SandboxClient({ url: BASE, apiKey: KEY });

	/* A plain request (the client has no call for it, or would retry it): {status, json, headers}. */
	const api = async (method, path, body) => {
		const r = await fetch(BASE + path, {
			method,
			headers: { ...AUTH, ...(body ? { 'Content-Type': 'application/json' } : {}) },
			body: body ? JSON.stringify(body) : undefined,
		});
		const text = await r.text();
		let json = null;
		try {
			json = JSON.parse(text);
		} catch {}
		return { status: r.status, json, text, headers: r.headers };
	};
	const must = async (method, path, body, want = 200) => {
		const r = await api(method, path, body);
		if (r.status !== want) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 300)}, want ${want}`);
		return r.json?.data ?? r.json;
	};

	// ---- output checks ----

	// "yes N" prints N bytes of "y\n": byte i is 'y' when i is even.
	const PAT = Buffer.alloc(MiB + 1);
	for (let i = 0; i < PAT.length; i++) PAT[i] = i & 1 ? 0x0a : 0x79;
	/* Follows a stream of yes output: n bytes so far, bad = where it first differed. */
	class YesCheck {
		n = 0;
		bad = null;
		push(data) {
			const chunk = Buffer.from(data.buffer, data.byteOffset, data.length);
			for (let o = 0; o < chunk.length && this.bad === null; o += MiB) {
				const part = chunk.subarray(o, o + MiB);
				const start = (this.n + o) & 1;
				if (!part.equals(PAT.subarray(start, start + part.length))) {
					let k = 0;
					while (part[k] === PAT[start + k]) k++;
					this.bad = `byte ${this.n + o + k} is ${part[k]}, not ${PAT[start + k]}`;
				}
			}
			this.n += chunk.length;
		}
	}
	/* Collects a small stream exactly. */
	class Exact {
		chunks = [];
		n = 0;
		push(chunk) {
			this.chunks.push(Buffer.from(chunk));
			this.n += chunk.length;
		}
		text() {
			return Buffer.concat(this.chunks).toString();
		}
	}
	/* A writable for the client's pipe option feeding a checker; first() resolves on its first bytes. */
	const sink = (checker, onBytes) => {
		let firstSeen;
		const first = new Promise((r) => (firstSeen = r));
		const w = new Writable({
			write(chunk, _enc, done) {
				checker.push(chunk);
				firstSeen();
				onBytes?.(checker.n);
				done();
			},
		});
		w.checker = checker;
		w.first = first;
		return w;
	};

	/*
	 * Reads a stream URL with plain fetch (the client's pipe does the same) into
	 * checker. {status, ended: EOF seen, aborted, error}. abortAt: abort once
	 * that many bytes came (the client vanishes mid-stream).
	 */
	const readStream = async (url, checker, { abortAt } = {}) => {
		const ac = new AbortController();
		const out = { status: 0, ended: false, aborted: false, error: null, checker };
		try {
			const res = await fetch(url, { signal: ac.signal });
			out.status = res.status;
			if (res.status !== 200) {
				out.error = `status ${res.status}: ${(await res.text()).slice(0, 200)}`;
				return out;
			}
			const reader = res.body.getReader();
			for (;;) {
				const { done, value } = await reader.read();
				if (done) break;
				checker.push(value);
				if (abortAt !== undefined && checker.n >= abortAt) {
					ac.abort();
					out.aborted = true;
					return out;
				}
			}
			out.ended = true;
		} catch (e) {
			if (ac.signal.aborted) out.aborted = true;
			else out.error = `${e?.name}: ${e?.message} ${e?.cause?.code ?? e?.cause?.message ?? ''}`;
		}
		return out;
	};

	/* A long-poll by node:http: sent resolves once the request is on the wire; abort() vanishes. */
	const hold = (path) => {
		const ac = new AbortController();
		let sentOk;
		const sent = new Promise((r) => (sentOk = r));
		const result = new Promise((resolve) => {
			const req = http.request(BASE + path, { headers: AUTH, signal: ac.signal }, (res) => {
				let body = '';
				res.setEncoding('utf8');
				res.on('data', (d) => (body += d));
				res.on('end', () => {
					let json = null;
					try {
						json = JSON.parse(body);
					} catch {}
					responses.push({ method: 'GET', path, status: res.statusCode, code: json?.code, message: json?.message });
					resolve({ status: res.statusCode, json, body });
				});
				res.on('error', (e) => resolve(ac.signal.aborted ? { aborted: true } : { error: e.message }));
			});
			req.on('error', (e) => {
				if (!ac.signal.aborted) netErrors.push({ method: 'GET', path, error: e.message });
				resolve(ac.signal.aborted ? { aborted: true } : { error: e.message });
			});
			req.on('finish', sentOk);
			req.end();
		});
		return { sent, result, abort: () => ac.abort() };
	};

	/*
	 * A request of sandbox sid answered after what was sent before it: huskd
	 * has most likely taken in an earlier request on another connection.
	 */
	const ping = (sid) => must('GET', `/sandbox/${sid}`);

	/* A client process that starts a request and is SIGKILLed in the middle of it. */
	const children = new Set();
	process.on('exit', () => children.forEach((c) => c.kill('SIGKILL'))); // a test that gives up early
	process.on('SIGTERM', () => process.exit(143));
	const killedChild = async (name, mode, url, sid) => {
		const ch = spawn(process.execPath, [SELF, '--child', mode, url], {
			stdio: ['ignore', 'pipe', 'pipe'],
			env: process.env,
		});
		children.add(ch);
		ch.on('exit', () => children.delete(ch));
		let out = '',
			err = '';
		const exited = new Promise((r) => ch.on('exit', (code, signal) => r({ code, signal })));
		const ready = new Promise((r) => {
			ch.stdout.on('data', (d) => {
				out += d;
				if (out.includes('\n')) r(true);
			});
		});
		ch.stderr.on('data', (d) => (err += d));
		const first = await track(`${name}: child ${mode} getting ready`, Promise.race([ready, exited.then(() => false)]));
		if (!first || !out.startsWith('ready')) {
			ch.kill('SIGKILL');
			await exited;
			fail(name, `child ${mode} of ${url} did not get into its request: ${`${out} ${err}`.replace(/\s+/g, ' ').slice(0, 300)}`);
			return;
		}
		if (mode === 'stream' && !/^ready 200 [1-9]/.test(out)) fail(name, `child read of ${url}: ${out.trim()}`);
		await ping(sid);
		ch.kill('SIGKILL');
		const e = await track(`${name}: child ${mode} exiting`, exited);
		if (e.signal !== 'SIGKILL') fail(name, `child ${mode} ended ${JSON.stringify(e)}, not by SIGKILL: ${err.replace(/\s+/g, ' ').slice(0, 300)}`);
		else ok(name);
	};

	/* Checks a finished execution record: status and exit code. */
	const expectRecord = (name, what, rec, status, exitCode) => {
		if (rec?.status !== status) return fail(name, `${what}: status ${rec?.status}, want ${status} (${JSON.stringify(rec).slice(0, 300)})`);
		if (exitCode === 'nonzero' ? !(Number.isInteger(rec.exitCode) && rec.exitCode !== 0) : rec.exitCode !== exitCode)
			return fail(name, `${what}: exit code ${rec.exitCode}, want ${exitCode}`);
		ok(name);
	};

	// ---- 1. healthy executions: random output, every byte checked ----

	const healthySpec = ({ rnd, rint, token }) => {
		const k = rnd();
		if (k < 0.5) {
			const edge = [0, 1, 2, 3, 4095, 65535, 65536, 65537, 131071, MiB - 1, MiB];
			const n = rnd() < 0.4 ? edge[rint(0, edge.length - 1)] : rint(0, MiB);
			return { command: ['yes', String(n)], yes: n, stderr: '', status: 'completed', exit: 0 };
		}
		if (k < 0.7) {
			const words = Array.from({ length: rint(1, 4) }, token);
			return { command: ['echo', ...words], stdout: words.join(' ') + '\n', stderr: '', status: 'completed', exit: 0 };
		}
		if (k < 0.85) {
			const code = rint(0, 255);
			return { command: ['exit', String(code)], stdout: '', stderr: '', status: code ? 'failed' : 'completed', exit: code };
		}
		const t = token();
		return { command: ['stderr', t], stdout: '', stderr: t + '\n', status: 'failed', exit: 2 };
	};

	/* Compares what a checker got with the spec's stdout (yes or exact). */
	const outputProblem = (spec, checker, which) => {
		if (which === 'stdout' && spec.yes !== undefined) {
			if (checker.bad) return `stdout: ${checker.bad}`;
			if (checker.n !== spec.yes) return `stdout: ${checker.n} bytes, want ${spec.yes}`;
			return null;
		}
		const want = which === 'stdout' ? spec.stdout : spec.stderr;
		const got = checker.text();
		return got === want ? null : `${which}: ${JSON.stringify(got.slice(0, 100))} (${checker.n} bytes), want ${JSON.stringify(want.slice(0, 100))}`;
	};

	const healthyExec = async (sb, tag, R) => {
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
	const abortedReaders = async (sb, i, { rint }) => {
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
	const abortedLongPolls = async (sb, i) => {
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
	const cancelAtOnce = async (sb, i) => {
		if (i % 8 === 3) await killedChild('killed_clients', 'upload', `${BASE}/fs/${sb.id}`, sb.id);
		const ex = await must('POST', `/sandbox/${sb.id}/execute`, { command: ['sleep', '600'] });
		const twice = i % 8 === 7;
		const answers = await track(`cancel ${ex.executionId}`, Promise.all([api('DELETE', `/sandbox/execution/${ex.executionId}`), twice ? api('DELETE', `/sandbox/execution/${ex.executionId}`) : null]));
		const [a, b] = answers;
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
	const worker = async (i, createdOne) => {
		const R = randomFor(`worker ${i}`);
		const sb = await track(`create worker ${i}`, client.create({ runtime: 'base:latest', name: `load-${i}`, env: { LOAD_INDEX: String(i) } }));
		createdOne(sb.id);
		const special = [null, abortedReaders, abortedLongPolls, cancelAtOnce][i % 4];
		const at = R.rint(1, 4);
		for (let k = 0; k <= 4; k++) {
			if (k === at && special) await scenario(special === abortedReaders ? 'aborted_readers' : special === abortedLongPolls ? 'aborted_longpolls' : 'cancels', `${sb.id} (worker ${i})`, () => special(sb, i, R));
			else if (special || k < 4) await scenario('streams_exact', `${sb.id} (worker ${i})`, () => healthyExec(sb, `#${k}`, R));
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
	const destroyMid = async (j) => {
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
		const info = await client.get(sb.id);
		if (info.status !== 'deleted') fail(name, `${sb.id}: status ${info.status} after destroy, want deleted`);
		else ok(name);
		const again = await api('POST', `/sandbox/${sb.id}/execute`, { command: ['true'] });
		if (again.status !== 409) fail(name, `${sb.id}: execute on a deleted sandbox: ${again.status} ${again.text.slice(0, 200)}, want 409`);
	};

	/*
	 * A request that needs the sandbox sent together with its destroy: a
	 * pause, a checkpoint, a file write, an env change. Each is answered (no
	 * hang, no 5xx): done, or 409 because the sandbox has ended.
	 */
	const destroyRace = async (j) => {
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
		else if (![200, 201, 409].includes(r.status) || (r.status === 409 && r.json?.code !== 'SANDBOX_TERMINATED' && r.json?.code !== 'INVALID_STATE'))
			fail(name, `${sb.id}: ${mine[0]} ${mine[1]} beside its destroy answered ${r.status} ${r.text.slice(0, 300)}`);
		else ok(name);
	};

	/* Destroyed (or its queued execution cancelled) before it even finished starting. */
	const whileCreating = async (j) => {
		const destroy = j % 2 === 0;
		const name = destroy ? 'destroy_mid_command' : 'cancels';
		const sb = await track(`create early ${j}`, client.create({ runtime: 'base:latest', name: `load-early-${j}` }));
		const ex = await must('POST', `/sandbox/${sb.id}/execute`, { command: ['sleep', '600'] });
		if (destroy) {
			await client.destroy(sb.id);
			expectRecord(name, `${sb.id} queued execution of a sandbox destroyed while starting`, await track(`wait ${ex.executionId}`, client.getExecution(ex.executionId, '1m')), 'cancelled', 'nonzero');
			const info = await client.get(sb.id);
			if (info.status !== 'deleted') fail(name, `${sb.id}: status ${info.status} after destroy, want deleted`);
		} else {
			const c = await api('DELETE', `/sandbox/execution/${ex.executionId}`);
			if (c.status !== 200) fail(name, `${sb.id}: DELETE of a queued execution: ${c.status} ${c.text.slice(0, 300)}`);
			else expectRecord(name, `${sb.id} queued execution cancelled`, c.json?.data, 'cancelled', 'nonzero');
			await healthyExec(sb, 'after a cancelled queued one', randomFor(`early ${j}`));
		}
		for (const url of [ex.stdoutStreamUrl, ex.stderrStreamUrl]) {
			const r = await readStream(url, new Exact());
			if (!r.ended || r.checker.n) fail('healthy_streams_complete', `${sb.id}: stream of a never-run command: ${r.error ?? ''} ${r.checker.n} bytes`);
			else ok('healthy_streams_complete');
		}
		return destroy ? null : sb.id;
	};

	/* client.run(): one-shot sandboxes, output captured by the client. */
	const oneshot = async (j) => {
		const n = j === 0 ? MiB : randomFor(`run ${j}`).rint(0, MiB);
		const r = await track(`run ${j}`, client.run({ runtime: 'base:latest', command: { exec: ['yes', String(n)] } }));
		if (r.exitCode !== 0) fail('oneshot_runs', `run yes ${n}: exit ${r.exitCode}`);
		else if (r.stdout.length !== n || r.stdout !== PAT.subarray(0, n).toString()) fail('oneshot_runs', `run yes ${n}: stdout of ${r.stdout.length} characters, not the ${n} bytes of yes`);
		else ok('oneshot_runs');
		const s = await api('GET', `/sandbox/status/${r.sandboxId}?waitForStatus=terminated%2Cfailed&waitMs=30000`);
		if (s.json?.data?.status !== 'terminated' || s.json?.data?.exitCode !== 0) fail('oneshot_runs', `${r.sandboxId}: status ${s.text.slice(0, 200)}, want terminated with exit code 0`);
		return r.sandboxId;
	};

	// ---- all at once ----

	const WORKERS = Number(process.env.LOAD_SANDBOXES || 40);
	let created = 0,
		allCreated;
	const everyWorkerUp = new Promise((r) => (allCreated = r));
	const createdOne = () => ++created === WORKERS && allCreated();
	const expectStatus = new Map(); // sandbox id -> status it must have at the end
	const workerRuns = Array.from({ length: WORKERS }, (_, i) =>
		scenario('sandboxes_created', `worker ${i}`, async () => {
			expectStatus.set(await worker(i, createdOne), 'idle');
			ok('sandboxes_created');
		})
	);
	const extraRuns = [
		...Array.from({ length: 8 }, (_, j) => scenario('destroy_mid_command', `destroy ${j}`, () => destroyMid(j))),
		...Array.from({ length: 8 }, (_, j) => scenario('destroy_races', `race ${j}`, () => destroyRace(j))),
		...Array.from({ length: 4 }, (_, j) =>
			scenario('cancels', `while creating ${j}`, async () => {
				const id = await whileCreating(j);
				if (id) expectStatus.set(id, 'idle');
			})
		),
		...Array.from({ length: 6 }, (_, j) =>
			scenario('oneshot_runs', `run ${j}`, async () => {
				expectStatus.set(await oneshot(j), 'terminated');
			})
		),
		// A host that is full says so clearly (503 HOST_FULL), once the workers hold their memory.
		scenario('host_full_clear', 'a create too big for the host', async () => {
			await track('all workers created', Promise.race([everyWorkerUp, Promise.all(workerRuns)]));
			const r = await api('POST', '/sandbox', { runtime: 'base:latest', resources: { memory: '64Gi' } });
			const m = r.json?.message ?? '';
			if (r.status !== 503 || r.json?.code !== 'HOST_FULL' || !/full/.test(m) || !/MiB/.test(m) || !r.headers.get('retry-after'))
				fail('host_full_clear', `a 64Gi create: ${r.status} ${r.text.slice(0, 300)} (Retry-After ${r.headers.get('retry-after')}), want 503 HOST_FULL saying how full`);
			else ok('host_full_clear');
		}),
	];
	const watchdog = setTimeout(() => {
		console.log(`FAIL load/finished_in_time: still waiting after ${deadline / 1000} s for: ${[...new Set(pending.values())].slice(0, 20).join('; ')}`);
		report();
		process.exit(1);
	}, deadline);
	// huskd dying is an event of its own: say so at once (the client would retry for 30 s).
	const huskdPid = Number(process.env.HUSKD_PID || 0);
	const huskdState = () => {
		try {
			return readFileSync(`/proc/${huskdPid}/stat`, 'utf8').split(') ')[1]?.[0];
		} catch {
			return null;
		}
	};
	if (huskdPid)
		setInterval(() => {
			const state = huskdState();
			if (state && state !== 'Z') return;
			console.log(`FAIL load/huskd_alive_during_load: huskd (pid ${huskdPid}) ended in the middle of the load; waiting for: ${[...new Set(pending.values())].slice(0, 10).join('; ')}`);
			report();
			process.exit(1);
		}, 200).unref();
	await Promise.all([...workerRuns, ...extraRuns]);
	console.log(`load: the load took ${((Date.now() - started) / 1000).toFixed(1)} s`);

	// ---- 4. afterwards ----

	/* GET /sandbox, every page: {sandboxes, total}. */
	const listAll = async () => {
		const all = [];
		for (;;) {
			const page = await client.list({ limit: 100, offset: all.length });
			all.push(...(page.sandboxes ?? []));
			if (!page.sandboxes?.length || all.length >= page.total) return { sandboxes: all, total: page.total };
		}
	};

	await scenario('huskd_answers_after', 'list', async () => {
		const list = await track('list', listAll());
		const got = new Map((list.sandboxes ?? []).map((s) => [s.sandboxId, s.status]));
		if (list.total !== expectStatus.size || got.size !== expectStatus.size) fail('huskd_answers_after', `GET /sandbox lists ${list.total} (${got.size} here), want the ${expectStatus.size} not deleted`);
		for (const [id, status] of expectStatus) if (got.get(id) !== status) fail('huskd_answers_after', `${id}: listed as ${got.get(id)}, want ${status}`);
		for (const [id, status] of got) if (!expectStatus.has(id)) fail('huskd_answers_after', `${id} (${status}) is listed but was destroyed or never made here`);
		ok('huskd_answers_after');
	});

	const fives = responses.filter((r) => r.status >= 500 && !(r.status === 503 && r.code === 'HOST_FULL' && r.message));
	if (fives.length) fail('no_5xx', `${fives.length} answers were 5xx: ${fives.slice(0, 5).map((r) => `${r.method} ${r.path}: ${r.status} ${r.code ?? ''} ${r.message ?? ''}`).join('; ')}`);
	else ok('no_5xx');
	if (netErrors.length) fail('no_cut_connections', `${netErrors.length} requests failed without an answer: ${netErrors.slice(0, 5).map((e) => `${e.method} ${e.path}: ${e.error}`).join('; ')}`);
	else ok('no_cut_connections');

	// ---- 5. destroy everything ----

	await scenario('destroy_all', 'destroy', async () => {
		// What huskd still holds, known or not: all of it goes.
		const left = await listAll();
		const ids = new Set([...expectStatus.keys(), ...(left.sandboxes ?? []).map((s) => s.sandboxId)]);
		await track('destroy all', Promise.all([...ids].map((id) => client.destroy(id))));
		const infos = await Promise.all([...ids].map((id) => client.get(id)));
		for (const info of infos) if (info.status !== 'deleted') fail('destroy_all', `${info.sandboxId}: ${info.status} after destroy`);
		const list = await listAll();
		if (list.total !== 0) fail('destroy_all', `GET /sandbox still lists ${list.total}: ${JSON.stringify(list.sandboxes.map((s) => [s.sandboxId, s.status]))}`);
		ok('destroy_all');
	});
	clearTimeout(watchdog);
	process.exit(report());

	function report() {
		const by = {};
		for (const r of responses) by[r.status] = (by[r.status] ?? 0) + 1;
		console.log(`load: ${responses.length} answers seen, by status: ${JSON.stringify(by)}; ${netErrors.length} requests without an answer (aborts by the test not counted)`);
		let failed = 0;
		for (const [name, c] of checks) {
			if (c.fails.length) {
				failed++;
				console.log(`FAIL load/${name}: ${c.fails.length} of ${c.n} checks failed: ${c.fails.slice(0, 6).join(' | ')}`);
			} else {
				console.log(`PASS load/${name} (${c.n} checks)`);
			}
		}
		return failed ? 1 : 0;
	}
}
