// SPDX-License-Identifier: MIT
/*
 * Corrupt and unsupported images: each is refused with -EINVAL or -ENOTSUP
 * and a message, at open or at the access that meets the damage; nothing
 * crashes or allocates what the file cannot back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img_priv.h"
#include "test_img.h"
#include "unit.h"

#define CS (64 * KiB)
#define L1_OFF (3 * CS)
#define RB_OFF (2 * CS)

/* 4 MiB, 64 KiB clusters: L1 at 192K; data in clusters 0 and 5 under the L2 at 256K. */
static const char *good(const char *name)
{
	const char *p = timg_path(name);
	static uint8_t buf[CS];
	struct img *img;
	char err[256];

	if (timg_create(p, 4 * MiB, 0, NULL, IMG_FMT_AUTO) ||
	    img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)))
		return NULL;
	timg_fill(buf, sizeof(buf), 1);
	if (img_write(img, buf, sizeof(buf), 0) || img_write(img, buf, 100, 5 * CS + 7) ||
	    img_close(img))
		return NULL;
	return p;
}

struct patch {
	uint32_t off, width; /* width 4 or 8 */
	uint64_t v;
	int rc;
	const char *why; /* in the message */
};

static const struct patch header_patches[] = {
	{0, 4, 0x12345678, -EINVAL, "bad magic"},
	{4, 4, 2, -ENOTSUP, "compat=1.1"},
	{4, 4, 4, -ENOTSUP, "version 4"},
	{20, 4, 8, -EINVAL, "cluster_bits"},
	{20, 4, 22, -EINVAL, "cluster_bits"},
	{20, 4, 63, -EINVAL, "cluster_bits"},
	{100, 4, 96, -EINVAL, "header length"},
	{100, 4, 105, -EINVAL, "header length"},
	{32, 4, 1, -ENOTSUP, "encrypted"},
	{60, 4, 1, -ENOTSUP, "snapshot"},
	{72, 8, 1, -EINVAL, "qemu-img check -r all"},
	{72, 8, 2, -EINVAL, "corrupt"},
	{72, 8, 4, -ENOTSUP, "external data file"},
	{72, 8, 8, -ENOTSUP, "compression type"},
	{72, 8, 16, -ENOTSUP, "extended L2"},
	{72, 8, 1ull << 40, -ENOTSUP, "unknown incompatible"},
	{96, 4, 7, -EINVAL, "refcount_order"},
	{24, 8, 1ull << 51, -ENOTSUP, "1 PiB"},
	{24, 8, 1ull << 40, -EINVAL, "too small"},
	{36, 4, 0x7fffffff, -EINVAL, "over 32 MiB"},
	{36, 4, 1u << 20, -EINVAL, "past the end"},
	{40, 8, L1_OFF + 8, -EINVAL, "not a cluster"},
	{40, 8, 0, -EINVAL, "not a cluster"},
	{40, 8, 1ull << 40, -EINVAL, "past the end"},
	{48, 8, CS + 512, -EINVAL, "not a cluster"},
	{48, 8, 1ull << 40, -EINVAL, "past the end"},
	{56, 4, 0, -EINVAL, "refcount table"},
	{56, 4, 1u << 30, -EINVAL, "refcount table"},
	{8, 8, CS - 2, -EINVAL, "backing file name"},
	{16, 4, 2000, -EINVAL, "backing file name"},
	/* An extension whose length runs past the cluster. */
	{104, 8, 0xe2792acafffff000ull, -EINVAL, "runs past"},
	{104, 8, 0xe2792aca00000004ull, -ENOTSUP, "format"},
};

UNIT_TEST(img_open_refuses_bad_headers)
{
	for (size_t i = 0; i < sizeof(header_patches) / sizeof(header_patches[0]); i++) {
		const struct patch *t = &header_patches[i];
		const char *p = good("hdr.qcow2");
		struct img *img;
		char err[256] = "";

		CHECK(p != NULL);
		/* A backing name to point at, for the rows about it. */
		if (t->off == 8 || t->off == 16) {
			CHECK(timg_patch_be64(p, 8, 1024) == 0);
			CHECK(timg_patch_be32(p, 16, 4) == 0);
		}
		if (t->width == 4)
			CHECK(timg_patch_be32(p, t->off, (uint32_t)t->v) == 0);
		else
			CHECK(timg_patch_be64(p, t->off, t->v) == 0);
		for (unsigned ro = 0; ro <= 1; ro++) {
			int rc = img_open(&img, p, IMG_FMT_QCOW2, ro ? IMG_RDONLY : 0, err,
			                  sizeof(err));

			if (rc == 0)
				img_close(img);
			if (rc != t->rc || !strstr(err, t->why)) {
				fprintf(stderr, "patch %zu: rc %d, message: %s\n", i, rc, err);
				CHECK(!"refused as expected");
			}
		}
	}
}

