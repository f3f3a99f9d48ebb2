// SPDX-License-Identifier: MIT
/*
 * virtio-net driven as Linux's driver drives it (MMIO registers, two queues
 * in a synthetic guest memory), with what the backend thread does played
 * by the test: frames taken from the transmit queue, frames put into the
 * receive queue, and the chains a hostile guest could offer.
 */
#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_net.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "virtio/net.h"
#include "virtio/virtq.h"
#include "virtio_tb.h"
#include "vm.h"

#define MiB (1ULL << 20)
#define QSZ 16
#define BASE 0xd0000000ULL
#define BUF_GPA 0x100000ULL /* 64 KiB a descriptor slot */

struct tb {
	struct vm vm;
	struct virtio_net *dev;
	struct tb_queue q[2];
	uint16_t next_desc[2];
	int kicks;
	uint8_t frame[NET_FRAME_MAX];
};

struct seg {
	uint32_t len;
	int writable;
};

static void count_kick(void *ctx)
{
	((struct tb *)ctx)->kicks++;
}

static void *gmem(struct tb *t, uint64_t gpa, size_t len)
{
	return gpa_ptr(&t->vm.mem, gpa, len);
}

static int tb_init(struct tb *t, const char *spec_text, uint64_t features)
{
	struct net_spec spec;
	char err[256];

	memset(t, 0, sizeof(*t));
	t->vm.vm_fd = -1;
	t->vm.stop_fd = -1;
	if (net_spec_parse(spec_text, &spec, err, sizeof(err)) ||
	    guest_mem_init(&t->vm.mem, 8 * MiB))
		return -1;
	t->vm.loop = evloop_create();
	t->dev = virtio_net_create(&t->vm, &spec, count_kick, t);
	if (!t->dev)
		return -1;
	for (int i = 0; i < 2; i++)
		t->q[i] = (struct tb_queue){.desc = 0x10000 + 0x3000ULL * i,
		                            .avail = 0x11000 + 0x3000ULL * i,
		                            .used = 0x12000 + 0x3000ULL * i};
	tb_virtio_up_with(&t->vm, BASE, features | (1ull << VIRTIO_F_VERSION_1), 2, QSZ, t->q);
	return 0;
}

static void tb_free(struct tb *t)
{
	virtio_net_destroy(t->dev);
	evloop_destroy(t->vm.loop);
	guest_mem_free(&t->vm.mem);
	free(t->vm.device_cmdline);
}

/* The guest buffer of descriptor slot idx of queue q. */
static uint8_t *slot(struct tb *t, int q, uint16_t idx)
{
	return gmem(t, BUF_GPA + (uint64_t)(q * QSZ + idx) * 65536, 65536);
}

