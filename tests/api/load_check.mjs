// The self-contained parts of the load test (tests/api/load.mjs): seeded
// random numbers, output checkers, the stream reader, the healthy execution
// specs. Nothing here holds the test's state.
import { Writable } from 'node:stream';

export const MiB = 1 << 20;
/* A yes that never ends by itself (1 TiB): it runs until cancelled or destroyed. */
export const ENDLESS = String(2 ** 40);

// Random numbers (mulberry32), one sequence per scenario so that a seed
// repeats the same choices however the scenarios interleave.
export const randomFor = (seed, key) => {
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

// ---- output checks ----

// "yes N" prints N bytes of "y\n": byte i is 'y' when i is even.
export const PAT = Buffer.alloc(MiB + 1);
for (let i = 0; i < PAT.length; i++) PAT[i] = i & 1 ? 0x0a : 0x79;
/* Follows a stream of yes output: n bytes so far, bad = where it first differed. */
export class YesCheck {
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
export class Exact {
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
export const sink = (checker, onBytes) => {
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
export const readStream = async (url, checker, { abortAt } = {}) => {
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

// ---- healthy executions: what to run, and what it must print ----

export const healthySpec = ({ rnd, rint, token }) => {
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
export const outputProblem = (spec, checker, which) => {
	if (which === 'stdout' && spec.yes !== undefined) {
		if (checker.bad) return `stdout: ${checker.bad}`;
		if (checker.n !== spec.yes) return `stdout: ${checker.n} bytes, want ${spec.yes}`;
		return null;
	}
	const want = which === 'stdout' ? spec.stdout : spec.stderr;
	const got = checker.text();
	return got === want ? null : `${which}: ${JSON.stringify(got.slice(0, 100))} (${checker.n} bytes), want ${JSON.stringify(want.slice(0, 100))}`;
};
