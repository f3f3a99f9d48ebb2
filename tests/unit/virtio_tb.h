/* SPDX-License-Identifier: MIT */
#ifndef HUSK_UNIT_VIRTIO_TB_H
#define HUSK_UNIT_VIRTIO_TB_H

#include <stdint.h>

#include "vm.h"

struct tb_queue {
	uint64_t desc, avail, used; /* guest-physical addresses */
};

/* Writes a 32-bit MMIO register of the device at base. */
void tb_mmio_write(struct vm *vm, uint64_t base, uint64_t off, uint32_t v);

/* Reads one. */
uint32_t tb_mmio_read(struct vm *vm, uint64_t base, uint64_t off);

/*
 * Brings a virtio-mmio device up as Linux's driver does: acknowledge,
 * VERSION_1 only, FEATURES_OK, nq queues of qsz entries at q[], DRIVER_OK.
 */
void tb_virtio_up(struct vm *vm, uint64_t base, unsigned nq, uint16_t qsz,
                  const struct tb_queue *q);

/* The same with the feature bits given (VIRTIO_F_VERSION_1 among them). */
void tb_virtio_up_with(struct vm *vm, uint64_t base, uint64_t features, unsigned nq, uint16_t qsz,
                       const struct tb_queue *q);

#endif