/* Offers one chain on queue q and kicks it; returns the first descriptor's slot. */
static uint16_t offer(struct tb *t, int q, const struct seg *s, int n)
{
	struct vring_avail *a = gmem(t, t->q[q].avail, 4 + 2 * QSZ);
	uint16_t head = t->next_desc[q] % QSZ;

	for (int i = 0; i < n; i++) {
		uint16_t idx = (uint16_t)(t->next_desc[q]++ % QSZ);
		struct vring_desc *d = gmem(t, t->q[q].desc + 16ULL * idx, 16);

		*d = (struct vring_desc){
			.addr = BUF_GPA + (uint64_t)(q * QSZ + idx) * 65536,
			.len = s[i].len,
			.flags = (uint16_t)((s[i].writable ? VRING_DESC_F_WRITE : 0) |
		                            (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
			.next = (uint16_t)(t->next_desc[q] % QSZ),
		};
	}
	a->ring[a->idx % QSZ] = head;
	a->idx++;
	tb_mmio_write(&t->vm, BASE, VIRTIO_MMIO_QUEUE_NOTIFY, (uint32_t)q);
	return head;
}

static struct vring_used *used(struct tb *t, int q)
{
	return gmem(t, t->q[q].used, 4 + 8 * QSZ);
}

static uint8_t cfg8(struct tb *t, unsigned off)
{
	uint8_t v = 0;

	bus_access(&t->vm.mmio, BASE + VIRTIO_MMIO_CONFIG + off, &v, 1, 0);
	return v;
}

UNIT_TEST(net_config_space)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp,mac=02:11:22:33:44:55,mtu=1500", 0) == 0);
	CHECK(cfg8(&t, 0) == 0x02 && cfg8(&t, 5) == 0x55);
	CHECK((cfg8(&t, 6) & VIRTIO_NET_S_LINK_UP) != 0);
	CHECK((cfg8(&t, 10) | cfg8(&t, 11) << 8) == 1500);
	tb_free(&t);
}

UNIT_TEST(net_spec_refuses_what_it_cannot_do)
{
	struct net_spec s;
	char err[256];

	CHECK(net_spec_parse("slirp", &s, err, sizeof(err)) == 0);
	CHECK(s.mtu == NET_MTU_MAX && (s.mac[0] & 3) == 2); /* unicast, locally administered */
	CHECK(net_spec_parse("tap", &s, err, sizeof(err)) == -EINVAL && strstr(err, "slirp"));
	CHECK(net_spec_parse("slirp,mac=01:00:00:00:00:01", &s, err, sizeof(err)) == -EINVAL);
	CHECK(net_spec_parse("slirp,mac=02:00:00:00:00", &s, err, sizeof(err)) == -EINVAL);
	CHECK(net_spec_parse("slirp,mtu=65521", &s, err, sizeof(err)) == -EINVAL);
	CHECK(net_spec_parse("slirp,mtu=67", &s, err, sizeof(err)) == -EINVAL);
	CHECK(net_spec_parse("slirp,speed=9", &s, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "speed"));
}

UNIT_TEST(net_spec_guest_address)
{
	struct net_spec s;
	char err[256];

	CHECK(net_spec_parse("slirp", &s, err, sizeof(err)) == 0 && s.host == 15);
	CHECK(net_spec_parse("slirp,mac=02:00:00:00:00:07,ip=10.0.2.200", &s, err, sizeof(err)) ==
	              0 &&
	      s.host == 200 && s.mac[5] == 7);
	CHECK(net_spec_parse("slirp,ip=10.0.2.4", &s, err, sizeof(err)) == 0 && s.host == 4);
	for (const char *const *bad =
	             (const char *const[]){"slirp,ip=10.0.2.3", "slirp,ip=10.0.2.240",
	                                   "slirp,ip=10.0.3.15", "slirp,ip=10.0.2. 15",
	                                   "slirp,ip=10.0.2.15x", "slirp,ip=10.0.2.1234",
	                                   "slirp,ip=", NULL};
	     *bad; bad++)
		CHECK(net_spec_parse(*bad, &s, err, sizeof(err)) == -EINVAL && strstr(err, "ip="));
}

/* An Ethernet + IPv4 + UDP frame of len bytes whose UDP checksum the guest left to the device. */
static void udp_frame(uint8_t *f, size_t len)
{
	memset(f, 0, len);
	f[12] = 0x08; /* IPv4 */
	f[14] = 0x45;
	f[23] = 17; /* UDP */
	for (size_t i = 42; i < len; i++)
		f[i] = (uint8_t)(i * 13);
}

static uint16_t fold(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

UNIT_TEST(net_tx_completes_the_checksum)
{
	struct tb t;
	struct virtio_net_hdr_v1 *h;
	uint16_t head;

	CHECK(tb_init(&t, "slirp", 1ull << VIRTIO_NET_F_CSUM) == 0);
	head = offer(&t, 1, (struct seg[]){{sizeof(*h), 0}, {301, 0}}, 2);
	h = (void *)slot(&t, 1, head);
	*h = (struct virtio_net_hdr_v1){
		.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM, .csum_start = 34, .csum_offset = 6};
	udp_frame(slot(&t, 1, (uint16_t)(head + 1)), 301);
	CHECK(t.kicks >= 1);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 301);
	CHECK(fold(t.frame + 34, 301 - 34) == 0xffff);
	CHECK(t.frame[50] == (uint8_t)(50 * 13));
	CHECK(used(&t, 1)->idx == 1);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 0);
	tb_free(&t);
}