UNIT_TEST(img_open_refuses_truncated_files)
{
	const char *p = good("trunc.qcow2");
	struct img *img;
	char err[256];

	CHECK(p != NULL);
	CHECK(truncate(p, 50) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(img_open(&img, p, IMG_FMT_AUTO, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(truncate(p, 0) == 0);
	CHECK(img_open(&img, p, IMG_FMT_AUTO, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	/* Cut before the L1 table. */
	p = good("trunc2.qcow2");
	CHECK(p && truncate(p, L1_OFF) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "L1 table"));
}

/* Damage in a table is met by the access that follows it. */
UNIT_TEST(img_bad_table_entries_fail_the_access)
{
	static const struct {
		int l2; /* 0: patch L1 entry 0; 1: patch L2 entry 0 */
		uint64_t v;
		int rc;
	} rows[] = {
		{0, 4 * CS | QCOW_OFLAG_COPIED | 1, -EINVAL},     /* reserved bit */
		{0, (4 * CS + 512) | QCOW_OFLAG_COPIED, -EINVAL}, /* L2 misaligned */
		{0, (1ull << 40) | QCOW_OFLAG_COPIED, -EINVAL},   /* L2 past the end */
		{1, (1ull << 40) | QCOW_OFLAG_COPIED, -EINVAL},   /* data past the end */
		{1, (5 * CS + 512) | QCOW_OFLAG_COPIED, -EINVAL}, /* data misaligned */
		{1, 5 * CS | (1ull << 56), -EINVAL},              /* reserved bit */
		{1, QCOW_OFLAG_COPIED, -EINVAL},                  /* host offset 0 in use */
		{1, QCOW_OFLAG_COMPRESSED | 5 * CS, -ENOTSUP},    /* compressed */
	};
	uint8_t buf[4096];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *p = good("tables.qcow2");
		uint64_t l2;
		struct img *img;
		char err[256];

		CHECK(p != NULL);
		l2 = timg_get_be64(p, L1_OFF) & QCOW_OFFSET_MASK;
		CHECK(l2 == 4 * CS);
		CHECK(timg_patch_be64(p, rows[i].l2 ? l2 : L1_OFF, rows[i].v) == 0);
		CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
		CHECK(img_read(img, buf, sizeof(buf), 100) == rows[i].rc);
		CHECK(img_error(img)[0] != '\0');
		CHECK(img_write(img, buf, sizeof(buf), 100) == rows[i].rc);
		if (rows[i].rc == -EINVAL)
			CHECK(timg_check(img) >= 1000);
		img_close(img);
	}
}

UNIT_TEST(img_data_never_overwrites_metadata)
{
	const char *p = good("overlap.qcow2");
	uint8_t buf[512] = {0xee};
	struct img *img;
	char err[256];

	CHECK(p != NULL);
	/* Guest cluster 0 claims to live on the L1 table. */
	CHECK(timg_patch_be64(p, 4 * CS, L1_OFF | QCOW_OFLAG_COPIED) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_write(img, buf, sizeof(buf), 0) == -EINVAL);
	CHECK(strstr(img_error(img), "overlaps"));
	img_close(img);
	CHECK((timg_get_be64(p, L1_OFF) & QCOW_OFFSET_MASK) == 4 * CS);
}

UNIT_TEST(img_check_finds_refcount_damage)
{
	const char *p = good("refs.qcow2");
	struct img_check_result r;
	struct img *img;
	uint8_t zero[2] = {0, 0}, one[2] = {0, 1};
	char err[256];
	uint64_t data;

	CHECK(p != NULL);
	data = timg_get_be64(p, 4 * CS) & QCOW_OFFSET_MASK;
	CHECK(data >= 5 * CS);
	/* The data cluster counted 0: corruption. A free cluster counted 1: a leak. */
	CHECK(timg_patch(p, RB_OFF + 2 * (data / CS), zero, 2) == 0);
	CHECK(truncate(p, 8 * CS) == 0);
	CHECK(timg_patch(p, RB_OFF + 2 * 7, one, 2) == 0);
	/* Past the end of the file a count wastes nothing: not a leak (as qemu-img sees it). */
	CHECK(timg_patch(p, RB_OFF + 2 * 1000, one, 2) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_check(img, &r, NULL, NULL, err, sizeof(err)) == 0);
	/* Refcount 0 under a COPIED entry is a second error. */
	CHECK(r.corruptions == 2 && r.leaks == 1);
	img_close(img);

	p = good("copied.qcow2");
	CHECK(p != NULL);
	data = timg_get_be64(p, 4 * CS);
	CHECK(timg_patch_be64(p, 4 * CS, data & ~QCOW_OFLAG_COPIED) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_check(img, &r, NULL, NULL, err, sizeof(err)) == 0);
	CHECK(r.corruptions == 1 && r.leaks == 0);
	img_close(img);
}

UNIT_TEST(img_backing_loops_and_depth)
{
	const char *a = timg_path("loop-a.qcow2"), *b = timg_path("loop-b.qcow2");
	const char *c = timg_path("loop-c.qcow2");
	struct img *img;
	char err[256];

	CHECK(timg_create(b, 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(timg_create(a, 0, 0, "loop-b.qcow2", IMG_FMT_QCOW2) == 0);
	/* The library refuses to make a loop... */
	CHECK(img_open(&img, b, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_rebase(img, "loop-a.qcow2", IMG_FMT_QCOW2, 1, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "loop"));
	/* ...and refuses to open one made behind its back. */
	CHECK(qcow_set_backing(img, "loop-a.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, a, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "loop"));
	CHECK(img_open(&img, b, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);

	CHECK(timg_create(c, 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, c, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(qcow_set_backing(img, "loop-c.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, c, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);

	/* A missing backing file names itself. */
	CHECK(unlink(b) == 0);
	CHECK(img_open(&img, a, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -ENOENT);
	CHECK(strstr(err, "backing file") && strstr(err, "loop-b.qcow2"));
}

UNIT_TEST(img_backing_chain_depth_limit)
{
	char name[32], prev[32], top[512];
	struct img *img;
	char err[256];

	snprintf(prev, sizeof(prev), "d0.qcow2");
	CHECK(timg_create(timg_path(prev), 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	for (int i = 1; i <= 17; i++) {
		snprintf(name, sizeof(name), "d%d.qcow2", i);
		snprintf(top, sizeof(top), "%s", timg_path(name));
		CHECK(timg_create(top, 0, 0, prev, IMG_FMT_QCOW2) == 0);
		memcpy(prev, name, sizeof(prev));
		if (i == 16) {
			CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) ==
			      0);
			CHECK(img_close(img) == 0);
		}
	}
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "deeper"));
}

/* Random bytes over the metadata: whatever opens must read, check and close cleanly. */
UNIT_TEST(img_random_metadata_damage)
{
	const char *src = good("rnd-src.qcow2");
	static uint8_t orig[7 * CS], buf[64 * 1024], wrote[3000];
	struct img_check_result r;
	uint64_t x = 42;
	int fd;

	CHECK(src != NULL);
	fd = open(src, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, orig, sizeof(orig), 0) == (ssize_t)sizeof(orig));
	close(fd);
	for (int i = 0; i < 300; i++) {
		const char *p = timg_path("rnd.qcow2");
		struct img *img;
		char err[256];

		fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		CHECK(fd >= 0 && write(fd, orig, sizeof(orig)) == (ssize_t)sizeof(orig));
		for (int k = 0; k < 1 + i % 8; k++) {
			uint8_t v;
			uint64_t at;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* Header, refcount table and block, L1, L2: where it hurts. */
			at = (x >> 8) % 5 * CS + (x >> 24) % (i % 2 ? 128 : 4096);
			v = (uint8_t)x;
			CHECK(pwrite(fd, &v, 1, (off_t)at) == 1);
		}
		close(fd);
		if (img_open(&img, p, IMG_FMT_QCOW2, i % 3 ? IMG_RDONLY : 0, err, sizeof(err)))
			continue;
		for (uint64_t off = 0; off < img_size(img) && off < 64 * MiB; off += sizeof(buf)) {
			int rc = img_read(img, buf, sizeof(buf), off);

			CHECK(rc == 0 || rc == -EINVAL || rc == -ENOTSUP);
		}
		/* What a write that succeeded wrote reads back. */
		timg_fill(wrote, sizeof(wrote), (uint64_t)i);
		if (!(i % 3) && img_size(img) > 4000 && img_write(img, wrote, 3000, 1000) == 0)
			CHECK(img_read(img, buf, 3000, 1000) == 0 && !memcmp(buf, wrote, 3000));
		if (img_check(img, &r, NULL, NULL, err, sizeof(err)) == 0)
			CHECK(r.corruptions < 1u << 30);
		img_close(img);
	}
}

/* Autoclear features we do not maintain (bitmaps) are dropped before our first write. */
UNIT_TEST(img_autoclear_bits_cleared_on_write_open)
{
	const char *p = good("autoclear.qcow2");
	struct img *img;
	char err[256];

	CHECK(p != NULL);
	CHECK(timg_patch_be64(p, QCOW_HDR_AUTOCLEAR, 3) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_close(img) == 0);
	CHECK(timg_get_be64(p, QCOW_HDR_AUTOCLEAR) == 3);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(timg_get_be64(p, QCOW_HDR_AUTOCLEAR) == 0);
	CHECK(img_close(img) == 0);
}
