// A client process of the load test (tests/api/load.mjs) that is SIGKILLed
// mid-request: says "ready" on stdout once it is in the middle of its
// request, then stays until killed.
//
// Usage (by load.mjs): node load_child.mjs stream|longpoll|upload URL
// Environment: HUSK_API_KEY.
import http from 'node:http';
import net from 'node:net';

const KEY = process.env.HUSK_API_KEY;
const AUTH = { Authorization: `Bearer ${KEY}` };
const MiB = 1 << 20;

await child(process.argv[2], process.argv[3]);

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
