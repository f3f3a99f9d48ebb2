// SPDX-License-Identifier: MIT
/*
 * husk-kvm-unstick: what tools/husk-kvm-run does to a nested host that
 * stopped beating. Through QEMU's human monitor (MONITOR, a Unix socket) it
 * prints where each of the host's CPUs is and the code bytes there, then
 * makes QEMU drop what it translated from the page each CPU runs in (the
 * page written back as it is through QEMU's gdb stub, with the VM stopped:
 * a debugger's write invalidates the code translated from what it wrote)
 * and prints the CPUs again; when all of them are halted it sends an NMI.
 *
 * Why: a wedge caught with the monitor had both CPUs of the nested host on
 * one 5-byte NOP of kvm.ko, the site of a jump label (KVM's
 * apic_sw_disabled key, patched with text_poke_bp as VMs come and go), one
 * of them once in kprobe_int3_handler. That handler, finding no int3 in
 * memory where a CPU trapped on one, sends the CPU back to run the
 * instruction again: a CPU that executes a stale translation still holding
 * the patch's int3 loops there for ever. Dropping the translations ends
 * such a loop. Another wedge caught had both CPUs halted in the idle loop,
 * nothing to wake them. The caller then sees whether the heartbeat comes
 * back.
 *
 * usage: node tools/husk-kvm-unstick.mjs MONITOR GDBSOCKET
 * Exit 0 when the flush went through, 1 otherwise (what failed is printed).
 */
import net from 'node:net';

const [monPath, gdbPath] = process.argv.slice(2);
if (!monPath || !gdbPath) {
	console.error('usage: husk-kvm-unstick.mjs MONITOR GDBSOCKET');
	process.exit(2);
}
const say = (s) => console.error(`husk-kvm-run: ${s}`);
const pause = (ms) => new Promise((ok) => setTimeout(ok, ms));

/* A connection whose bytes are read as they come; each read has a bound. */
function connect(path) {
	return new Promise((ok, fail) => {
		const s = net.connect(path);
		const c = { s, buf: '', waiters: [] };
		s.setEncoding('latin1');
		s.on('data', (d) => {
			c.buf += d;
			for (const w of c.waiters.splice(0)) w();
		});
		s.on('error', fail);
		s.on('connect', () => ok(c));
	});
}

async function until(c, test, ms, what) {
	const end = Date.now() + ms;
	for (;;) {
		const got = test(c.buf);
		if (got !== undefined) return got;
		const left = end - Date.now();
		if (left <= 0) throw new Error(`no ${what} within ${ms} ms`);
		await new Promise((ok) => {
			const t = setTimeout(ok, left);
			c.waiters.push(() => {
				clearTimeout(t);
				ok();
			});
		});
	}
}

/* One monitor command; its output, after the line that echoes it, without the prompt. */
async function hmp(mon, cmd) {
	mon.buf = '';
	mon.s.write(`${cmd}\n`);
	const out = await until(mon, (b) => (b.endsWith('(qemu) ') ? b : undefined), 10000, `answer to '${cmd}'`);
	const lines = out.replace(/\r/g, '').split('\n').slice(1);
	return lines.filter((l) => l && !l.startsWith('(qemu)')).join('\n');
}

/* Prints each CPU's place; returns their RIPs, and whether every CPU is halted. */
async function where(mon, label) {
	const regs = await hmp(mon, 'info registers -a');
	const rips = [...regs.matchAll(/^RIP=([0-9a-f]+) .*CPL=(\d).*HLT=(\d)/gm)];
	for (let i = 0; i < rips.length; i++) {
		await hmp(mon, `cpu ${i}`);
		const bytes = (await hmp(mon, 'x /8xb $pc')).replace(/^[0-9a-f]+:\s*/, '').replace(/0x/g, '');
		const insn = (await hmp(mon, 'x /1i $pc')).trim();
		say(`${label} CPU ${i}: RIP ${rips[i][1]} CPL ${rips[i][2]} HLT ${rips[i][3]}; code there: ${bytes.trim()} (${insn})`);
	}
	if (!rips.length) throw new Error(`the monitor gave no registers: ${regs.slice(0, 200)}`);
	const out = rips.map((r) => BigInt(`0x${r[1]}`));
	out.halted = rips.every((r) => r[3] === '1');
	return out;
}

/* One gdb remote-protocol exchange: the packet, its ack, the reply packet. */
async function gdb(g, body, ms = 10000) {
	let sum = 0;
	for (const ch of body) sum = (sum + ch.charCodeAt(0)) & 0xff;
	g.buf = '';
	g.s.write(`$${body}#${sum.toString(16).padStart(2, '0')}`);
	// A stop notice the stub may send on its own (the VM stopping as we connected) is no reply.
	const reply = await until(
		g,
		(b) => [...b.matchAll(/\$([^#]*)#[0-9a-f]{2}/g)].map((m) => m[1]).find((r) => body === '?' || !/^[ST][0-9a-f]{2}/.test(r)),
		ms,
		`gdb stub reply to '${body.slice(0, 20)}'`,
	);
	g.s.write('+');
	return reply;
}

let rc = 1;
let mon;
try {
	mon = await connect(monPath);
	await until(mon, (b) => (b.endsWith('(qemu) ') ? true : undefined), 10000, 'monitor prompt');
	const rips = await where(mon, 'stuck:');
	const invalidated = async () => (await hmp(mon, 'info jit')).match(/TB invalidate count\s+(\d+)/)?.[1] ?? '?';
	const before = await invalidated();
	await hmp(mon, `gdbserver unix:${gdbPath},server=on,wait=off`);
	const g = await connect(gdbPath);
	// Connecting stops the VM; the detach lets it run again.
	const stop = await gdb(g, '?');
	const pages = new Set();
	for (const [i, rip] of rips.entries()) {
		const page = rip & ~0xfffn;
		if (pages.has(page)) continue;
		pages.add(page);
		// The CPU's own address space (thread ids are CPU index + 1), in reads and writes the stub takes.
		const sel = await gdb(g, `Hg${i + 1}`);
		for (let at = page; at < page + 0x1000n && sel === 'OK'; at += 0x400n) {
			const bytes = await gdb(g, `m${at.toString(16)},400`);
			const put = /^[0-9a-f]{2048}$/.test(bytes) ? await gdb(g, `M${at.toString(16)},400:${bytes}`) : bytes;
			if (put !== 'OK') throw new Error(`the gdb stub refused the page at ${at.toString(16)}: ${put.slice(0, 20)}`);
		}
		if (sel !== 'OK') throw new Error(`the gdb stub did not take CPU ${i}: ${sel}`);
	}
	const detach = await gdb(g, 'D');
	g.s.destroy();
	say(
		`dropped the emulator's code translated from ${pages.size} page(s) (gdb stub: ${stop.slice(0, 3)}, ` +
			`detach ${detach}; QEMU's count of invalidated blocks ${before} -> ${await invalidated()})`,
	);
	await hmp(mon, 'gdbserver none');
	rc = 0;
	await pause(2000);
	/*
	 * Every CPU halted, for good: a wake-up the emulator lost (caught
	 * once: both CPUs in the idle loop's hlt, no soft lockup, no heartbeat).
	 * An NMI wakes them; the idle loop then programs the next timer anew.
	 */
	if ((await where(mon, 'after the flush:')).halted) {
		await hmp(mon, 'nmi');
		say('every CPU was halted: sent them an NMI');
		await pause(2000);
		await where(mon, 'after the NMI:');
	}
} catch (e) {
	say(`could not look into or unstick the nested host: ${e.message}`);
}
mon?.s.destroy();
process.exit(rc);