UNIT_TEST(net_tx_drops_what_was_never_offered)
{
	struct tb t;
	struct virtio_net_hdr_v1 *h;
	uint16_t head;

	CHECK(tb_init(&t, "slirp", 0) == 0);
	/* Segmentation offload was not offered; nor a checksum field past the frame's end. */
	head = offer(&t, 1, (struct seg[]){{sizeof(*h), 0}, {100, 0}}, 2);
	h = (void *)slot(&t, 1, head);
	*h = (struct virtio_net_hdr_v1){.gso_type = VIRTIO_NET_HDR_GSO_TCPV4};
	head = offer(&t, 1, (struct seg[]){{sizeof(*h), 0}, {100, 0}}, 2);
	h = (void *)slot(&t, 1, head);
	*h = (struct virtio_net_hdr_v1){
		.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM, .csum_start = 90, .csum_offset = 10};
	/* A header alone, and a runt. */
	offer(&t, 1, (struct seg[]){{sizeof(*h) - 2, 0}}, 1);
	offer(&t, 1, (struct seg[]){{sizeof(*h) + 10, 0}}, 1);
	/* Then a good one: the bad ones went back to the guest, this one comes through. */
	head = offer(&t, 1, (struct seg[]){{sizeof(*h), 0}, {64, 0}}, 2);
	memset(slot(&t, 1, head), 0, sizeof(*h));
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 64);
	CHECK(used(&t, 1)->idx == 5);
	tb_free(&t);
}

UNIT_TEST(net_rx_spreads_a_frame_over_mergeable_buffers)
{
	struct tb t;
	uint16_t heads[4];
	struct virtio_net_hdr_v1 *h;
	struct vring_used *u;

	CHECK(tb_init(&t, "slirp",
	              (1ull << VIRTIO_NET_F_MRG_RXBUF) | (1ull << VIRTIO_NET_F_GUEST_CSUM)) == 0);
	for (size_t i = 0; i < 2500; i++)
		t.frame[i] = (uint8_t)(i * 7 + 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 2500) == -EAGAIN); /* nothing posted yet */
	for (int i = 0; i < 4; i++)
		heads[i] = offer(&t, 0, (struct seg[]){{1000, 1}}, 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 2500) == 0);
	u = used(&t, 0);
	CHECK(u->idx == 3);
	CHECK(u->ring[0].len == 1000 && u->ring[1].len == 1000 &&
	      u->ring[2].len == 2500 + 12 - 2000);
	h = (void *)slot(&t, 0, heads[0]);
	CHECK(h->num_buffers == 3 && (h->flags & VIRTIO_NET_HDR_F_DATA_VALID));
	CHECK(memcmp(slot(&t, 0, heads[0]) + 12, t.frame, 988) == 0);
	CHECK(memcmp(slot(&t, 0, heads[1]), t.frame + 988, 1000) == 0);
	CHECK(memcmp(slot(&t, 0, heads[2]), t.frame + 1988, 512) == 0);
	/* One buffer left: a frame that needs three waits, with nothing taken. */
	CHECK(virtio_net_rx(t.dev, t.frame, 2500) == -EAGAIN);
	CHECK(u->idx == 3);
	offer(&t, 0, (struct seg[]){{1000, 1}}, 1);
	offer(&t, 0, (struct seg[]){{1000, 1}}, 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 2500) == 0);
	CHECK(u->idx == 6);
	CHECK(virtio_net_rx(t.dev, t.frame, NET_FRAME_MAX + 1) == -EMSGSIZE);
	tb_free(&t);
}

UNIT_TEST(net_rx_without_mergeable_needs_one_chain)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp", 0) == 0);
	offer(&t, 0, (struct seg[]){{1000, 1}}, 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 2500) == -EMSGSIZE);
	CHECK(used(&t, 0)->idx == 0); /* the chain is still the guest's to use */
	CHECK(virtio_net_rx(t.dev, t.frame, 900) == 0);
	CHECK(used(&t, 0)->idx == 1 && used(&t, 0)->ring[0].len == 912);
	/* A chain too small for the header goes back empty; the frame waits. */
	offer(&t, 0, (struct seg[]){{4, 1}}, 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 60) == -EAGAIN);
	CHECK(used(&t, 0)->idx == 2 && used(&t, 0)->ring[1].len == 0);
	tb_free(&t);
}

