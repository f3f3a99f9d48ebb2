/* SPDX-License-Identifier: MIT */
#ifndef HUSK_FUZZ_DEV_H
#define HUSK_FUZZ_DEV_H

/*
 * A VM without KVM holding the guest-facing virtio devices (rng, blk on a
 * small raw disk, vsock with a host listener), for fuzz targets that drive
 * them as a hostile guest would (fuzz_dev.c).
 */
#include <stddef.h>
#include <stdint.h>

#include "vm.h"

#define FDEV_COUNT 3 /* rng, blk, vsock */
#define FDEV_QSZ 16
#define FDEV_RING_BYTES (16 * FDEV_QSZ + 4 + 2 * FDEV_QSZ)
#define FDEV_BUF_GPA 0x100000u
#define FDEV_MEM (8u << 20)

struct fdev {
	struct vm vm;
	uint64_t base[FDEV_COUNT];
	unsigned queues[FDEV_COUNT];
	int listen_fd; /* vsock's host side: connections to port 1234 land here */
};

/* Makes the VM and its devices once; NULL if it cannot. */
struct fdev *fdev_get(void);

/* Resets every device, then accepts and closes what the host side was offered. */
void fdev_reset(struct fdev *f);

/*
 * Runs a guest's program against device d: queue memory from the input,
 * then 6-byte operations (register writes and reads, notifications, buffer
 * changes, device loop turns, the driver's bring-up). Returns bytes used.
 */
size_t fdev_drive(struct fdev *f, unsigned d, const uint8_t *data, size_t size);

#endif
