// SPDX-License-Identifier: MIT
/* Backing chains, zero clusters, commit, rebase and convert. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img_priv.h"
#include "test_img.h"
#include "unit.h"

/* A qcow2 image of size bytes, its first len filled with seed's bytes. */
static int make_filled(const char *path, uint64_t size, uint64_t len, uint64_t seed,
                       const char *backing, enum img_format bfmt)
{
	struct img *img;
	uint8_t *buf = malloc(len ? len : 1);
	char err[256];
	int rc = timg_create(path, size, 0, backing, bfmt);

	if (!rc)
		rc = img_open(&img, path, IMG_FMT_QCOW2, 0, err, sizeof(err));
	if (!rc) {
		timg_fill(buf, len, seed);
		rc = len ? img_write(img, buf, len, 0) : 0;
		if (img_close(img) && !rc)
			rc = -EIO;
	}
	free(buf);
	return rc;
}

static int make_raw(const char *path, uint64_t size, uint64_t seed)
{
	uint8_t *buf = malloc(size);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644), rc = 0;

	if (fd < 0 || !buf) {
		free(buf);
		return -EIO;
	}
	timg_fill(buf, size, seed);
	if (write(fd, buf, size) != (ssize_t)size)
		rc = -EIO;
	close(fd);
	free(buf);
	return rc;
}

/* Everything img reads, in a new buffer. */
static uint8_t *read_all(struct img *img)
{
	uint8_t *buf = malloc(img_size(img));

	if (buf && img_read(img, buf, img_size(img), 0)) {
		free(buf);
		return NULL;
	}
	return buf;
}