UNIT_TEST(net_leaves_guest_memory_alone_while_paused)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp", 1ull << VIRTIO_NET_F_MRG_RXBUF) == 0);
	offer(&t, 0, (struct seg[]){{2000, 1}}, 1);
	offer(&t, 1, (struct seg[]){{12, 0}, {60, 0}}, 2);
	atomic_store(&t.vm.pause_req, 1);
	CHECK(virtio_net_rx(t.dev, t.frame, 100) == -EAGAIN);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 0);
	CHECK(used(&t, 0)->idx == 0 && used(&t, 1)->idx == 0);
	atomic_store(&t.vm.pause_req, 0);
	CHECK(virtio_net_rx(t.dev, t.frame, 100) == 0);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 60);
	tb_free(&t);
}

UNIT_TEST(net_interrupts_once_per_turn)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp", 1ull << VIRTIO_NET_F_MRG_RXBUF) == 0);
	offer(&t, 0, (struct seg[]){{2000, 1}}, 1);
	offer(&t, 0, (struct seg[]){{2000, 1}}, 1);
	offer(&t, 1, (struct seg[]){{12, 0}, {60, 0}}, 2);
	CHECK(virtio_net_rx(t.dev, t.frame, 100) == 0);
	CHECK(virtio_net_rx(t.dev, t.frame, 100) == 0);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 60);
	/* Three frames both ways, and no interrupt until the backend's turn ends. */
	CHECK(tb_mmio_read(&t.vm, BASE, VIRTIO_MMIO_INTERRUPT_STATUS) == 0);
	virtio_net_flush(t.dev);
	CHECK(tb_mmio_read(&t.vm, BASE, VIRTIO_MMIO_INTERRUPT_STATUS) == VIRTIO_MMIO_INT_VRING);
	tb_mmio_write(&t.vm, BASE, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	/* Nothing new since: no interrupt. */
	virtio_net_flush(t.dev);
	CHECK(tb_mmio_read(&t.vm, BASE, VIRTIO_MMIO_INTERRUPT_STATUS) == 0);
	tb_free(&t);
}

/* The ring's avail_event word (event idx): where the guest kicks next. */
static uint16_t avail_event(struct tb *t, int q)
{
	return *(uint16_t *)gmem(t, t->q[q].used + 4 + 8ULL * QSZ, 2);
}

UNIT_TEST(net_asks_for_a_kick_only_once_drained)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp", 1ull << VIRTIO_RING_F_EVENT_IDX) == 0);
	offer(&t, 1, (struct seg[]){{12, 0}, {60, 0}}, 2);
	offer(&t, 1, (struct seg[]){{12, 0}, {70, 0}}, 2);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 60);
	/* Frames the guest adds while we drain cost it no kick. */
	CHECK(avail_event(&t, 1) == 0);
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 70);
	CHECK(avail_event(&t, 1) == 0);
	/* Found empty: the next frame kicks. */
	CHECK(virtio_net_tx(t.dev, t.frame, sizeof(t.frame)) == 0);
	CHECK(avail_event(&t, 1) == 2);
	tb_free(&t);
}

UNIT_TEST(vm_resume_wakes_the_network_backend)
{
	struct tb t;

	CHECK(tb_init(&t, "slirp", 0) == 0);
	pthread_mutex_init(&t.vm.pause_lock, NULL);
	pthread_cond_init(&t.vm.pause_cond, NULL);
	t.vm.resumed = count_kick;
	t.vm.resumed_ctx = &t;
	t.kicks = 0;
	/* Frames held while paused: the guest may not kick for them again. */
	atomic_store(&t.vm.pause_req, 1);
	vm_resume(&t.vm);
	CHECK(t.kicks == 1 && atomic_load(&t.vm.pause_req) == 0);
	pthread_cond_destroy(&t.vm.pause_cond);
	pthread_mutex_destroy(&t.vm.pause_lock);
	tb_free(&t);
}
