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
// The parts: load_check.mjs (seeded random numbers, output checkers, the
// stream reader), load_scenarios.mjs (what each scenario does, given the
// context this file makes), load_child.mjs (a client process SIGKILLed
// mid-request).
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MiB, randomFor } from './load_check.mjs';
import { destroyMid, destroyRace, oneshot, whileCreating, worker } from './load_scenarios.mjs';

const BASE = process.env.HUSK_URL;
const KEY = process.env.HUSK_API_KEY;
const AUTH = { Authorization: `Bearer ${KEY}` };
const CHILD = fileURLToPath(new URL('./load_child.mjs', import.meta.url));

await main();

// ---- the test ----

async function main() {
	const require = createRequire(new URL('./client/package.json', import.meta.url));
	const { SandboxClient } = await import(pathToFileURL(require.resolve('@agentuity/core')));
	const LIMIT = Number(process.env.HUSK_OUTPUT_LIMIT || 64 * MiB);
	const seed = Number(process.env.LOAD_SEED || Math.floor(Math.random() * 2 ** 31));
	const deadline = Number(process.env.LOAD_DEADLINE_S || 100) * 1000;
	const started = Date.now();
	console.log(`load: seed ${seed} (LOAD_SEED=${seed} repeats this run)`);

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
		const ch = spawn(process.execPath, [CHILD, mode, url], {
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

	// What the scenarios (load_scenarios.mjs) work with.
	const ctx = { client, api, must, track, ok, fail, scenario, expectRecord, hold, ping, killedChild, randomFor: (key) => randomFor(seed, key), LIMIT, BASE };

	// ---- all at once ----

	const WORKERS = Number(process.env.LOAD_SANDBOXES || 40);
	let created = 0,
		allCreated;
	const everyWorkerUp = new Promise((r) => (allCreated = r));
	const createdOne = () => ++created === WORKERS && allCreated();
	const expectStatus = new Map(); // sandbox id -> status it must have at the end
	const workerRuns = Array.from({ length: WORKERS }, (_, i) =>
		scenario('sandboxes_created', `worker ${i}`, async () => {
			expectStatus.set(await worker(ctx, i, createdOne), 'idle');
			ok('sandboxes_created');
		})
	);
	const extraRuns = [
		...Array.from({ length: 8 }, (_, j) => scenario('destroy_mid_command', `destroy ${j}`, () => destroyMid(ctx, j))),
		...Array.from({ length: 8 }, (_, j) => scenario('destroy_races', `race ${j}`, () => destroyRace(ctx, j))),
		...Array.from({ length: 4 }, (_, j) =>
			scenario('cancels', `while creating ${j}`, async () => {
				const id = await whileCreating(ctx, j);
				if (id) expectStatus.set(id, 'idle');
			})
		),
		...Array.from({ length: 6 }, (_, j) =>
			scenario('oneshot_runs', `run ${j}`, async () => {
				expectStatus.set(await oneshot(ctx, j), 'terminated');
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
		const infos = await Promise.all([...ids].map(async (id) => (await api('GET', `/sandbox/${id}?includeDeleted=true`)).json?.data ?? { sandboxId: id }));
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
