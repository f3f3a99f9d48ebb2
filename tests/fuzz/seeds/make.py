#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_devices and fuzz_devstate (tests/fuzz/fuzz_dev.c's
format): a driver that brings a device up and sends it one well-formed request, so
the fuzzer starts from the deep paths. Run from the tree's top; the output is
checked in."""
import os
import struct

QSZ = 16
WRITE, NEXT = 2, 1


def queue(descs, ring):
    d = b"".join(struct.pack("<QIHH", a, l, f, n) for a, l, f, n in descs)
    d += b"\0" * (16 * QSZ - len(d))
    a = struct.pack("<HH", 0, len(ring)) + b"".join(struct.pack("<H", r) for r in ring)
    return d + a + b"\0" * (4 + 2 * QSZ - len(a))


def op(kind, b1=0, v=0):
    return struct.pack("<BBI", kind, b1, v)


def poke(off, data):
    """Buffer bytes at off, two at a time (op 4: data in o[1..2], offset in o[3..5])."""
    out = b""
    data += b"\0" * (len(data) % 2)
    for i in range(0, len(data), 2):
        out += bytes([4, data[i], data[i + 1]]) + struct.pack("<I", off + i)[:3]
    return out


def drive(feat, queues, ops):
    return bytes([feat]) + b"".join(queues) + ops


seeds = {}
# rng: one writable buffer.
seeds["rng_read"] = bytes([0]) + drive(0, [queue([(0, 64, WRITE, 0)], [0])], op(2, 0) + op(3))
# blk: a read of sector 0 (header, data, status), then a write of it.
chain = [(0, 16, NEXT, 1), (0x1000, 512, WRITE | NEXT, 2), (0x2000, 1, WRITE, 0)]
seeds["blk_read"] = bytes([1]) + drive(0, [queue(chain, [0])], op(2, 0) + op(3))
wchain = [(0, 16, NEXT, 1), (0x1000, 512, NEXT, 2), (0x2000, 1, WRITE, 0)]
seeds["blk_write"] = bytes([1]) + drive(0, [queue(wchain, [0])],
                                        poke(0, struct.pack("<I", 1)) + op(2, 0) + op(3))
# vsock: RX buffers, a REQUEST to host port 1234 on TX, then data.
rx = queue([(0x10000 + i * 0x1000, 4096, WRITE, 0) for i in range(4)], [0, 1, 2, 3])
tx = queue([(0x20000, 44, 0, 0), (0x21000, 49, 0, 0)], [0, 1])
hdr = lambda op_, ln: struct.pack("<QQIIIHHIII", 3, 2, 5000, 1234, ln, 1, op_, 0, 65536, 0)
ops = poke(0x20000, hdr(1, 0)) + poke(0x21000, hdr(5, 5) + b"hello")
seeds["vsock_connect"] = bytes([2]) + drive(0, [rx, tx, queue([], [])],
                                            ops + op(2, 1) + op(3) + op(2, 0) + op(3))

top = os.path.dirname(os.path.abspath(__file__))
for target in ("fuzz_devices", "fuzz_devstate"):
    os.makedirs(os.path.join(top, target), exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(top, "fuzz_devices", name), "wb") as f:
        f.write(data)
    # fuzz_devstate: the state of device d (the harness registers its three) as an empty
    # blob, then the same input as fuzz_devices.
    for d in range(3):
        with open(os.path.join(top, "fuzz_devstate", "%s_state%d" % (name, d)), "wb") as f:
            f.write(bytes([d, 0]) + data)
