// The network suites' client, on the host (node, no packages):
//   get URL [HOST [TOKEN]]  GET, printing "status N" and the body; HOST sets the Host
//                       header ("" leaves it), TOKEN the X-Husk-Url-Token header
//   ws URL              a WebSocket handshake with a first frame sent at once, printing
//                       the status line and the echo ("ws: echo: ping")
//   api METHOD PATH [JSON]  huskd's API with HUSK_API_KEY, printing the body
//   sink PORT ADDR FILE  counts the bytes of each connection; writes "bytes N ms M"
//                       (first byte to last) to FILE when one ends
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';

const [cmd, a, b, c] = process.argv.slice(2);

function get(url, host, token) {
	const u = new URL(url);
	const headers = host ? { Host: host } : {};
	if (token) headers['X-Husk-Url-Token'] = token;
	const q = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers }, (r) => {
		let body = '';
		r.on('data', (d) => (body += d));
		r.on('end', () => console.log(`status ${r.statusCode}\n${body}`));
	});
	q.on('error', (e) => console.log(`error ${e.message}`));
	q.end();
}

function ws(url) {
	const u = new URL(url);
	const s = net.connect(Number(u.port), u.hostname, () => {
		const mask = Buffer.from([1, 2, 3, 4]);
		const payload = Buffer.from('ping').map((x, i) => x ^ mask[i % 4]);
		s.write(
			`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
				'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
				'Sec-WebSocket-Version: 13\r\n\r\n',
		);
		s.write(Buffer.concat([Buffer.from([0x81, 0x80 | 4]), mask, payload]));
	});
	let buf = Buffer.alloc(0);
	const done = setTimeout(() => {
		console.log(`ws: no echo; got ${JSON.stringify(buf.toString('latin1'))}`);
		s.destroy();
	}, 30000);
	s.on('data', (d) => {
		buf = Buffer.concat([buf, d]);
		const end = buf.indexOf('\r\n\r\n');
		if (end < 0) return;
		const frame = buf.subarray(end + 4);
		if (frame.length < 2 || frame.length < 2 + (frame[1] & 127)) return;
		console.log(buf.subarray(0, buf.indexOf('\r\n')).toString());
		console.log(`ws: ${frame.subarray(2, 2 + (frame[1] & 127)).toString()}`);
		clearTimeout(done);
		s.destroy(); /* the echo server keeps its side open */
	});
	s.on('error', (e) => console.log(`error ${e.message}`));
}

function api(method, path, json) {
	const q = http.request(
		{
			host: '127.0.0.1',
			port: Number(process.env.HUSK_PORT),
			path,
			method,
			headers: { Authorization: `Bearer ${process.env.HUSK_API_KEY}`, 'Content-Type': 'application/json' },
		},
		(r) => {
			let body = '';
			r.on('data', (d) => (body += d));
			r.on('end', () => console.log(body));
		},
	);
	q.on('error', (e) => console.log(`error ${e.message}`));
	q.end(json ?? undefined);
}

function sink(port, addr, file) {
	net.createServer((s) => {
		let n = 0, first = 0, last = 0;
		s.on('data', (d) => {
			if (!n) first = Date.now();
			n += d.length;
			last = Date.now();
		});
		s.on('end', () => {
			fs.writeFileSync(file, `bytes ${n} ms ${last - first}\n`);
			s.end();
		});
	}).listen(Number(port), addr);
}

if (cmd === 'get') get(a, b, c);
else if (cmd === 'ws') ws(a);
else if (cmd === 'api') api(a, b, c);
else if (cmd === 'sink') sink(a, b, c);
else {
	console.error('usage: net_client.mjs get|ws|api|sink ...');
	process.exit(2);
}
