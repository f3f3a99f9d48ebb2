// SPDX-License-Identifier: MIT
/*
 * The virtio-mmio transport's part of a snapshot (mmio_priv.h): registers
 * and queue positions, with the device's own blob behind them.
 */
#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "virtio/mmio_priv.h"
#include "vm.h"

#define MMIO_STATE_MAGIC 0x4f494d48u /* "HMIO" */
#define MMIO_STATE_VERSION 1

struct mmio_state {
	uint32_t magic, version, nr_queues, dev_len;
	uint32_t status, dev_feat_sel, drv_feat_sel, queue_sel, int_status, config_gen;
	uint64_t driver_features;
	struct {
		uint64_t desc, avail, used;
		uint16_t size, last_avail, used_idx, signalled;
		uint8_t ready, event_idx, broken, pad[5];
	} q[MMIO_MAX_QUEUES];
	uint8_t dev[];
};

int mmio_state_save(void *dev, void **blob, size_t *len)
{
	struct virtio_mmio *t = dev;
	void *dblob = NULL;
	size_t dlen = 0;
	struct mmio_state *s;
	int ret = 0;

	virtio_lock(t);
	if (t->ops->save)
		ret = t->ops->save(t->dev, &dblob, &dlen);
	s = ret ? NULL : calloc(1, sizeof(*s) + dlen);
	if (s) {
		s->magic = MMIO_STATE_MAGIC;
		s->version = MMIO_STATE_VERSION;
		s->nr_queues = t->ops->nr_queues;
		s->dev_len = (uint32_t)dlen;
		s->status = t->status;
		s->dev_feat_sel = t->dev_feat_sel;
		s->drv_feat_sel = t->drv_feat_sel;
		s->queue_sel = t->queue_sel;
		s->int_status = t->int_status;
		s->config_gen = t->config_gen;
		s->driver_features = t->driver_features;
		for (unsigned q = 0; q < t->ops->nr_queues; q++) {
			const struct virtq *vq = &t->vqs[q];

			s->q[q].desc = vq->desc_gpa;
			s->q[q].avail = vq->avail_gpa;
			s->q[q].used = vq->used_gpa;
			s->q[q].size = vq->size;
			s->q[q].last_avail = vq->last_avail;
			s->q[q].used_idx = vq->used_idx;
			s->q[q].signalled = vq->signalled;
			s->q[q].ready = vq->ready;
			s->q[q].event_idx = vq->event_idx;
			s->q[q].broken = vq->broken;
		}
		if (dlen)
			memcpy(s->dev, dblob, dlen);
	}
	virtio_unlock(t);
	free(dblob);
	if (ret)
		return ret;
	if (!s)
		return -ENOMEM;
	*blob = s;
	*len = sizeof(*s) + dlen;
	return 0;
}

int mmio_state_restore(void *dev, const void *blob, size_t len)
{
	struct virtio_mmio *t = dev;
	struct mmio_state s;
	int ret = 0;

	if (len < sizeof(s))
		return -EINVAL;
	memcpy(&s, blob, sizeof(s));
	if (s.magic != MMIO_STATE_MAGIC || s.version != MMIO_STATE_VERSION ||
	    s.nr_queues != t->ops->nr_queues || len != sizeof(s) + s.dev_len)
		return -EINVAL;
	virtio_lock(t);
	t->status = s.status;
	t->dev_feat_sel = s.dev_feat_sel;
	t->drv_feat_sel = s.drv_feat_sel;
	t->queue_sel = s.queue_sel;
	t->int_status = s.int_status;
	t->config_gen = s.config_gen;
	t->driver_features = s.driver_features;
	for (unsigned q = 0; q < s.nr_queues && !ret; q++) {
		struct virtq *vq = &t->vqs[q];

		virtq_reset(vq);
		vq->desc_gpa = s.q[q].desc;
		vq->avail_gpa = s.q[q].avail;
		vq->used_gpa = s.q[q].used;
		vq->size = s.q[q].size;
		vq->event_idx = s.q[q].event_idx;
		vq->kick_when_empty = t->ops->kick_when_empty;
		/* Host views are remade, and checked, against this process's memory. */
		if (s.q[q].ready && virtq_enable(vq, &t->vm->mem))
			ret = -EINVAL;
		vq->last_avail = s.q[q].last_avail;
		vq->used_idx = s.q[q].used_idx;
		vq->signalled = s.q[q].signalled;
		vq->broken = s.q[q].broken;
	}
	if (!ret && (t->status & VIRTIO_CONFIG_S_DRIVER_OK) && t->ops->activate)
		ret = t->ops->activate(t->dev);
	if (!ret && t->ops->restore)
		ret = t->ops->restore(t->dev, (const uint8_t *)blob + sizeof(s), s.dev_len);
	/* Whatever the driver queued or waited for around the snapshot gets seen now. */
	for (unsigned q = 0; !ret && q < s.nr_queues; q++) {
		if (!t->vqs[q].ready || !(t->status & VIRTIO_CONFIG_S_DRIVER_OK))
			continue;
		if (t->ops->notify)
			t->ops->notify(t->dev, q);
		t->int_status |= VIRTIO_MMIO_INT_VRING;
	}
	/* One interrupt for anything in flight: a spurious one costs the driver a look. */
	t->raise_pending = !ret && (t->status & VIRTIO_CONFIG_S_DRIVER_OK);
	virtio_unlock(t);
	return ret;
}
