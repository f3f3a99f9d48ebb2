/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_VIRTQ_H
#define HUSK_VIRTIO_VIRTQ_H

#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/*
 * A split virtqueue (virtio 1.x, 2.7) as the device side sees it. Every
 * field the guest can change is read once into a local before use; every
 * address goes through gpa_ptr(). The guest is never trusted: a malformed
 * ring or chain is refused, never followed.
 */
#define VIRTQ_MAX_SIZE 1024
/* A chain longer than this is refused: it bounds the walk and the iovec. */
#define VIRTQ_MAX_CHAIN 256

struct virtq {
	uint16_t size; /* entries; a power of two, <= VIRTQ_MAX_SIZE */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	struct vring_desc *desc; /* host views, checked when the queue is enabled */
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t last_avail; /* next avail ring slot to consume */
	uint16_t used_idx;   /* our copy of used->idx */
	uint16_t signalled;  /* used_idx at the last interrupt (event idx) */
	bool event_idx;      /* VIRTIO_RING_F_EVENT_IDX negotiated */
	/*
	 * With event idx: ask the driver for a kick only once the ring is found
	 * empty, not after every chain taken (vhost's and QEMU's way), for a
	 * device that drains a queue whenever it is kicked: entries the driver
	 * adds while we drain cost it no exit.
	 */
	bool kick_when_empty;
	bool ready;
	bool broken; /* the driver broke the ring; the queue stops until reset */
};

struct virtq_buf {
	uint8_t *addr; /* host view of guest memory: read it once, it can change */
	uint32_t len;
};

/* One descriptor chain: device-readable buffers first, then writable ones. */
struct virtq_chain {
	uint16_t head;
	uint16_t nr_out; /* readable ("out" from the driver) */
	uint16_t nr_in;  /* writable */
	uint32_t out_len, in_len;
	struct virtq_buf buf[VIRTQ_MAX_CHAIN];
};

/*
 * Enables vq: checks size and that the descriptor table and both rings lie
 * in guest RAM. Returns 0 or -EINVAL (the queue stays disabled).
 */
int virtq_enable(struct virtq *vq, const struct guest_mem *mem) __attribute__((warn_unused_result));

/* Forgets all state; the queue is disabled. */
void virtq_reset(struct virtq *vq);

/*
 * Takes the next available chain. Returns 1 with *c filled, 0 if the ring is
 * empty, or -EINVAL if the chain or the ring is malformed: a loop, a chain
 * longer than VIRTQ_MAX_CHAIN or the queue, an index out of range, a buffer
 * outside guest RAM, a readable buffer after a writable one, an indirect
 * descriptor, lengths summing past 4 GiB. A bad chain is returned to the
 * guest as used with length 0; a bad ring (avail index too far ahead)
 * marks the queue broken.
 */
int virtq_pop(struct virtq *vq, const struct guest_mem *mem, struct virtq_chain *c)
	__attribute__((warn_unused_result));

/* Puts back the chain the last virtq_pop() returned, unused (nothing was pushed since). */
void virtq_unpop(struct virtq *vq);

/* Returns a chain to the guest with len bytes written into its writable part. */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t len);

/* Whether the guest wants an interrupt for what was pushed since the last one. */
bool virtq_should_signal(struct virtq *vq);

/* Whether the ring holds chains not yet popped. */
bool virtq_has_work(struct virtq *vq);

/*
 * One line of where the ring stands, ours and the driver's (for a stuck
 * device: who waits for whom), into buf.
 */
void virtq_describe(struct virtq *vq, char *buf, size_t len);

/*
 * Copies up to len bytes from the chain's readable buffers, starting at byte
 * off of the readable part. Returns bytes copied.
 */
size_t virtq_chain_read(const struct virtq_chain *c, size_t off, void *dst, size_t len);

/* Copies into the writable buffers from byte off of the writable part; returns bytes copied. */
size_t virtq_chain_write(const struct virtq_chain *c, size_t off, const void *src, size_t len);

#endif
