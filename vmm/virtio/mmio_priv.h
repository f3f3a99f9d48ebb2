/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_MMIO_PRIV_H
#define HUSK_VIRTIO_MMIO_PRIV_H

/* What the virtio-mmio transport (mmio.c) and its snapshot state (mmio_state.c) share. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "virtio/virtio.h"
#include "virtio/virtq.h"

#define MMIO_MAX_QUEUES 8

struct notify_ctx {
	struct virtio_mmio *t;
	unsigned q;
	int fd;
};

struct virtio_mmio {
	pthread_mutex_t lock;
	/* Makes each raise a whole edge (see mmio_raise). */
	pthread_mutex_t raise_lock;
	struct vm *vm;
	const struct virtio_dev_ops *ops;
	void *dev;
	uint64_t base;
	unsigned irq;
	uint32_t status;
	uint32_t dev_feat_sel, drv_feat_sel;
	uint64_t driver_features;
	uint32_t queue_sel;
	uint32_t int_status;
	bool raise_pending; /* an interrupt to raise once the lock is dropped */
	uint32_t config_gen;
	struct virtq vqs[MMIO_MAX_QUEUES];
	struct notify_ctx notify[MMIO_MAX_QUEUES];
	/* What the guest cost us, logged at debug level when the device goes. */
	uint64_t nr_notify, nr_irq, nr_status_reads;
};

/*
 * The transport's part of a snapshot (its registers and queue positions)
 * followed by the device's own blob (ops->save), as one malloc'd blob; 0 or
 * -errno. The signature of vm_snap_register(); dev is the transport.
 */
int mmio_state_save(void *dev, void **blob, size_t *len);

/*
 * Loads such a blob into a transport made with the same device and
 * queues, remaking (and checking) the queues against this VM's memory,
 * then the device's state; ends with a notify and an interrupt for
 * whatever was in flight. 0, -EINVAL for a blob that does not fit, -errno.
 */
int mmio_state_restore(void *dev, const void *blob, size_t len);

/* Raises the device's interrupt line (an edge); no lock needed. */
void mmio_raise(struct virtio_mmio *t);

#endif
