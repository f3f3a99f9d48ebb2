// SPDX-License-Identifier: MIT
/*
 * Fuzzes virtio-net's request path: the input becomes the features a guest
 * driver negotiates, both queues' descriptor tables and avail rings, the
 * bytes of its buffers and a frame for the host to deliver; the backend's
 * side then takes every frame the guest offers and delivers that frame.
 */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_net.h>
#include <linux/virtio_ring.h>
#include <stdint.h>
#include <string.h>

#include "virtio/net.h"
#include "virtio_tb.h"
#include "vm.h"

#define QSZ 16
#define BASE 0xd0000000ULL
#define MEM_SIZE (8U << 20)
#define RING_BYTES (16 * QSZ + 4 + 2 * QSZ)
#define BUF_GPA 0x100000U

static struct vm vm = {.vm_fd = -1, .stop_fd = -1};
static struct virtio_net *dev;
static uint8_t frame[NET_FRAME_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_kick(void *ctx)
{
	(void)ctx;
}

static int setup(void)
{
	struct net_spec spec;
	char err[128];

	if (guest_mem_init(&vm.mem, MEM_SIZE))
		return -1;
	vm.loop = evloop_create();
	if (net_spec_parse("slirp,mtu=65520", &spec, err, sizeof(err)))
		return -1;
	dev = virtio_net_create(&vm, &spec, no_kick, NULL);
	return dev ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tb_queue q[2];
	uint64_t features = 1ull << VIRTIO_F_VERSION_1;
	size_t len;

	if (!dev && setup())
		return 0;
	if (size < 1 + 2 * RING_BYTES)
		return 0;
	if (data[0] & 1)
		features |= 1ull << VIRTIO_NET_F_MRG_RXBUF;
	if (data[0] & 2)
		features |= 1ull << VIRTIO_NET_F_CSUM;
	data++;
	size--;
	memset(gpa_ptr(&vm.mem, 0, BUF_GPA), 0, BUF_GPA);
	for (int i = 0; i < 2; i++) {
		uint64_t base = 0x10000 + 0x3000ULL * i;
		struct vring_desc *d = gpa_ptr(&vm.mem, base, 16 * QSZ);

		q[i] = (struct tb_queue){
			.desc = base, .avail = base + 0x1000, .used = base + 0x2000};
		memcpy(d, data, 16 * QSZ);
		/* Mostly inside guest RAM, so the walk gets past the bounds check. */
		for (int j = 0; j < QSZ; j++)
			if (!(d[j].addr & (1ull << 63)))
				d[j].addr = BUF_GPA + (d[j].addr & 0x3fffff);
		memcpy(gpa_ptr(&vm.mem, q[i].avail, 4 + 2 * QSZ), data + 16 * QSZ, 4 + 2 * QSZ);
		data += RING_BYTES;
		size -= RING_BYTES;
	}
	/* The rest: the guest's buffer bytes, and the frame to deliver. */
	len = size < (4U << 20) ? size : (4U << 20);
	if (len)
		memcpy(gpa_ptr(&vm.mem, BUF_GPA, len), data, len);
	tb_mmio_write(&vm, BASE, VIRTIO_MMIO_STATUS, 0); /* reset */
	tb_virtio_up_with(&vm, BASE, features, 2, QSZ, q);
	for (int i = 0; i < 2 * QSZ && virtio_net_tx(dev, frame, sizeof(frame)) > 0; i++)
		;
	len = size < sizeof(frame) ? size : sizeof(frame);
	for (int i = 0; i < 4 && virtio_net_rx(dev, data, len) == 0; i++)
		;
	return 0;
}
