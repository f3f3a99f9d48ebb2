// Does huskd serve everything the published e2b SDK's sandbox calls? (issue M
// item 4). Reads the SDK's own dist: every REST path its sandbox and envd code
// calls (src/sandbox/**, src/envd/** regions: openapi-fetch's api.METHOD("path"))
// must be in huskd's route table (huskd --print-routes) under /e2b, and every
// Connect method its sandbox code calls (rpc.<method>) must be answered by huskd
// with something other than 404 or `unimplemented`. The SDK's template builds,
// volumes and secrets are other products (not the sandbox API) and are not read.
// HUSK_URL, HUSK_API_KEY, HUSKD_BIN. Prints PASS/FAIL lines "e2b_conformance/<name>".
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { checks } from './checks.mjs';

const base = process.env.HUSK_URL;
const key = process.env.HUSK_API_KEY;
const { check, failed } = checks('e2b_conformance');
const require = createRequire(import.meta.url);
const dist = readFileSync(join(dirname(require.resolve('e2b')), 'index.mjs'), 'utf8');

// The SDK's source regions ("//#region src/..."), each with its text.
const regions = [];
for (const part of dist.split(/^\/\/#region /m).slice(1)) {
	const nl = part.indexOf('\n');
	regions.push({ file: part.slice(0, nl).trim(), text: part.slice(nl) });
}
const sandboxSide = regions.filter((r) => /^src\/(sandbox|envd)\//.test(r.file));

// REST: api.GET("/path" ... in the sandbox's and envd's regions.
const rest = new Set();
for (const r of sandboxSide)
	for (const m of r.text.matchAll(/\.api\.(GET|POST|PUT|DELETE|PATCH)\("([^"]+)"/g))
		rest.add(`${m[1]} ${/\/(health|files)$/.test(m[2]) && !m[2].includes('{') ? '/envd' : ''}${m[2]}`);

// RPC: rpc.method( in the filesystem and commands regions, by service.
const rpc = new Set();
for (const r of sandboxSide) {
	const service = r.file.includes('/filesystem/') ? 'filesystem.Filesystem' : r.file.includes('/commands/') ? 'process.Process' : null;
	if (!service) continue;
	for (const m of r.text.matchAll(/\brpc\.([a-zA-Z]+)\(/g)) rpc.add(`${service}/${m[1][0].toUpperCase()}${m[1].slice(1)}`);
}
// Which methods stream their answers, from the SDK's own service descriptors.
const streaming = new Set();
for (const m of dist.matchAll(/fileDesc\("([^"]+)"/g)) {
	const fd = fromBinary(FileDescriptorProtoSchema, Buffer.from(m[1], 'base64'));
	for (const s of fd.service) for (const me of s.method) if (me.serverStreaming) streaming.add(`${fd.package}.${s.name}/${me.name}`);
}

await check('sdk_read', async () => {
	if (rest.size < 15 || rpc.size < 12) return `only ${rest.size} REST paths and ${rpc.size} RPC methods found in the SDK: was its dist read?`;
	console.log(`# the SDK's sandbox calls ${rest.size} REST paths and ${rpc.size} RPC methods`);
});

await check('rest_paths_served', async () => {
	const routes = execFileSync(process.env.HUSKD_BIN, ['--print-routes'])
		.toString()
		.trim()
		.split('\n')
		.map((l) => JSON.parse(l))
		.map((r) => `${r.method} ${r.pattern.replace(/:[a-z]+/g, ':')}`);
	const missing = [...rest].filter((p) => {
		const [method, path] = p.split(' ');
		return !routes.includes(`${method} /e2b${path.replace(/\{[^}]+\}/g, ':')}`);
	});
	return missing.length ? `not served: ${missing.join(', ')}` : '';
});

await check('rpc_methods_served', async () => {
	const r = await fetch(`${base}/e2b/v2/sandboxes`, {
		method: 'POST',
		headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
		body: JSON.stringify({ templateID: process.env.E2B_TEMPLATE || 'base', timeout: 300 }),
	});
	const sb = await r.json();
	if (r.status !== 201) return `create: ${r.status} ${JSON.stringify(sb)}`;
	const missing = [];
	try {
		for (const name of rpc) {
			const stream = streaming.has(name);
			const msg = Buffer.from('{}');
			const body = stream ? Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]) : msg;
			const a = await fetch(`${base}/e2b/envd/${name}`, {
				method: 'POST',
				headers: {
					'Content-Type': stream ? 'application/connect+json' : 'application/json',
					'E2b-Sandbox-Id': sb.sandboxID,
					'X-Access-Token': sb.envdAccessToken,
				},
				body,
			});
			const raw = Buffer.from(await a.arrayBuffer());
			let code = null;
			if (a.status !== 200 || !stream) code = JSON.parse(raw.toString() || '{}').code ?? null;
			else {
				// The last envelope (flags 2) carries the stream's end: {} or {error}.
				for (let at = 0; at + 5 <= raw.length; ) {
					const n = raw.readUInt32BE(at + 1);
					if (raw[at] & 2) code = JSON.parse(raw.subarray(at + 5, at + 5 + n).toString()).error?.code ?? null;
					at += 5 + n;
				}
			}
			if (a.status === 404 && code !== 'not_found') missing.push(`${name} (404)`);
			else if (code === 'unimplemented') missing.push(`${name} (unimplemented)`);
		}
	} finally {
		await fetch(`${base}/e2b/sandboxes/${sb.sandboxID}`, { method: 'DELETE', headers: { 'X-API-Key': key } });
	}
	return missing.length ? `not served: ${missing.join(', ')}` : '';
});

process.exit(failed() ? 1 : 0);
