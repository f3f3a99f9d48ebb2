// SPDX-License-Identifier: MIT
/*
 * A VMM's disk images, opened on a thread of their own (blk.h). Opening one
 * walks its backing chain, reads each header and table and, for an
 * encrypted image, derives its key: nothing of KVM's is needed, so it runs
 * while the main thread makes the VM and its vCPUs (nested, each side takes
 * 10 to 50 ms of a start). The thread opens what the main thread would
 * have opened, as it would have, and ends before the guest runs and before
 * any thread confines itself.
 */
#include "virtio/blk.h"

#include <errno.h>
#include <string.h>

#include "log.h"

static void *opener(void *arg)
{
	struct blk_images *bi = arg;

	pthread_setname_np(pthread_self(), "disks");
	for (unsigned i = 0; i < bi->n && !bi->ret; i++) {
		const struct blk_spec *s = &bi->specs[i];

		bi->ret = img_open_secrets(&bi->img[i], s->path, s->format,
		                           s->readonly ? IMG_RDONLY : 0, s->secrets, bi->err,
		                           sizeof(bi->err));
		bi->failed = i;
	}
	return NULL;
}

int blk_images_start(struct blk_images *bi, const struct blk_spec *specs, unsigned n)
{
	int ret;

	*bi = (struct blk_images){.specs = specs};
	if (n > BLK_MAX_DISKS)
		return -EINVAL;
	bi->n = n;
	if (!n)
		return 0;
	ret = pthread_create(&bi->thread, NULL, opener, bi);
	if (ret) {
		log_err("cannot start opening the disks: %s", strerror(ret));
		return -ret;
	}
	bi->running = true;
	return 0;
}

static void join(struct blk_images *bi)
{
	if (bi->running)
		pthread_join(bi->thread, NULL);
	bi->running = false;
}

struct img *blk_images_take(struct blk_images *bi, unsigned i)
{
	struct img *img;

	join(bi);
	if (bi->ret && !bi->said)
		log_err("disk '%s': %s", bi->specs[bi->failed].path,
		        bi->err[0] ? bi->err : strerror(-bi->ret));
	bi->said = bi->ret != 0;
	if (bi->ret)
		return NULL;
	img = i < bi->n ? bi->img[i] : NULL;
	if (img)
		bi->img[i] = NULL;
	return img;
}

void blk_images_close(struct blk_images *bi)
{
	join(bi);
	/* Opened but never a device's (a later step failed): nothing was written to them. */
	for (unsigned i = 0; i < bi->n; i++)
		if (bi->img[i])
			(void)img_close(bi->img[i]);
	bi->n = 0;
}
