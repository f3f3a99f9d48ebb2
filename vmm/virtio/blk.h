/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_BLK_H
#define HUSK_VIRTIO_BLK_H

#include <stdbool.h>

#include "img.h"

struct vm;
struct virtio_blk;

struct blk_spec {
	const char *path;
	enum img_format format; /* IMG_FMT_AUTO: must be a qcow2 image */
	bool readonly;
	const char *serial; /* what VIRTIO_BLK_T_GET_ID answers (20 bytes at most); NULL: the file
	                       name */
	const struct img_secrets *secrets; /* keys of its encrypted images, or NULL */
};

/*
 * Parses a --disk argument: PATH[,ro][,format=raw|qcow2][,serial=ID].
 * Returns 0, or -EINVAL with a message in err naming the bad part.
 */
int blk_spec_parse(char *arg, struct blk_spec *spec, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * A virtio block device on the image spec names (opened with its backing
 * chain; the chain is read-only, so a base is never written). NULL and
 * logged on failure: a missing file, a refused format, a bad header.
 */
struct virtio_blk *virtio_blk_create(struct vm *vm, const struct blk_spec *spec);

/* Flushes the image and closes it. */
void virtio_blk_destroy(struct virtio_blk *b);

#endif
