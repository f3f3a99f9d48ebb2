// SPDX-License-Identifier: MIT
/*
 * virtio-blk (virtio 1.x, 5.2) on a disk image (images/img): read, write,
 * flush, get id. Requests are served on the VM's event loop as the guest
 * kicks; the image library caches metadata and orders writes for crash
 * safety, and a guest flush reaches the disk through img_flush().
 */
#include "virtio/blk.h"

#include <errno.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_ids.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "virtio/virtio.h"

#define BLK_QUEUE_SIZE 256
#define SECTOR_SHIFT 9
/* Header and status take a descriptor each; the rest may carry data. */
#define BLK_SEG_MAX (VIRTQ_MAX_CHAIN - 2)
#define BLK_BOUNCE (1u << 20)

struct virtio_blk {
	struct virtio_mmio *t;
	struct img *img;
	char *path; /* for messages, also after the image is closed */
	bool readonly;
	char serial[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config config;
	struct virtq_chain chain;
	uint8_t *bounce; /* BLK_BOUNCE bytes */
	size_t bounce_len;
};

/*
 * Writes gathered in the bounce buffer go to the image as one call: a
 * guest's 4 KiB pages then land as whole clusters on a new layer, instead
 * of each page copying a cluster on write and the next ones patching it.
 */
static int blk_bounce_flush(struct virtio_blk *b, uint64_t *off)
{
	int ret;

	if (!b->bounce_len)
		return 0;
	ret = img_write(b->img, b->bounce, b->bounce_len, *off);
	*off += b->bounce_len;
	b->bounce_len = 0;
	return ret;
}

/* Copies between the image and the chain's data buffers: the writable ones
 * (IN) after none, or the readable ones (OUT) after the 16-byte header. */
static int blk_transfer(struct virtio_blk *b, const struct virtq_chain *c, bool in, uint64_t off,
                        uint64_t len)
{
	unsigned first = in ? c->nr_out : 0, end = in ? c->nr_out + c->nr_in : c->nr_out;
	uint64_t skip = in ? 0 : sizeof(struct virtio_blk_outhdr);
	int ret;

	b->bounce_len = 0;
	for (unsigned i = first; i < end && len; i++) {
		uint64_t n = c->buf[i].len;
		uint8_t *p = c->buf[i].addr;

		ret = 0;
		if (skip >= n) {
			skip -= n;
			continue;
		}
		p += skip;
		n -= skip;
		skip = 0;
		if (n > len)
			n = len;
		len -= n;
		if (in) {
			ret = img_read(b->img, p, n, off);
			off += n;
		} else {
			while (n) {
				uint64_t room = BLK_BOUNCE - b->bounce_len, k = n < room ? n : room;

				memcpy(b->bounce + b->bounce_len, p, k);
				b->bounce_len += k;
				p += k;
				n -= k;
				ret = b->bounce_len == BLK_BOUNCE ? blk_bounce_flush(b, &off) : 0;
				if (ret)
					return ret;
			}
		}
		if (ret)
			return ret;
	}
	return in ? 0 : blk_bounce_flush(b, &off);
}

/* Checks that [sector, sector + len) is whole sectors inside the disk. */
static bool blk_range_ok(const struct virtio_blk *b, uint64_t sector, uint64_t len)
{
	uint64_t cap = b->config.capacity;

	return (len & ((1u << SECTOR_SHIFT) - 1)) == 0 && sector <= cap &&
	       (len >> SECTOR_SHIFT) <= cap - sector;
}

/* Serves one request; returns its status and sets *used to bytes written to the guest. */
static uint8_t blk_request(struct virtio_blk *b, const struct virtq_chain *c, uint32_t *used)
{
	struct virtio_blk_outhdr hdr;
	uint64_t data_len, off;
	int ret = 0;

	*used = 1; /* the status byte */
	if (virtq_chain_read(c, 0, &hdr, sizeof(hdr)) != sizeof(hdr))
		return VIRTIO_BLK_S_IOERR;
	off = hdr.sector << SECTOR_SHIFT;
	switch (hdr.type) {
	case VIRTIO_BLK_T_IN:
		data_len = c->in_len - 1;
		if (!blk_range_ok(b, hdr.sector, data_len))
			return VIRTIO_BLK_S_IOERR;
		ret = blk_transfer(b, c, true, off, data_len);
		if (!ret)
			*used += (uint32_t)data_len;
		break;
	case VIRTIO_BLK_T_OUT:
		data_len = c->out_len - sizeof(hdr);
		if (b->readonly || !blk_range_ok(b, hdr.sector, data_len))
			return VIRTIO_BLK_S_IOERR;
		ret = blk_transfer(b, c, false, off, data_len);
		break;
	case VIRTIO_BLK_T_FLUSH:
		ret = b->readonly ? 0 : img_flush(b->img);
		break;
	case VIRTIO_BLK_T_GET_ID:
		*used += (uint32_t)virtq_chain_write(
			c, 0, b->serial,
			c->in_len - 1 < sizeof(b->serial) ? c->in_len - 1 : sizeof(b->serial));
		break;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
	if (ret) {
		log_guest(LOG_WARN, "virtio-blk %s: request type %u at sector %llu failed: %s",
		          b->path, hdr.type, (unsigned long long)hdr.sector, img_error(b->img));
		return VIRTIO_BLK_S_IOERR;
	}
	return VIRTIO_BLK_S_OK;
}

static void blk_notify(void *dev, unsigned q)
{
	struct virtio_blk *b = dev;
	struct virtq *vq = virtio_queue(b->t, q);
	struct virtq_chain *c = &b->chain;
	int ret, budget = VIRTQ_BUDGET;

	while (budget-- > 0 && (ret = virtq_pop(vq, virtio_mem(b->t), c)) != 0) {
		uint32_t used = 0;
		uint8_t status;

		if (ret < 0)
			continue;
		/* Without a writable byte there is nowhere to put a status. */
		if (c->in_len == 0) {
			log_guest(LOG_WARN, "virtio-blk: request without a status byte");
			virtq_push(vq, c->head, 0);
			continue;
		}
		status = blk_request(b, c, &used);
		if (status != VIRTIO_BLK_S_OK)
			used = 1;
		virtq_chain_write(c, c->in_len - 1, &status, 1);
		virtq_push(vq, c->head, used);
	}
	if (budget < 0 && virtq_has_work(vq))
		virtio_notify_again(b->t, q);
	virtio_signal(b->t, q);
}

static void blk_config_read(void *dev, uint32_t off, void *data, unsigned len)
{
	struct virtio_blk *b = dev;

	memcpy(data, (const uint8_t *)&b->config + off, len);
}

#define BLK_FEATURES ((1ULL << VIRTIO_BLK_F_SEG_MAX) | (1ULL << VIRTIO_BLK_F_FLUSH))

/*
 * A snapshot freezes the disk at the same instant as memory: everything the
 * guest wrote reaches the image file (metadata included) before the memory
 * is saved, so the VMM can end and a restored one find the same disk.
 */
static int blk_save(void *dev, void **blob, size_t *len)
{
	struct virtio_blk *b = dev;

	*blob = NULL;
	*len = 0;
	return b->readonly ? 0 : img_flush(b->img);
}

/* Two tables: the read-only bit is part of what the device offers. */
static const struct virtio_dev_ops blk_ops = {
	.name = "virtio-blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nr_queues = 1,
	.queue_max = BLK_QUEUE_SIZE,
	.features = BLK_FEATURES,
	.config_size = sizeof(struct virtio_blk_config),
	.config_read = blk_config_read,
	.notify = blk_notify,
	.save = blk_save,
};

static const struct virtio_dev_ops blk_ro_ops = {
	.name = "virtio-blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nr_queues = 1,
	.queue_max = BLK_QUEUE_SIZE,
	.features = BLK_FEATURES | (1ULL << VIRTIO_BLK_F_RO),
	.config_size = sizeof(struct virtio_blk_config),
	.config_read = blk_config_read,
	.notify = blk_notify,
	.save = blk_save,
};

struct virtio_blk *virtio_blk_create(struct vm *vm, const struct blk_spec *spec, struct img *img)
{
	struct virtio_blk *b = img ? calloc(1, sizeof(*b)) : NULL;
	const char *name = strrchr(spec->path, '/');
	const char *id;

	if (!b) {
		if (img)
			(void)img_close(img);
		return NULL;
	}
	b->img = img;
	/* A guest would only meet I/O errors: refused now, naming the image. */
	for (struct img *i = b->img; i; i = img_backing(i)) {
		if (!img_key_missing(i))
			continue;
		log_err("disk '%s': %s is encrypted and no key for it was given (--key-fd: "
		        "disk HEX PATH)",
		        spec->path, img_path(i));
		(void)img_close(b->img);
		free(b);
		return NULL;
	}
	b->readonly = spec->readonly;
	b->path = strdup(spec->path);
	b->bounce = malloc(BLK_BOUNCE);
	/* The serial is not NUL-terminated when it fills all 20 bytes (5.2.6). */
	id = spec->serial ? spec->serial : name ? name + 1 : spec->path;
	memcpy(b->serial, id, strnlen(id, sizeof(b->serial)));
	b->config.capacity = img_size(b->img) >> SECTOR_SHIFT;
	b->config.seg_max = BLK_SEG_MAX;
	b->t = virtio_mmio_create(vm, spec->readonly ? &blk_ro_ops : &blk_ops, b);
	if (!b->t || !b->path || !b->bounce) {
		virtio_mmio_destroy(b->t);
		(void)img_close(b->img);
		free(b->bounce);
		free(b->path);
		free(b);
		return NULL;
	}
	return b;
}

void virtio_blk_destroy(struct virtio_blk *b)
{
	int ret;

	if (!b)
		return;
	virtio_mmio_destroy(b->t);
	ret = img_close(b->img);
	if (ret)
		log_err("disk '%s': writing it out failed: %s", b->path, strerror(-ret));
	free(b->bounce);
	free(b->path);
	free(b);
}

int blk_spec_parse(char *arg, struct blk_spec *spec, char *err, size_t errlen)
{
	char *save = NULL, *opt;

	memset(spec, 0, sizeof(*spec));
	spec->path = strtok_r(arg, ",", &save);
	if (!spec->path || !*spec->path) {
		snprintf(err, errlen,
		         "--disk needs a file: PATH[,ro][,format=raw|qcow2][,serial=ID]");
		return -EINVAL;
	}
	while ((opt = strtok_r(NULL, ",", &save))) {
		if (!strcmp(opt, "ro")) {
			spec->readonly = true;
		} else if (!strcmp(opt, "format=raw")) {
			spec->format = IMG_FMT_RAW;
		} else if (!strcmp(opt, "format=qcow2")) {
			spec->format = IMG_FMT_QCOW2;
		} else if (!strncmp(opt, "serial=", 7) && strlen(opt + 7) <= VIRTIO_BLK_ID_BYTES) {
			spec->serial = opt + 7;
		} else {
			snprintf(err, errlen,
			         "--disk %s: unknown or bad option '%s' (known: ro, format=raw, "
			         "format=qcow2, serial=ID of up to %d characters)",
			         spec->path, opt, VIRTIO_BLK_ID_BYTES);
			return -EINVAL;
		}
	}
	return 0;
}
