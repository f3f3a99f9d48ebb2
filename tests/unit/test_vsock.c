// SPDX-License-Identifier: MIT
/*
 * The vsock device driven the way a guest driver drives it: MMIO register
 * writes and virtqueues in a synthetic guest memory, with real Unix sockets
 * on the host side. No KVM: notifications arrive as MMIO writes.
 */
#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "unit.h"
#include "virtio/virtq.h"
#include "virtio/vsock.h"
#include "virtio/vsock_pkt.h"
#include "virtio/vsock_priv.h"
#include "virtio_tb.h"
#include "vm.h"

#define MiB (1ULL << 20)
#define QSZ 16
#define BASE 0xd0000000ULL
#define CID 3
#define BUF_GPA 0x200000ULL
#define BUF_SIZE 4096

struct gq {
	uint64_t desc, avail, used;
	uint16_t next_desc;
	uint16_t seen_used;
};

struct tb {
	struct vm vm;
	struct vsock_dev *dev;
	struct gq q[3];
	char path[108];
	uint64_t tx_buf;
	int dropped; /* RX buffers the device gave back empty */
};

static void w32(struct tb *t, uint64_t off, uint32_t v)
{
	tb_mmio_write(&t->vm, BASE, off, v);
}

static struct vring_desc *desc(struct tb *t, int q, int i)
{
	return gpa_ptr(&t->vm.mem, t->q[q].desc + 16ULL * (unsigned)i, 16);
}

static struct vring_avail *avail(struct tb *t, int q)
{
	return gpa_ptr(&t->vm.mem, t->q[q].avail, 4 + 2 * QSZ + 2);
}

static struct vring_used *used(struct tb *t, int q)
{
	return gpa_ptr(&t->vm.mem, t->q[q].used, 4 + 8 * QSZ + 2);
}

static void offer(struct tb *t, int q, uint64_t gpa, uint32_t len, uint16_t flags)
{
	struct vring_avail *a = avail(t, q);
	uint16_t i = t->q[q].next_desc++ % QSZ;

	*desc(t, q, i) = (struct vring_desc){.addr = gpa, .len = len, .flags = flags};
	a->ring[a->idx % QSZ] = i;
	a->idx++;
}

