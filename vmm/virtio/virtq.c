// SPDX-License-Identifier: MIT
#include "virtio/virtq.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* Guest-shared fields: one load or store each, with the ordering virtio needs. */
#define LOAD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define LOAD_ACQ(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)

/* The event-index words that follow each ring (2.7.10). */
static uint16_t *avail_event_word(struct virtq *vq)
{
	return (uint16_t *)((uint8_t *)vq->used + offsetof(struct vring_used, ring) +
	                    sizeof(struct vring_used_elem) * vq->size);
}

static uint16_t *used_event_word(struct virtq *vq)
{
	return (uint16_t *)((uint8_t *)vq->avail + offsetof(struct vring_avail, ring) +
	                    sizeof(uint16_t) * vq->size);
}

static size_t desc_size(uint16_t n)
{
	return sizeof(struct vring_desc) * n;
}

/* flags, idx, ring[n], used_event */
static size_t avail_size(uint16_t n)
{
	return sizeof(uint16_t) * (3 + (size_t)n);
}

/* flags, idx, ring[n], avail_event */
static size_t used_size(uint16_t n)
{
	return sizeof(uint16_t) * 3 + sizeof(struct vring_used_elem) * n;
}

int virtq_enable(struct virtq *vq, const struct guest_mem *mem)
{
	uint16_t n = vq->size;

	vq->ready = false;
	if (n == 0 || n > VIRTQ_MAX_SIZE || (n & (n - 1)))
		return -EINVAL;
	/* Alignment as the spec requires (2.7: 16, 2, 4). */
	if (vq->desc_gpa % 16 || vq->avail_gpa % 2 || vq->used_gpa % 4)
		return -EINVAL;
	vq->desc = gpa_ptr(mem, vq->desc_gpa, desc_size(n));
	vq->avail = gpa_ptr(mem, vq->avail_gpa, avail_size(n));
	vq->used = gpa_ptr(mem, vq->used_gpa, used_size(n));
	if (!vq->desc || !vq->avail || !vq->used)
		return -EINVAL;
	/* The device writes the used ring (and avail_event in it) from now on. */
	guest_mem_mark(mem, vq->used_gpa, used_size(n));
	vq->last_avail = 0;
	vq->used_idx = 0;
	vq->signalled = 0;
	vq->broken = false;
	vq->ready = true;
	return 0;
}

void virtq_reset(struct virtq *vq)
{
	memset(vq, 0, sizeof(*vq));
}

bool virtq_has_work(struct virtq *vq)
{
	return vq->ready && !vq->broken && LOAD_ACQ(vq->avail->idx) != vq->last_avail;
}

/* Walks the chain at head into c; 0 or -EINVAL. */
static int walk(struct virtq *vq, const struct guest_mem *mem, uint16_t head, struct virtq_chain *c)
{
	uint16_t idx = head;
	uint64_t out = 0, in = 0;
	unsigned n = 0, steps = 0;

	c->head = head;
	c->nr_out = c->nr_in = 0;
	for (;;) {
		struct vring_desc d;

		/* A chain visits each descriptor at most once: longer means a loop. */
		if (idx >= vq->size || steps++ >= vq->size)
			return -EINVAL;
		d.addr = LOAD(vq->desc[idx].addr);
		d.len = LOAD(vq->desc[idx].len);
		d.flags = LOAD(vq->desc[idx].flags);
		d.next = LOAD(vq->desc[idx].next);
		if (d.flags & VRING_DESC_F_INDIRECT)
			return -EINVAL;
		if (d.len) {
			uint8_t *p = gpa_ptr(mem, d.addr, d.len);

			if (!p || n >= VIRTQ_MAX_CHAIN)
				return -EINVAL;
			if (d.flags & VRING_DESC_F_WRITE) {
				/* Whether or not the device fills it: a superset is safe. */
				guest_mem_mark(mem, d.addr, d.len);
				in += d.len;
				c->nr_in++;
			} else {
				if (c->nr_in)
					return -EINVAL; /* readable after writable */
				out += d.len;
				c->nr_out++;
			}
			c->buf[n].addr = p;
			c->buf[n].len = d.len;
			n++;
		}
		if (!(d.flags & VRING_DESC_F_NEXT))
			break;
		idx = d.next;
	}
	if (out > UINT32_MAX || in > UINT32_MAX)
		return -EINVAL;
	c->out_len = (uint32_t)out;
	c->in_len = (uint32_t)in;
	return 0;
}

