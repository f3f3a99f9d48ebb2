// SPDX-License-Identifier: MIT
/* virtio-rng (virtio 1.x, 5.4): one queue of writable buffers to fill. */
#include "virtio/rng.h"

#include <linux/virtio_ids.h>
#include <stdlib.h>
#include <sys/random.h>

#include "log.h"
#include "virtio/virtio.h"

/* Per request: enough for any guest pool, small enough to bound one call. */
#define RNG_MAX_REQUEST 4096

struct virtio_rng {
	struct virtio_mmio *t;
	struct virtq_chain chain;
};

static void rng_notify(void *dev, unsigned q)
{
	struct virtio_rng *r = dev;
	struct virtq *vq = virtio_queue(r->t, q);
	uint8_t buf[RNG_MAX_REQUEST];
	int ret, budget = VIRTQ_BUDGET;

	while (budget-- > 0 && (ret = virtq_pop(vq, virtio_mem(r->t), &r->chain)) != 0) {
		size_t want = r->chain.in_len < sizeof(buf) ? r->chain.in_len : sizeof(buf);
		ssize_t got;

		if (ret < 0)
			continue;
		got = want ? getrandom(buf, want, 0) : 0;
		if (got < 0) {
			log_guest(LOG_WARN, "virtio-rng: getrandom failed");
			got = 0;
		}
		virtq_push(vq, r->chain.head,
		           (uint32_t)virtq_chain_write(&r->chain, 0, buf, (size_t)got));
	}
	if (budget < 0 && virtq_has_work(vq))
		virtio_notify_again(r->t, q);
	virtio_signal(r->t, q);
}

static const struct virtio_dev_ops rng_ops = {
	.name = "virtio-rng",
	.device_id = VIRTIO_ID_RNG,
	.nr_queues = 1,
	.queue_max = 64,
	.notify = rng_notify,
};

struct virtio_rng *virtio_rng_create(struct vm *vm)
{
	struct virtio_rng *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->t = virtio_mmio_create(vm, &rng_ops, r);
	if (!r->t) {
		free(r);
		return NULL;
	}
	return r;
}

void virtio_rng_destroy(struct virtio_rng *r)
{
	if (!r)
		return;
	virtio_mmio_destroy(r->t);
	free(r);
}