/* Brings the device up as Linux's virtio-mmio driver does, RX buffers of rx_len bytes. */
static int tb_init_rx(struct tb *t, const char *name, uint32_t rx_len)
{
	memset(t, 0, sizeof(*t));
	t->vm.vm_fd = -1;
	t->vm.stop_fd = -1;
	if (guest_mem_init(&t->vm.mem, 8 * MiB))
		return -1;
	t->vm.loop = evloop_create();
	snprintf(t->path, sizeof(t->path), "/tmp/husk-vsock-test-%d-%s", getpid(), name);
	t->dev = vsock_create(&t->vm, CID, t->path);
	if (!t->dev)
		return -1;
	struct tb_queue tq[3];

	for (int q = 0; q < 3; q++) {
		t->q[q].desc = 0x10000 + 0x1000ULL * (unsigned)q * 3;
		t->q[q].avail = t->q[q].desc + 0x1000;
		t->q[q].used = t->q[q].desc + 0x2000;
		tq[q] = (struct tb_queue){t->q[q].desc, t->q[q].avail, t->q[q].used};
	}
	tb_virtio_up(&t->vm, BASE, 3, QSZ, tq);
	/* RX buffers: 8 pages the device fills with packets for the guest. */
	for (int i = 0; i < 8; i++)
		offer(t, 0, BUF_GPA + (uint64_t)i * BUF_SIZE, rx_len, VRING_DESC_F_WRITE);
	w32(t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	t->tx_buf = BUF_GPA + 0x100000;
	return 0;
}

static int tb_init(struct tb *t, const char *name)
{
	return tb_init_rx(t, name, BUF_SIZE);
}

static void tb_free(struct tb *t)
{
	vsock_destroy(t->dev);
	evloop_destroy(t->vm.loop);
	guest_mem_free(&t->vm.mem);
	free(t->vm.device_cmdline);
}

/* The guest sends a packet (header + payload in one readable buffer). */
static void guest_send(struct tb *t, const struct vsock_pkt *p, const void *payload, uint32_t plen,
                       uint32_t desc_len)
{
	struct virtio_vsock_hdr h;
	uint8_t *buf = gpa_ptr(&t->vm.mem, t->tx_buf, VSOCK_HDR_SIZE + plen);

	vsock_pkt_encode(p, &h);
	memcpy(buf, &h, sizeof(h));
	if (plen)
		memcpy(buf + sizeof(h), payload, plen);
	offer(t, 1, t->tx_buf, desc_len ? desc_len : (uint32_t)sizeof(h) + plen, 0);
	t->tx_buf += 0x20000;
	w32(t, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
}

static struct vsock_pkt pkt(uint16_t op, uint32_t src_port, uint32_t dst_port, uint32_t len)
{
	return (struct vsock_pkt){.src_cid = CID,
	                          .dst_cid = VSOCK_HOST_CID,
	                          .src_port = src_port,
	                          .dst_port = dst_port,
	                          .len = len,
	                          .type = VIRTIO_VSOCK_TYPE_STREAM,
	                          .op = op,
	                          .buf_alloc = 256 * 1024};
}

/* The next packet the device put in RX; payload copied to data. 0 if none, 2 if used empty. */
static int guest_recv(struct tb *t, struct vsock_pkt *p, char *data, size_t max)
{
	struct vring_used *u = used(t, 0);
	const char *why;

	if (u->idx == t->q[0].seen_used)
		return 0;
	struct vring_used_elem e = u->ring[t->q[0].seen_used++ % QSZ];
	uint8_t *buf = gpa_ptr(&t->vm.mem, BUF_GPA + (uint64_t)e.id % 8 * BUF_SIZE, BUF_SIZE);
	struct virtio_vsock_hdr h;

	if (e.len < sizeof(h)) {
		/* Used empty: Linux's driver drops it and posts a fresh buffer. */
		offer(t, 0, BUF_GPA + (uint64_t)e.id % 8 * BUF_SIZE, BUF_SIZE, VRING_DESC_F_WRITE);
		w32(t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
		return 2;
	}

	memcpy(&h, buf, sizeof(h));
	/* Parse from the guest's side: swap the CIDs the parser expects. */
	h.src_cid = CID;
	h.dst_cid = VSOCK_HOST_CID;
	if (vsock_pkt_parse(&h, sizeof(h), e.len - sizeof(h), CID, p, &why))
		return -1;
	if (data && p->len && p->len <= max)
		memcpy(data, buf + sizeof(h), p->len);
	/* Give the buffer back, as the driver does. */
	offer(t, 0, BUF_GPA + (uint64_t)e.id % 8 * BUF_SIZE, BUF_SIZE, VRING_DESC_F_WRITE);
	w32(t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	return 1;
}

/* Runs the device's loop until the guest gets a packet other than a credit update. */
static int guest_wait(struct tb *t, struct vsock_pkt *p, char *data, size_t max)
{
	for (int i = 0; i < 20; i++) {
		int ret = guest_recv(t, p, data, max);

		if (ret < 0)
			return ret;
		if (ret == 1 && p->op != VIRTIO_VSOCK_OP_CREDIT_UPDATE)
			return 1;
		if (ret == 2)
			t->dropped++;
		if (ret == 0)
			evloop_run_once(t->vm.loop, 100);
	}
	return 0;
}

static int host_listen(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4))
		return -1;
	return fd;
}

UNIT_TEST(vsock_guest_connects_and_streams)
{
	struct tb t;
	struct vsock_pkt p;
	char path[128], buf[64];
	int lfd, s;

	CHECK(tb_init(&t, "g2h") == 0);
	snprintf(path, sizeof(path), "%s_1234", t.path);
	lfd = host_listen(path);
	CHECK(lfd >= 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0);
	guest_send(&t, &p, NULL, 0, 0);
	CHECK(guest_recv(&t, &p, NULL, 0) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_RESPONSE && p.src_port == 1234 && p.dst_port == 5000);
	s = accept(lfd, NULL, NULL);
	CHECK(s >= 0);
	/* guest -> host */
	p = pkt(VIRTIO_VSOCK_OP_RW, 5000, 1234, 5);
	guest_send(&t, &p, "hello", 5, 0);
	CHECK(read(s, buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5));
	/* host -> guest */
	CHECK(write(s, "world", 5) == 5);
	CHECK(guest_wait(&t, &p, buf, sizeof(buf)) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_RW && p.len == 5 && !memcmp(buf, "world", 5));
	/* host closes: the guest gets its end of stream */
	close(s);
	CHECK(guest_wait(&t, &p, NULL, 0) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_SHUTDOWN && (p.flags & VIRTIO_VSOCK_SHUTDOWN_SEND));
	close(lfd);
	unlink(path);
	tb_free(&t);
}

UNIT_TEST(vsock_no_listener_gets_rst)
{
	struct tb t;
	struct vsock_pkt p;

	CHECK(tb_init(&t, "rst") == 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5001, 999, 0);
	guest_send(&t, &p, NULL, 0, 0);
	CHECK(guest_recv(&t, &p, NULL, 0) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_RST && p.dst_port == 5001);
	/* Data for a connection that does not exist: RST too. */
	p = pkt(VIRTIO_VSOCK_OP_RW, 5002, 999, 3);
	guest_send(&t, &p, "abc", 3, 0);
	CHECK(guest_recv(&t, &p, NULL, 0) == 1 && p.op == VIRTIO_VSOCK_OP_RST);
	tb_free(&t);
}

UNIT_TEST(vsock_drops_malformed_packets)
{
	struct tb t;
	struct vsock_pkt p;

	CHECK(tb_init(&t, "bad") == 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5003, 999, 0);
	p.src_cid = 77; /* spoofed source */
	guest_send(&t, &p, NULL, 0, 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5003, 999, 0);
	p.type = 2; /* seqpacket: not offered */
	guest_send(&t, &p, NULL, 0, 0);
	p = pkt(VIRTIO_VSOCK_OP_RW, 5003, 999, 1000); /* claims more payload than it carries */
	guest_send(&t, &p, "x", 1, 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5003, 999, 0);
	guest_send(&t, &p, NULL, 0, 20); /* truncated header */
	p = pkt(99, 5003, 999, 0);       /* unknown op */
	guest_send(&t, &p, NULL, 0, 0);
	CHECK(guest_recv(&t, &p, NULL, 0) == 0); /* none of them got an answer */
	CHECK(used(&t, 1)->idx == 5);            /* but every buffer came back */
	tb_free(&t);
}

/* The guest connects from port gport to a host listener on hport (path): the listener's fd, or -1.
 */
static int guest_connects(struct tb *t, uint32_t gport, uint32_t hport, char *path, size_t len,
                          struct vsock_pkt *p)
{
	int lfd;

	snprintf(path, len, "%s_%u", t->path, hport);
	lfd = host_listen(path);
	*p = pkt(VIRTIO_VSOCK_OP_REQUEST, gport, hport, 0);
	guest_send(t, p, NULL, 0, 0);
	if (lfd < 0 || guest_recv(t, p, NULL, 0) != 1 || p->op != VIRTIO_VSOCK_OP_RESPONSE)
		return -1;
	return lfd;
}

UNIT_TEST(vsock_guest_past_credit_is_reset)
{
	struct tb t;
	struct vsock_pkt p;
	char path[128];
	static char chunk[60000];
	int lfd, s, rst = 0;

	CHECK(tb_init(&t, "credit") == 0);
	lfd = guest_connects(&t, 5004, 77, path, sizeof(path), &p);
	CHECK(lfd >= 0);
	s = accept(lfd, NULL, NULL); /* accepted, never read: the host is slow */
	for (int i = 0; i < 40 && !rst; i++) {
		p = pkt(VIRTIO_VSOCK_OP_RW, 5004, 77, sizeof(chunk));
		guest_send(&t, &p, chunk, sizeof(chunk), 0);
		t.tx_buf = BUF_GPA + 0x100000; /* reuse the same guest buffer */
		while (guest_recv(&t, &p, NULL, 0) == 1)
			rst |= p.op == VIRTIO_VSOCK_OP_RST;
	}
	/* 2.4 MB sent against 256 KiB of credit and a socket nobody reads. */
	CHECK(rst);
	close(s);
	close(lfd);
	unlink(path);
	tb_free(&t);
}

/*
 * A guest streams 4 KiB packets to a host that reads all of it as
 * it comes, sending each only within its window (the smaller of ours and
 * its own buffer, as Linux does). Returns the packets it could not send
 * (it stopped at the first: a real guest would wait there for ever), or -1
 * if the connection could not be made; *updates counts credit updates.
 */
static int guest_streams(const char *name, uint32_t port, uint32_t window, int packets,
                         int *updates)
{
	struct tb t;
	struct vsock_pkt p;
	char path[128];
	static char chunk[4096], sink[65536];
	uint32_t sent = 0, fwd;
	int lfd, s, i;

	*updates = 0;
	if (tb_init(&t, name) || (lfd = guest_connects(&t, 5005, port, path, sizeof(path), &p)) < 0)
		return -1;
	fwd = p.fwd_cnt;
	s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	for (i = 0; s >= 0 && i < packets && window - (sent - fwd) >= sizeof(chunk); i++) {
		p = pkt(VIRTIO_VSOCK_OP_RW, 5005, port, sizeof(chunk));
		p.buf_alloc = window;
		guest_send(&t, &p, chunk, sizeof(chunk), 0);
		t.tx_buf = BUF_GPA + 0x100000;
		sent += sizeof(chunk);
		while (read(s, sink, sizeof(sink)) > 0)
			;
		while (guest_recv(&t, &p, NULL, 0) == 1) {
			*updates += p.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE;
			fwd = p.fwd_cnt;
		}
	}
	if (s >= 0)
		close(s);
	close(lfd);
	unlink(path);
	tb_free(&t);
	return s >= 0 ? packets - i : -1;
}

/*
 * The guest hears of freed room before it could stall, and not after every
 * packet: that cost it an interrupt and a packet for each one it sent.
 */
UNIT_TEST(vsock_credit_told_before_the_guest_stalls)
{
	int updates;

	/* 1 MiB with the guest's buffer as large as ours. */
	CHECK(guest_streams("told", 78, 256 * 1024, 256, &updates) == 0);
	CHECK(updates >= 4 && updates <= 8); /* one per ~192 KiB, not 256 */
}

/*
 * A guest whose own buffer is smaller than ours sends no further than its
 * own (Linux caps its credit so): it must hear of freed room before that,
 * not when it comes near our 256 KiB, which it never does.
 */
UNIT_TEST(vsock_credit_told_within_a_smaller_guest_window)
{
	int updates;

	CHECK(guest_streams("window", 79, 64 * 1024, 128, &updates) == 0);
}

/* Whether the device raised its interrupt since the last look (and acks it, as the driver does). */
static bool irq_taken(struct tb *t)
{
	uint32_t st = tb_mmio_read(&t->vm, BASE, VIRTIO_MMIO_INTERRUPT_STATUS);

	w32(t, VIRTIO_MMIO_INTERRUPT_ACK, st);
	return st & VIRTIO_MMIO_INT_VRING;
}

/*
 * Sent packets come back to the guest at once in the used ring, but its
 * interrupt for them waits for a batch or a millisecond: one per packet was
 * more than half of the interrupts of a stream from the guest.
 */
UNIT_TEST(vsock_tx_interrupts_batched)
{
	struct tb t;
	struct vsock_pkt p;
	char path[128];
	static char chunk[1024];
	int lfd, s, got = 0;

	CHECK(tb_init(&t, "txirq") == 0);
	lfd = guest_connects(&t, 5006, 79, path, sizeof(path), &p);
	CHECK(lfd >= 0);
	s = accept(lfd, NULL, NULL);
	irq_taken(&t);
	p = pkt(VIRTIO_VSOCK_OP_RW, 5006, 79, sizeof(chunk));
	guest_send(&t, &p, chunk, sizeof(chunk), 0);
	CHECK(used(&t, 1)->idx == 2); /* the request and this one */
	CHECK(!irq_taken(&t));
	for (int i = 0; i < 100 && !got; i++)
		got = evloop_run_once(t.vm.loop, 100) > 0 && irq_taken(&t);
	CHECK(got); /* the timer told it */
	for (int i = 0; i < VSOCK_TX_BATCH - 1; i++) {
		t.tx_buf = BUF_GPA + 0x100000;
		guest_send(&t, &p, chunk, sizeof(chunk), 0);
	}
	CHECK(!irq_taken(&t));
	t.tx_buf = BUF_GPA + 0x100000;
	guest_send(&t, &p, chunk, sizeof(chunk), 0);
	CHECK(irq_taken(&t)); /* a batch: at once */
	close(s);
	close(lfd);
	unlink(path);
	tb_free(&t);
}

/*
 * Regression: RX buffers with room for a header alone, data owed. The
 * device used to put the buffer back and pop it again for the same
 * connection forever, holding its lock: vsock, blk and the control socket
 * all stopped. The alarm turns a return of that spin into a failure.
 */
UNIT_TEST(vsock_header_only_rx_buffers_do_not_spin)
{
	struct tb t;
	struct vsock_pkt p;
	char path[128], buf[64];
	int lfd, s;

	alarm(60);
	CHECK(tb_init_rx(&t, "rx44", VSOCK_HDR_SIZE) == 0);
	snprintf(path, sizeof(path), "%s_1234", t.path);
	lfd = host_listen(path);
	CHECK(lfd >= 0);
	p = pkt(VIRTIO_VSOCK_OP_REQUEST, 5000, 1234, 0);
	guest_send(&t, &p, NULL, 0, 0);
	CHECK(guest_recv(&t, &p, NULL, 0) == 1); /* a RESPONSE fits a header-only buffer */
	CHECK(p.op == VIRTIO_VSOCK_OP_RESPONSE);
	s = accept(lfd, NULL, NULL);
	CHECK(s >= 0);
	CHECK(write(s, "world", 5) == 5);
	CHECK(guest_wait(&t, &p, buf, sizeof(buf)) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_RW && p.len == 5 && !memcmp(buf, "world", 5));
	/* The seven small buffers left came back empty; the fresh one carried the data. */
	CHECK(t.dropped == 7);
	alarm(0);
	close(s);
	close(lfd);
	unlink(path);
	tb_free(&t);
}

UNIT_TEST(vsock_host_connect_handshake)
{
	struct tb t;
	struct vsock_pkt p;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char buf[64] = "";
	int s, bad;
	ssize_t n;

	CHECK(tb_init(&t, "h2g") == 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", t.path);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(s, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(write(s, "CONNECT 52\n", 11) == 11);
	CHECK(guest_wait(&t, &p, NULL, 0) == 1);
	CHECK(p.op == VIRTIO_VSOCK_OP_REQUEST && p.dst_port == 52 && p.src_port >= (1U << 30));
	/* The guest accepts: the host reads OK <port>. */
	{
		struct vsock_pkt r = pkt(VIRTIO_VSOCK_OP_RESPONSE, 52, p.src_port, 0);

		guest_send(&t, &r, NULL, 0, 0);
	}
	n = read(s, buf, sizeof(buf) - 1);
	CHECK(n > 3 && !strncmp(buf, "OK ", 3) && (uint32_t)atol(buf + 3) == p.src_port);
	close(s);

	/* A client that says something else is told so and dropped. */
	bad = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(bad, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(write(bad, "HELLO\n", 6) == 6);
	for (int i = 0; i < 5; i++)
		evloop_run_once(t.vm.loop, 50);
	memset(buf, 0, sizeof(buf));
	n = read(bad, buf, sizeof(buf) - 1);
	CHECK(n > 0 && !strncmp(buf, "ERROR", 5));
	CHECK(read(bad, buf, sizeof(buf)) == 0);
	close(bad);
	tb_free(&t);
}

UNIT_TEST(vsock_connect_line_parser)
{
	uint32_t port = 0;

	CHECK(vsock_parse_connect("CONNECT 52\n", 11, &port) == 11 && port == 52);
	CHECK(vsock_parse_connect("CONNECT 52\nDATA", 15, &port) == 11);
	CHECK(vsock_parse_connect("CONNECT 5", 9, &port) == 0);
	CHECK(vsock_parse_connect("CONN", 4, &port) == 0);
	CHECK(vsock_parse_connect("CONNECT \n", 9, &port) == -EINVAL);
	CHECK(vsock_parse_connect("CONNECT 4294967296\n", 19, &port) == -EINVAL);
	CHECK(vsock_parse_connect("CONNECT 4294967295\n", 19, &port) == 19 && port == 4294967295U);
	CHECK(vsock_parse_connect("connect 52\n", 11, &port) == -EINVAL);
	CHECK(vsock_parse_connect("CONNECT 5x\n", 11, &port) == -EINVAL);
	CHECK(vsock_parse_connect("CONNECT 000000000000000000000000000052\n", 39, &port) ==
	      -EINVAL);
}
