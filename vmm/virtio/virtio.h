/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_H
#define HUSK_VIRTIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio/virtq.h"

struct vm;
struct virtio_mmio;

/*
 * What a virtio device tells the transport. Devices fill one static const
 * table each; the transport calls it and never changes it. Every hook runs
 * with the device's lock held (virtio_lock()).
 */
struct virtio_dev_ops {
	const char *name;
	uint32_t device_id; /* VIRTIO_ID_* */
	uint16_t nr_queues;
	uint16_t queue_max; /* largest queue size offered */
	uint64_t features;  /* device feature bits; the transport adds VERSION_1, EVENT_IDX */
	/* Every kick drains its queue (or comes again): see virtq.kick_when_empty. */
	bool kick_when_empty;
	size_t config_size; /* bytes of device config space */
	/* Config space access; off + len <= config_size. NULL: reads zero, writes ignored. */
	void (*config_read)(void *dev, uint32_t off, void *data, unsigned len);
	void (*config_write)(void *dev, uint32_t off, const void *data, unsigned len);
	/* The driver set DRIVER_OK: queues are ready. Nonzero refuses (DEVICE_NEEDS_RESET). */
	int (*activate)(void *dev);
	/* The driver kicked queue q (device thread). */
	void (*notify)(void *dev, unsigned q);
	/*
	 * The device's own thread polls its queues' notification eventfds
	 * (virtio_notify_fd) instead of the event loop: one thread hop less per
	 * kick. notify then comes only from MMIO writes (no KVM: tests).
	 */
	bool notify_by_fd;
	/* The driver reset the device: drop all state tied to the queues. */
	void (*reset)(void *dev);
	/*
	 * Snapshots (optional): the device's own state beyond the transport's
	 * (queues, features, status), as a malloc'd blob; restore runs after the
	 * transport is back, queues live, in a VMM that has no host-side
	 * connections of the old one.
	 */
	int (*save)(void *dev, void **blob, size_t *len);
	int (*restore)(void *dev, const void *blob, size_t len);
	/* Logs the device's own state after the transport's (optional; lock held). */
	void (*dump)(void *dev);
};

/*
 * Creates a virtio-mmio transport for dev: claims the next MMIO window and
 * ISA IRQ, wires one ioeventfd per queue for notifications (served on the
 * VM's event loop unless notify_by_fd), and announces the device
 * on the guest command line. Returns NULL and logs on failure.
 */
struct virtio_mmio *virtio_mmio_create(struct vm *vm, const struct virtio_dev_ops *ops, void *dev);
void virtio_mmio_destroy(struct virtio_mmio *t);

/* The device's lock: hold it around any queue work outside the hooks. */
void virtio_lock(struct virtio_mmio *t);
void virtio_unlock(struct virtio_mmio *t);

/* Queue q of the device, or NULL if q is out of range. */
struct virtq *virtio_queue(struct virtio_mmio *t, unsigned q);

/* Guest memory the queues point into. */
const struct guest_mem *virtio_mem(struct virtio_mmio *t);

/*
 * After pushing used buffers on q: interrupts the guest if it wants one,
 * when the lock is dropped (one interrupt for all signalled under it). Lock held.
 */
void virtio_signal(struct virtio_mmio *t, unsigned q);

/*
 * How many chains a device takes from one queue per notification: a guest
 * that keeps a queue full must not hold the device loop (and the other
 * devices and the control socket) for ever. With more left, the device
 * calls virtio_notify_again() and the rest comes at the loop's next turn.
 */
#define VIRTQ_BUDGET 256
/* Has queue q's notification come again (its ioeventfd made readable). Lock held. */
void virtio_notify_again(struct virtio_mmio *t, unsigned q);
/*
 * With notify_by_fd: queue q's notification eventfd (-1 without KVM), and
 * taking what it counted once it polls readable.
 */
int virtio_notify_fd(struct virtio_mmio *t, unsigned q);
void virtio_notify_take(struct virtio_mmio *t, unsigned q);

/* Whether the driver negotiated feature bit. */
int virtio_has_feature(struct virtio_mmio *t, unsigned bit);

#endif
