// SPDX-License-Identifier: MIT
/* Shared by the device tests: a guest driver's side of virtio-mmio. */
#include "virtio_tb.h"

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>

void tb_mmio_write(struct vm *vm, uint64_t base, uint64_t off, uint32_t v)
{
	bus_access(&vm->mmio, base + off, (uint8_t *)&v, 4, 1);
}

uint32_t tb_mmio_read(struct vm *vm, uint64_t base, uint64_t off)
{
	uint32_t v = 0;

	bus_access(&vm->mmio, base + off, (uint8_t *)&v, 4, 0);
	return v;
}

void tb_virtio_up(struct vm *vm, uint64_t base, unsigned nq, uint16_t qsz, const struct tb_queue *q)
{
	tb_virtio_up_with(vm, base, 1ull << VIRTIO_F_VERSION_1, nq, qsz, q);
}

void tb_virtio_up_with(struct vm *vm, uint64_t base, uint64_t features, unsigned nq, uint16_t qsz,
                       const struct tb_queue *q)
{
	const uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

	tb_mmio_write(vm, base, VIRTIO_MMIO_STATUS, s);
	tb_mmio_write(vm, base, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	tb_mmio_write(vm, base, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	tb_mmio_write(vm, base, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	tb_mmio_write(vm, base, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	tb_mmio_write(vm, base, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK);
	for (unsigned i = 0; i < nq; i++) {
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_SEL, i);
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_NUM, qsz);
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)q[i].desc);
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)q[i].avail);
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)q[i].used);
		tb_mmio_write(vm, base, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	tb_mmio_write(vm, base, VIRTIO_MMIO_STATUS,
	              s | VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
}
