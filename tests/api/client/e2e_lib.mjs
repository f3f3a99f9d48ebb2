// What the published-client suites of tests/api/e2e.sh (run.mjs, run_snap.mjs) share:
// the client, named checks printing PASS/FAIL lines, and small helpers.
// HUSK_URL and HUSK_API_KEY say where huskd is.
import { readdirSync, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { SandboxClient } from '@agentuity/core';

export const client = new SandboxClient({ url: process.env.HUSK_URL, apiKey: process.env.HUSK_API_KEY });
// run()'s stdin goes through huskd's own stream service (API.md §6.2).
process.env.AGENTUITY_STREAM_URL = `${process.env.HUSK_URL}/streams`;
let failed = 0;

// How many checks have failed so far (the exit status).
export const failures = () => failed;

// HUSK_CHECK_SECTIONS=1 (tests/api/e2e.sh): each check is a section of tests/run.sh's,
// announced by "-- t_client_NAME", skipped when HUSK_SKIP names it and, when HUSK_ONLY is
// set, run only if it names it: after a wedged nested host the suite goes on from the
// check in flight rather than from the start of a file of them (~6 min nested).
function wanted(name) {
	if (process.env.HUSK_CHECK_SECTIONS !== '1') return true;
	const t = `t_client_${name}`;
	const names = (v) => ` ${process.env[v] ?? ''} `.includes(` ${t} `);
	if (names('HUSK_SKIP') || (process.env.HUSK_ONLY && !names('HUSK_ONLY'))) return false;
	console.log(`-- ${t}`);
	return true;
}

export async function check(name, fn) {
	// HUSK_TEST_ONLY=word runs only the checks whose name has it (for debugging).
	if (process.env.HUSK_TEST_ONLY && !name.includes(process.env.HUSK_TEST_ONLY)) return;
	if (!wanted(name)) return;
	// A hang guard, not a time limit (a whole run of these checks takes a few minutes
	// nested): a request that never comes back fails its check, with huskd's errors shown,
	// before the nested host's 600 s watchdog ends the suite with no word of which one.
	const bound = Number(process.env.HUSK_CHECK_BOUND_S ?? 420);
	let timer;
	const hung = new Promise((resolve) => {
		timer = setTimeout(() => resolve(`no result after ${bound} s: a request never came back (a hang guard)`), bound * 1000);
	});
	try {
		const why = await Promise.race([fn(), hung]);
		if (why) {
			failed++;
			console.log(`FAIL client/${name}: ${why}`);
		} else {
			console.log(`PASS client/${name}`);
		}
	} catch (e) {
		failed++;
		console.log(`FAIL client/${name}: ${e?.name}: ${e?.message}`);
	} finally {
		clearTimeout(timer);
	}
}

export function collector() {
	const chunks = [];
	const w = new Writable({
		write(chunk, _enc, done) {
			chunks.push(Buffer.from(chunk));
			done();
		},
	});
	w.text = () => Buffer.concat(chunks).toString();
	return w;
}

// The pid of the husk-vmm running sandbox id here (huskd and the test share the nested host).
export function vmmPid(id) {
	for (const d of readdirSync('/proc')) {
		if (!/^\d+$/.test(d)) continue;
		try {
			const c = readFileSync(`/proc/${d}/cmdline`, 'utf8');
			if (c.includes('husk-vmm') && c.includes(`sandboxes/${id}/`)) return Number(d);
		} catch {
			/* gone meanwhile */
		}
	}
	return 0;
}

// A request of our own: {status, json, data}.
export async function raw(method, path, body) {
	const r = await fetch(`${process.env.HUSK_URL}${path}`, {
		method,
		headers: { Authorization: `Bearer ${process.env.HUSK_API_KEY}`, 'Content-Type': 'application/json' },
		body: body ? JSON.stringify(body) : undefined,
	});
	const json = await r.json().catch(() => null);
	return { status: r.status, json, data: json?.data };
}

export async function text(stream) {
	const chunks = [];
	for await (const c of stream) chunks.push(Buffer.from(c));
	return Buffer.concat(chunks).toString();
}

export async function output(url) {
	return (await fetch(url)).text();
}

// husk-vmm processes of a sandbox (huskd runs here, on this machine), but for one started
// --held: right after a pause, that is its next VMM made ahead, its vCPUs parked until a resume.
export function vmmsOf(id) {
	let n = 0;
	for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
		try {
			const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
			const held = cmd.split('\0').includes('--held');
			if (cmd.includes('husk-vmm') && cmd.includes(`/sandboxes/${id}/`) && !held) n++;
		} catch {
			// gone meanwhile
		}
	}
	return n;
}
