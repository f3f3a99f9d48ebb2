/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_IMG_H
#define HUSK_TEST_IMG_H

/* Helpers for the image library's unit tests: files in one temporary directory. */
#include <stddef.h>
#include <stdint.h>

#include "img.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* $TMPDIR/husk-img-unit-XXXXXX/name, made fresh (an old file of that name is removed). */
const char *timg_path(const char *name);

/* A new qcow2 image; 0 or -errno. */
int timg_create(const char *path, uint64_t size, unsigned cluster_bits, const char *backing,
                enum img_format backing_fmt);

/* Overwrites bytes of a file; 0 or -errno. */
int timg_patch(const char *path, uint64_t off, const void *data, size_t len);
int timg_patch_be32(const char *path, uint64_t off, uint32_t v);
int timg_patch_be64(const char *path, uint64_t off, uint64_t v);
uint64_t timg_get_be64(const char *path, uint64_t off);

/* Deterministic bytes from seed. */
void timg_fill(uint8_t *buf, size_t len, uint64_t seed);

/* Runs img_check; returns corruptions * 1000 + leaks, or -1 if it could not run. */
long timg_check(struct img *img);

#endif