UNIT_TEST(img_backing_reads_and_partial_cow)
{
	const char *base = timg_path("base.qcow2"), *top = timg_path("top.qcow2");
	static uint8_t want[4 * 1024 * 1024], got[sizeof(want)], patch[100];
	struct img *img, *b;
	char err[256];
	uint64_t run;

	CHECK(make_filled(base, sizeof(want), sizeof(want), 1, NULL, IMG_FMT_AUTO) == 0);
	/* Stored relative: found beside top, whatever the working directory. */
	CHECK(timg_create(top, 0, 0, "base.qcow2", IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_size(img) == sizeof(want));
	CHECK(img_backing(img) && !strcmp(img_backing_name(img), "base.qcow2"));
	CHECK(img_backing_format(img) == IMG_FMT_QCOW2);
	timg_fill(want, sizeof(want), 1);
	CHECK(img_read(img, got, sizeof(got), 0) == 0 && !memcmp(want, got, sizeof(want)));
	timg_fill(patch, sizeof(patch), 2);
	CHECK(img_write(img, patch, sizeof(patch), 70000) == 0);
	memcpy(want + 70000, patch, sizeof(patch));
	CHECK(img_read(img, got, sizeof(got), 0) == 0 && !memcmp(want, got, sizeof(want)));
	CHECK(img_map(img, 0, &run) == 0 && run == 64 * KiB);
	CHECK(img_map(img, 64 * KiB, &run) == 1 && run == 64 * KiB);
	CHECK(img_map(img, 128 * KiB, &run) == 0 && run == sizeof(want) - 128 * KiB);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
	/* The base never changed. */
	CHECK(img_open(&b, base, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	timg_fill(want, sizeof(want), 1);
	CHECK(img_read(b, got, sizeof(got), 0) == 0 && !memcmp(want, got, sizeof(want)));
	CHECK(timg_check(b) == 0);
	CHECK(img_close(b) == 0);
}

UNIT_TEST(img_chain_of_three_with_smaller_raw_base)
{
	const char *base = timg_path("b.raw"), *mid = timg_path("mid.qcow2");
	const char *top = timg_path("top3.qcow2");
	static uint8_t want[4 * 1024 * 1024], got[sizeof(want)], part[64 * 1024];
	struct img *img;
	char err[256];

	CHECK(make_raw(base, 1 * MiB, 3) == 0);
	CHECK(timg_create(mid, 4 * MiB, 0, base, IMG_FMT_RAW) == 0);
	CHECK(img_open(&img, mid, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(part, sizeof(part), 4);
	CHECK(img_write(img, part, sizeof(part), 512 * KiB) == 0);
	CHECK(img_close(img) == 0);
	CHECK(timg_create(top, 0, 0, "mid.qcow2", IMG_FMT_QCOW2) == 0);

	memset(want, 0, sizeof(want));
	timg_fill(want, 1 * MiB, 3);
	memcpy(want + 512 * KiB, part, sizeof(part));
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_size(img) == 4 * MiB);
	CHECK(img_format(img_backing(img_backing(img))) == IMG_FMT_RAW);
	CHECK(img_read(img, got, sizeof(got), 0) == 0 && !memcmp(want, got, sizeof(want)));
	/* Across the end of the smaller base. */
	timg_fill(part, 200, 5);
	CHECK(img_write(img, part, 200, 1 * MiB - 100) == 0);
	memcpy(want + 1 * MiB - 100, part, 200);
	CHECK(img_read(img, got, sizeof(got), 0) == 0 && !memcmp(want, got, sizeof(want)));
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_backing_raw_needs_recorded_format)
{
	const char *base = timg_path("r.raw"), *top = timg_path("rtop.qcow2");
	struct img *img;
	char err[256];

	CHECK(make_raw(base, 64 * KiB, 6) == 0);
	/* No format given: a raw backing file is not guessed. */
	CHECK(timg_create(top, 0, 0, "r.raw", IMG_FMT_AUTO) == -EINVAL);
	CHECK(timg_create(top, 0, 0, "r.raw", IMG_FMT_RAW) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_close(img) == 0);
	/* Hide the backing format extension (unknown types are skipped). */
	CHECK(timg_get_be64(top, QCOW_HDR_V3_LEN) >> 32 == QCOW_EXT_BACKING_FMT);
	CHECK(timg_patch_be32(top, QCOW_HDR_V3_LEN, 0x12345678) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "-F raw"));
}

UNIT_TEST(img_zero_flag_clusters)
{
	const char *base = timg_path("zbase.qcow2"), *top = timg_path("ztop.qcow2");
	static uint8_t buf[64 * 1024], got[sizeof(buf)];
	uint64_t l2, run;
	struct img *img;
	char err[256];

	CHECK(make_filled(base, 1 * MiB, 1 * MiB, 7, NULL, IMG_FMT_AUTO) == 0);
	CHECK(timg_create(top, 0, 0, "zbase.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(buf, sizeof(buf), 8);
	CHECK(img_write(img, buf, sizeof(buf), 2 * 64 * KiB) == 0);
	CHECK(img_close(img) == 0);
	/* Cluster 2: zero with its old cluster kept (as qemu-io write -z leaves it); 3: zero. */
	l2 = timg_get_be64(top, timg_get_be64(top, 40)) & QCOW_OFFSET_MASK;
	CHECK(l2 != 0);
	CHECK(timg_patch_be64(top, l2 + 16, timg_get_be64(top, l2 + 16) | QCOW_OFLAG_ZERO) == 0);
	CHECK(timg_patch_be64(top, l2 + 24, QCOW_OFLAG_ZERO) == 0);

	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	memset(buf, 0, sizeof(buf));
	for (int c = 2; c <= 3; c++)
		CHECK(img_read(img, got, sizeof(got), c * 64 * KiB) == 0 &&
		      !memcmp(buf, got, sizeof(buf)));
	CHECK(img_map(img, 2 * 64 * KiB, &run) == 2 && run == 128 * KiB);
	timg_fill(buf + 100, 10, 9);
	CHECK(img_write(img, buf + 100, 10, 2 * 64 * KiB + 100) == 0);
	CHECK(img_write(img, buf + 100, 10, 3 * 64 * KiB + 100) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	for (int c = 2; c <= 3; c++)
		CHECK(img_read(img, got, sizeof(got), c * 64 * KiB) == 0 &&
		      !memcmp(buf, got, sizeof(buf)));
	/* The replaced cluster was freed: no leak. */
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_commit_into_backing)
{
	const char *base = timg_path("cbase.qcow2"), *top = timg_path("ctop.qcow2");
	static uint8_t part[300 * 1024];
	uint8_t *want, *got;
	struct img *img, *b;
	char err[256];

	CHECK(make_filled(base, 2 * MiB, 2 * MiB, 10, NULL, IMG_FMT_AUTO) == 0);
	CHECK(timg_create(top, 0, 0, "cbase.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(part, sizeof(part), 11);
	CHECK(img_write(img, part, sizeof(part), 100 * KiB + 3) == 0);
	want = read_all(img);
	CHECK(want != NULL);
	/* Not while another opener reads the base; the layer keeps working. */
	CHECK(img_open(&b, base, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_commit(img, err, sizeof(err)) == -EBUSY);
	CHECK(strstr(err, "in use"));
	CHECK(img_close(b) == 0);
	got = read_all(img);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	CHECK(img_commit(img, err, sizeof(err)) == 0);
	/* The layer still works, over the new base. */
	got = read_all(img);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	CHECK(img_write(img, part, 1000, 0) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&b, base, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	got = read_all(b);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	CHECK(timg_check(b) == 0);
	CHECK(img_commit(b, err, sizeof(err)) == -EINVAL);
	CHECK(img_close(b) == 0);
	free(want);
	free(got);
}

UNIT_TEST(img_rebase_safe_unsafe_and_none)
{
	const char *b1 = timg_path("b1.qcow2"), *b2 = timg_path("b2.qcow2");
	const char *top = timg_path("rbtop.qcow2");
	uint8_t part[10000], *want, *got;
	struct img *img;
	char err[256];

	CHECK(make_filled(b1, 2 * MiB, 2 * MiB, 12, NULL, IMG_FMT_AUTO) == 0);
	CHECK(make_filled(b2, 2 * MiB, 1 * MiB, 13, NULL, IMG_FMT_AUTO) == 0);
	CHECK(timg_create(top, 0, 0, "b1.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(part, sizeof(part), 14);
	CHECK(img_write(img, part, sizeof(part), 5) == 0);
	want = read_all(img);
	CHECK(want != NULL);
	CHECK(img_rebase(img, "b2.qcow2", IMG_FMT_AUTO, 0, err, sizeof(err)) == 0);
	CHECK(!strcmp(img_backing_name(img), "b2.qcow2"));
	got = read_all(img);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	/* Onto itself: a loop. */
	CHECK(img_rebase(img, "rbtop.qcow2", IMG_FMT_QCOW2, 1, err, sizeof(err)) == -EINVAL);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);

	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(!strcmp(img_backing_name(img), "b2.qcow2"));
	got = read_all(img);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	CHECK(img_rebase(img, "", IMG_FMT_AUTO, 0, err, sizeof(err)) == 0);
	CHECK(img_backing(img) == NULL && img_backing_name(img) == NULL);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_backing(img) == NULL);
	got = read_all(img);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_rebase(img, "", IMG_FMT_AUTO, 0, err, sizeof(err)) == -EROFS);
	CHECK(img_close(img) == 0);

	/* Unsafe: only the header changes, so what the layer leaves to its backing does too. */
	top = timg_path("rbtop2.qcow2");
	CHECK(timg_create(top, 0, 0, "b1.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_rebase(img, "b2.qcow2", IMG_FMT_QCOW2, 1, err, sizeof(err)) == 0);
	got = read_all(img);
	timg_fill(want, 1 * MiB, 13);
	memset(want + 1 * MiB, 0, 1 * MiB);
	CHECK(got && !memcmp(want, got, 2 * MiB));
	free(got);
	CHECK(img_close(img) == 0);
	free(want);
}

UNIT_TEST(img_convert_roundtrip)
{
	const char *src = timg_path("src.raw"), *q = timg_path("conv.qcow2");
	const char *back = timg_path("back.raw");
	struct img_check_result r;
	struct img *in, *out;
	uint8_t *want, *got;
	struct stat st;
	char err[256];

	CHECK(make_raw(src, 3 * MiB, 15) == 0);
	CHECK(img_open(&in, src, IMG_FMT_RAW, 0, err, sizeof(err)) == 0);
	want = calloc(1, 3 * MiB);
	CHECK(want != NULL);
	/* Zeros in [1M, 2M) and one zero cluster at 2M + 64K. */
	timg_fill(want, 3 * MiB, 15);
	memset(want + 1 * MiB, 0, 1 * MiB);
	memset(want + 2 * MiB + 64 * KiB, 0, 64 * KiB);
	CHECK(img_write(in, want, 3 * MiB, 0) == 0);
	CHECK(img_convert(in, q, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_close(in) == 0);
	CHECK(img_open(&out, q, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_check(out, &r, NULL, NULL, err, sizeof(err)) == 0);
	CHECK(r.corruptions == 0 && r.leaks == 0 && r.data_clusters == 31);
	got = read_all(out);
	CHECK(got && !memcmp(want, got, 3 * MiB));
	free(got);
	/* Back to raw, over an existing file: sparse where zero. */
	CHECK(make_raw(back, 4096, 1) == 0);
	CHECK(img_convert(out, back, IMG_FMT_RAW, 0, err, sizeof(err)) == 0);
	CHECK(img_close(out) == 0);
	CHECK(stat(back, &st) == 0 && (uint64_t)st.st_size == 3 * MiB &&
	      (uint64_t)st.st_blocks * 512 < 3 * MiB);
	CHECK(img_open(&in, back, IMG_FMT_RAW, IMG_RDONLY, err, sizeof(err)) == 0);
	got = read_all(in);
	CHECK(got && !memcmp(want, got, 3 * MiB));
	free(got);
	/* And to small clusters. */
	CHECK(img_convert(in, q, IMG_FMT_QCOW2, 12, err, sizeof(err)) == 0);
	CHECK(img_close(in) == 0);
	CHECK(img_open(&out, q, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_cluster_size(out) == 4096);
	got = read_all(out);
	CHECK(got && !memcmp(want, got, 3 * MiB));
	CHECK(timg_check(out) == 0);
	CHECK(img_close(out) == 0);
	free(got);
	free(want);
}

/* A backing file moved away: the image opens alone, and an unsafe rebase points it there. */
UNIT_TEST(img_moved_backing_file)
{
	const char *base = timg_path("mb-base.qcow2"), *top = timg_path("mb-top.qcow2");
	const char *moved = timg_path("mb-moved.qcow2");
	static uint8_t want[1024 * 1024];
	uint8_t part[5000], *got;
	struct img *img;
	char err[256];

	CHECK(make_filled(base, sizeof(want), sizeof(want), 20, NULL, IMG_FMT_AUTO) == 0);
	CHECK(timg_create(top, 0, 0, "mb-base.qcow2", IMG_FMT_QCOW2) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(part, sizeof(part), 21);
	CHECK(img_write(img, part, sizeof(part), 300) == 0);
	CHECK(img_close(img) == 0);
	timg_fill(want, sizeof(want), 20);
	memcpy(want + 300, part, sizeof(part));
	CHECK(rename(base, moved) == 0);

	CHECK(img_open(&img, top, IMG_FMT_QCOW2, 0, err, sizeof(err)) == -ENOENT);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_NOBACKING, err, sizeof(err)) == 0);
	CHECK(img_backing(img) == NULL && !strcmp(img_backing_name(img), "mb-base.qcow2"));
	CHECK(img_read(img, part, 1000, 1000) == 0 && !memcmp(part, want + 1000, 1000));
	CHECK(img_read(img, part, 1000, 100000) == -EIO);
	CHECK(img_rebase(img, "mb-moved.qcow2", IMG_FMT_QCOW2, 0, err, sizeof(err)) == -EINVAL);
	CHECK(img_rebase(img, "mb-moved.qcow2", IMG_FMT_QCOW2, 1, err, sizeof(err)) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, top, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	got = read_all(img);
	CHECK(got && !memcmp(want, got, sizeof(want)));
	free(got);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}
