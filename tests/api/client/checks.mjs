// What the host suites' client programs share: named checks printing
// PASS/FAIL lines, and plain JSON requests with a key.

// checks('suite'): check(name, fn) runs fn (a reason string fails it), and
// failed() counts the failures so far.
export function checks(suite) {
	let failed = 0;
	async function check(name, fn) {
		try {
			const why = await fn();
			if (why) {
				failed++;
				console.log(`FAIL ${suite}/${name}: ${why}`);
			} else console.log(`PASS ${suite}/${name}`);
		} catch (e) {
			failed++;
			console.log(`FAIL ${suite}/${name}: ${e?.name}: ${e?.message} ${e?.cause ?? ''}`);
		}
	}
	return { check, failed: () => failed };
}

// A request to base + path with key (none if null) and a JSON body (a Buffer goes as
// it is): {status, json, text}.
export async function request(base, key, method, path, body) {
	const headers = key ? { Authorization: `Bearer ${key}` } : {};
	const raw = Buffer.isBuffer(body);
	if (body !== undefined && !raw) headers['Content-Type'] = 'application/json';
	const r = await fetch(base + path, { method, headers, body: body === undefined || raw ? body : JSON.stringify(body) });
	const text = await r.text();
	let json = null;
	try {
		json = JSON.parse(text);
	} catch {}
	return { status: r.status, json, text };
}
