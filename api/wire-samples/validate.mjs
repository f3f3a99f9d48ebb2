// Checks every sample in this directory against the schemas of the published client.
//
//   mkdir -p /tmp/wv && cd /tmp/wv && npm init -y >/dev/null && npm install @agentuity/core@2.0.21
//   NODE_PATH=/tmp/wv/node_modules node /work/main/api/wire-samples/validate.mjs
//   (or run it from any directory whose node_modules has @agentuity/core@2.0.21)
//
// "responseSchema": "<file in dist/services/sandbox/>#<ExportName>" names the zod schema the client
// applies to the response body; "...@envelope" means the export is the data schema and the client
// wraps it in APIResponseSchema(). "api.js#..." refers to dist/services/api.js.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL, fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.cwd(), 'x.js'));
let coreIndex;
try {
	coreIndex = require.resolve('@agentuity/core');
} catch {
	for (const p of (process.env.NODE_PATH || '').split(':').filter(Boolean)) {
		const c = path.join(p, '@agentuity/core/dist/index.js');
		if (fs.existsSync(c)) coreIndex = c;
	}
}
if (!coreIndex) {
	console.error('cannot find @agentuity/core; see the header of this file');
	process.exit(2);
}
const dist = path.dirname(coreIndex);
const version = JSON.parse(fs.readFileSync(path.join(dist, '..', 'package.json'), 'utf8')).version;
const api = await import(pathToFileURL(path.join(dist, 'services/api.js')).href);

async function schemaFor(ref) {
	const [file, rest] = ref.split('#');
	const [name, mod] = rest.split('@');
	const p = file === 'api.js' ? 'services/api.js' : `services/sandbox/${file}`;
	const m = await import(pathToFileURL(path.join(dist, p)).href);
	let s = m[name];
	if (!s) throw new Error(`no export ${name} in ${p}`);
	if (mod === 'envelope') s = api.APIResponseSchema(s);
	return s;
}

let bad = 0;
let n = 0;
for (const f of fs.readdirSync(here).filter((x) => x.endsWith('.json')).sort()) {
	const d = JSON.parse(fs.readFileSync(path.join(here, f), 'utf8'));
	const checks = [];
	const rs = await schemaFor(d.responseSchema);
	if (d.examples) for (const e of d.examples) checks.push(['response', rs, e.body]);
	else checks.push(['response', rs, d.response.body]);
	if (d.requestSchema && d.request?.body !== undefined) checks.push(['request', await schemaFor(d.requestSchema), d.request.body]);
	for (const [what, s, body] of checks) {
		n++;
		const r = s.safeParse(body);
		if (!r.success) {
			bad++;
			console.log(`FAIL ${f} ${what}: ${JSON.stringify(r.error.issues)}`);
		}
	}
	for (const file of d.request?.body?.files ?? []) {
		if (typeof file.content === 'string' && Buffer.from(file.content, 'base64').toString('base64') !== file.content) {
			bad++;
			console.log(`FAIL ${f}: ${file.path} content is not canonical base64`);
		}
	}
}
console.log(`@agentuity/core ${version}: ${n - bad}/${n} sample bodies accepted`);
process.exit(bad ? 1 : 0);