int virtq_pop(struct virtq *vq, const struct guest_mem *mem, struct virtq_chain *c)
{
	uint16_t avail_idx, head;

	if (!vq->ready || vq->broken)
		return 0;
	avail_idx = LOAD_ACQ(vq->avail->idx);
	if (avail_idx == vq->last_avail) {
		if (!vq->event_idx)
			return 0;
		/*
		 * Empty, as far as we can see: say where we stopped, then look once
		 * more. Without the fence our store could pass the load (x86 keeps
		 * stores in a buffer), a driver adding an entry meanwhile could read
		 * the older avail_event and not kick, and the entry would wait for
		 * the next kick, maybe forever (virtio 1.1, 2.6.7.2; vhost does the same).
		 */
		STORE(*avail_event_word(vq), vq->last_avail);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		avail_idx = LOAD_ACQ(vq->avail->idx);
		if (avail_idx == vq->last_avail)
			return 0;
	}
	if ((uint16_t)(avail_idx - vq->last_avail) > vq->size) {
		log_guest(LOG_WARN,
		          "virtqueue: avail index %u runs %u ahead of a %u-entry ring; "
		          "queue stopped until the driver resets it",
		          avail_idx, (uint16_t)(avail_idx - vq->last_avail), vq->size);
		vq->broken = true;
		return -EINVAL;
	}
	head = LOAD(vq->avail->ring[vq->last_avail % vq->size]);
	vq->last_avail++;
	if (vq->event_idx && !vq->kick_when_empty)
		STORE(*avail_event_word(vq), vq->last_avail);
	if (head >= vq->size || walk(vq, mem, head, c)) {
		log_guest(LOG_WARN, "virtqueue: malformed descriptor chain at head %u refused",
		          head);
		if (head < vq->size)
			virtq_push(vq, head, 0);
		return -EINVAL;
	}
	return 1;
}

void virtq_unpop(struct virtq *vq)
{
	vq->last_avail--;
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t len)
{
	struct vring_used_elem *e = &vq->used->ring[vq->used_idx % vq->size];

	STORE(e->id, head);
	STORE(e->len, len);
	vq->used_idx++;
	/* The element must be visible before the index that publishes it. */
	STORE_REL(vq->used->idx, vq->used_idx);
}

bool virtq_should_signal(struct virtq *vq)
{
	uint16_t old = vq->signalled, now = vq->used_idx;

	/* Pairs with the driver's barrier between writing flags/event and reading idx. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (old == now)
		return false;
	vq->signalled = now;
	if (vq->event_idx) {
		uint16_t event = LOAD(*used_event_word(vq));

		return vring_need_event(event, now, old);
	}
	return !(LOAD(vq->avail->flags) & VRING_AVAIL_F_NO_INTERRUPT);
}

size_t virtq_chain_read(const struct virtq_chain *c, size_t off, void *dst, size_t len)
{
	uint8_t *d = dst;
	size_t done = 0;

	for (unsigned i = 0; i < c->nr_out && done < len; i++) {
		size_t blen = c->buf[i].len, n;

		if (off >= blen) {
			off -= blen;
			continue;
		}
		n = blen - off < len - done ? blen - off : len - done;
		memcpy(d + done, c->buf[i].addr + off, n);
		done += n;
		off = 0;
	}
	return done;
}

size_t virtq_chain_write(const struct virtq_chain *c, size_t off, const void *src, size_t len)
{
	const uint8_t *s = src;
	size_t done = 0;

	for (unsigned i = c->nr_out; i < (unsigned)c->nr_out + c->nr_in && done < len; i++) {
		size_t blen = c->buf[i].len, n;

		if (off >= blen) {
			off -= blen;
			continue;
		}
		n = blen - off < len - done ? blen - off : len - done;
		memcpy(c->buf[i].addr + off, s + done, n);
		done += n;
		off = 0;
	}
	return done;
}

void virtq_describe(struct virtq *vq, char *buf, size_t len)
{
	if (!vq->ready) {
		snprintf(buf, len, "not ready");
		return;
	}
	snprintf(buf, len,
	         "size %u, avail idx %u (we took %u), used idx %u (shared %u, signalled %u), "
	         "avail flags %#x, event idx %s (avail_event %u, used_event %u)%s",
	         vq->size, LOAD_ACQ(vq->avail->idx), vq->last_avail, vq->used_idx,
	         LOAD(vq->used->idx), vq->signalled, LOAD(vq->avail->flags),
	         vq->event_idx ? "on" : "off", LOAD(*avail_event_word(vq)),
	         LOAD(*used_event_word(vq)), vq->broken ? ", broken" : "");
}
