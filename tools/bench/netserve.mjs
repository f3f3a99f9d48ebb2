// The network benchmark's server (tools/bench/net.sh), outside the guests:
// on PORT it reads everything a connection sends and then closes; on PORT+1
// it sends MIB MiB and closes.   usage: node netserve.mjs ADDR PORT MIB
import net from 'node:net';

const [addr, port, mib] = process.argv.slice(2);
net.createServer((s) => {
	s.on('data', () => {});
	s.on('end', () => s.end());
	s.on('error', () => {});
}).listen(Number(port), addr);
const chunk = Buffer.alloc(1 << 16, 'y');
net.createServer((s) => {
	let left = Number(mib) << 20;
	const pump = () => {
		while (left > 0) {
			const n = Math.min(left, chunk.length);
			left -= n;
			if (!s.write(chunk.subarray(0, n))) return s.once('drain', pump);
		}
		s.end();
	};
	s.on('error', () => {});
	pump();
}).listen(Number(port) + 1, addr);
