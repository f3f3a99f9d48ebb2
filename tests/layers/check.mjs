// The daemon's layers as its object files link them (issue F): which file
// calls which is read with nm from build/obj/rel (a symbol one object needs
// and another defines), so a call through a macro or a header counts as
// what it is; and no C file of the tree over 600 lines. Prints PASS/FAIL
// lines "layers/<name>".
//   node tests/layers/check.mjs [OBJDIR]   (default build/obj/rel)
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const top = new URL('../..', import.meta.url).pathname;
const objdir = join(top, process.argv[2] ?? 'build/obj/rel');
let failed = 0;
const report = (name, why) => {
	if (why) failed++;
	console.log(why ? `FAIL layers/${name}: ${why}` : `PASS layers/${name}`);
};

function files(dir, ext) {
	const out = [];
	for (const e of readdirSync(dir)) {
		if (e === 'node_modules') continue; /* npm's, not ours */
		const p = join(dir, e);
		if (statSync(p).isDirectory()) out.push(...files(p, ext));
		else if (p.endsWith(ext)) out.push(p);
	}
	return out;
}

// Each object of the daemon (api/huskd, and the HTTP library it stands on): what it defines, what it needs.
const objs = [...files(join(objdir, 'api/huskd'), '.o'), ...files(join(objdir, 'api/http'), '.o')];
if (objs.length < 50) {
	console.log(`FAIL layers/objects: only ${objs.length} objects under ${objdir}: run make all first`);
	process.exit(1);
}
const name = (o) => relative(objdir, o).replace(/\.o$/, '.c');
const defs = new Map(), needs = new Map();
for (const o of objs) {
	const lines = execFileSync('nm', ['-g', o], { encoding: 'utf8' }).split('\n');
	needs.set(name(o), []);
	for (const l of lines) {
		const m = l.match(/^\s*(\S*)\s+([A-Za-z])\s+(\S+)$/);
		if (!m) continue;
		if (m[2] === 'U') needs.get(name(o)).push(m[3]);
		else if ('TDBR'.includes(m[2].toUpperCase())) defs.set(m[3], name(o));
	}
}
// file -> file -> the names it takes
const edges = new Map();
for (const [f, syms] of needs) {
	const to = new Map();
	for (const s of syms) {
		const g = defs.get(s);
		if (!g || g === f) continue;
		if (!to.has(g)) to.set(g, []);
		to.get(g).push(s);
	}
	edges.set(f, to);
}

// Circles: strongly connected components (Tarjan), none of more than two files.
const index = new Map(), low = new Map(), stack = [], on = new Set(), circles = [];
let n = 0;
function visit(v) {
	index.set(v, n);
	low.set(v, n++);
	stack.push(v);
	on.add(v);
	for (const w of edges.get(v).keys()) {
		if (!index.has(w)) {
			visit(w);
			low.set(v, Math.min(low.get(v), low.get(w)));
		} else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
	}
	if (low.get(v) !== index.get(v)) return;
	const c = [];
	let w;
	do {
		w = stack.pop();
		on.delete(w);
		c.push(w);
	} while (w !== v);
	circles.push(c);
}
for (const v of edges.keys()) if (!index.has(v)) visit(v);
const big = circles.filter((c) => c.length > 2);
report(
	'huskd_no_circle_over_a_pair',
	big
		.map((c) => {
			const ties = c.flatMap((a) =>
				[...edges.get(a)].filter(([b]) => c.includes(b)).map(([b, s]) => `${a} -> ${b} (${s.slice(0, 3).join(' ')})`),
			);
			return `${c.length} files call each other: ${ties.join('; ')}`;
		})
		.join(' | '),
);

// The manager (api/huskd/sandbox) never sees a request: no HTTP header, no call into routes or the HTTP library.
const mgr = (f) => f.startsWith('api/huskd/sandbox/');
const http = (f) => f.startsWith('api/http/') || f.startsWith('api/huskd/routes/') || f.startsWith('api/huskd/e2b/');
const includes = files(join(top, 'api/huskd/sandbox'), '')
	.filter((f) => /\.[ch]$/.test(f))
	.flatMap((f) =>
		[...readFileSync(f, 'utf8').matchAll(/^#include\s+"([^"]+)"/gm)]
			.map((m) => m[1])
			.filter((h) => /^(http|router|json_resp|r_int|routes|e2b)/.test(h))
			.map((h) => `${relative(top, f)} includes ${h}`),
	);
report('manager_includes_no_http', includes.join('; '));
const up = [...edges].flatMap(([a, to]) => (mgr(a) ? [...to].filter(([b]) => http(b)).map(([b, s]) => `${a} -> ${b} (${s.join(' ')})`) : []));
report('manager_calls_nothing_above', up.join('; '));

// Routes call only the manager's public functions: those its public headers declare.
const pub = ['api/huskd/sandbox/sbx.h', 'api/huskd/sandbox/outbuf.h'].map((h) => readFileSync(join(top, h), 'utf8')).join('\n');
const inner = [...edges].flatMap(([a, to]) =>
	a.startsWith('api/huskd/routes/') || a.startsWith('api/huskd/e2b/')
		? [...to].filter(([b]) => mgr(b)).flatMap(([b, s]) => s.filter((x) => !new RegExp(`\\b${x}\\s*\\(`).test(pub)).map((x) => `${a} -> ${b}: ${x}`))
		: [],
);
report('routes_call_only_the_manager_api', inner.join('; '));
// No C file of the tree over 600 lines (STYLE.md's hard limit).
const long = ['api', 'vmm', 'guest-agent', 'images', 'tests', 'tools']
	.flatMap((d) => files(join(top, d), ''))
	.filter((f) => /\.[ch]$/.test(f))
	.map((f) => [relative(top, f), readFileSync(f, 'utf8').split('\n').length - 1])
	.filter(([, n]) => n > 600);
report('no_c_file_over_600_lines', long.map(([f, n]) => `${f}: ${n} lines`).join('; '));
console.log(`layers: ${objs.length} objects read, ${circles.filter((c) => c.length === 2).length} pairs`);
process.exit(failed ? 1 : 0);
