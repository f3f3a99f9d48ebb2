/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_BLK_H
#define HUSK_VIRTIO_BLK_H

#include <pthread.h>
#include <stdbool.h>

#include "img.h"

/* Each device takes one of the few ISA interrupt lines (vm_claim_device_slot). */
#define BLK_MAX_DISKS 6

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
 * The images of a VMM's disks, each opened with its backing chain (read-only,
 * so a base is never written) on a thread of their own (blk_images.c), while
 * the main thread makes the VM.
 */
struct blk_images {
	const struct blk_spec *specs;
	unsigned n;
	struct img *img[BLK_MAX_DISKS]; /* NULL once taken */
	int ret;                        /* the first failure, -errno */
	unsigned failed;                /* whose */
	char err[512];
	pthread_t thread;
	bool running;
	bool said; /* the failure was logged */
};
/* Starts opening specs[0..n) (at most BLK_MAX_DISKS). 0 or -errno, logged. */
int blk_images_start(struct blk_images *bi, const struct blk_spec *specs, unsigned n)
	__attribute__((warn_unused_result));
/*
 * The open image of disk i, once the thread is done, now the caller's; NULL
 * if it was taken, or if an image failed to open (a missing file, a refused
 * format, a bad header, a wrong key: logged once).
 */
struct img *blk_images_take(struct blk_images *bi, unsigned i);
/* Waits for the thread and closes the images nothing took. */
void blk_images_close(struct blk_images *bi);

/*
 * A virtio block device on img, the image spec names, opened
 * (blk_images_take): the device owns it from here, on failure too. NULL
 * and logged on failure (an encrypted image in its chain without a key).
 */
struct virtio_blk *virtio_blk_create(struct vm *vm, const struct blk_spec *spec, struct img *img);

/* Flushes the image and closes it. */
void virtio_blk_destroy(struct virtio_blk *b);

#endif
