// SPDX-License-Identifier: MIT
/* The image library on its own: create, allocate, read back, bounds, raw, write errors. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img_priv.h"
#include "test_img.h"
#include "unit.h"

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

UNIT_TEST(img_create_opens_empty)
{
	const char *p = timg_path("empty.qcow2");
	static uint8_t buf[8192];
	struct img *img;
	char err[256];
	uint64_t run;

	CHECK(timg_create(p, 1 * GiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_AUTO, 0, err, sizeof(err)) == 0);
	CHECK(img_size(img) == 1 * GiB);
	CHECK(img_format(img) == IMG_FMT_QCOW2);
	CHECK(img_cluster_size(img) == 64 * KiB);
	CHECK(img_backing(img) == NULL && img_backing_name(img) == NULL);
	memset(buf, 0xff, sizeof(buf));
	CHECK(img_read(img, buf, sizeof(buf), 1 * GiB - sizeof(buf)) == 0);
	CHECK(all_zero(buf, sizeof(buf)));
	CHECK(img_map(img, 0, &run) == 0 && run == 1 * GiB);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_create_refuses_bad_requests)
{
	const char *p = timg_path("refused.qcow2"), *q = timg_path("exists.qcow2");
	struct img_create_opts o = {.size = 1 * MiB};
	char err[256];

	CHECK(timg_create(p, 1000, 0, NULL, IMG_FMT_AUTO) == -EINVAL);
	CHECK(timg_create(p, IMG_MAX_SIZE + 512, 0, NULL, IMG_FMT_AUTO) == -EINVAL);
	CHECK(timg_create(p, 1 * MiB, 8, NULL, IMG_FMT_AUTO) == -EINVAL);
	CHECK(timg_create(p, 1 * MiB, 22, NULL, IMG_FMT_AUTO) == -EINVAL);
	/* 1 PiB of 512-byte clusters needs an L1 table far over 32 MiB. */
	CHECK(img_create(p, &(struct img_create_opts){.size = IMG_MAX_SIZE, .cluster_bits = 9}, err,
	                 sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "larger clusters"));
	CHECK(timg_create(p, 1 * MiB, 0, "no-such-base.qcow2", IMG_FMT_AUTO) == -ENOENT);
	CHECK(access(p, F_OK) != 0);
	CHECK(timg_create(q, 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_create(q, &o, err, sizeof(err)) == -EEXIST);
	CHECK(strstr(err, "already exists"));
}

UNIT_TEST(img_read_after_write)
{
	const char *p = timg_path("raw-after-write.qcow2");
	static uint8_t a[200 * 1024], b[sizeof(a)];
	struct img *img;
	char err[256];

	CHECK(timg_create(p, 1 * GiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(a, sizeof(a), 1);
	/* One whole cluster, a run across four clusters at an odd offset, the last byte. */
	CHECK(img_write(img, a, 64 * KiB, 0) == 0);
	CHECK(img_write(img, a, sizeof(a), 1 * MiB + 17) == 0);
	CHECK(img_write(img, a, 1, 1 * GiB - 1) == 0);
	CHECK(img_read(img, b, 64 * KiB, 0) == 0 && !memcmp(a, b, 64 * KiB));
	CHECK(img_read(img, b, sizeof(b), 1 * MiB + 17) == 0 && !memcmp(a, b, sizeof(a)));
	/* Around the written bytes, the clusters read as zeros. */
	CHECK(img_read(img, b, 17, 1 * MiB) == 0 && all_zero(b, 17));
	CHECK(img_read(img, b, 100, 1 * MiB + 17 + sizeof(a)) == 0 && all_zero(b, 100));
	CHECK(img_read(img, b, 2, 1 * GiB - 2) == 0 && b[0] == 0 && b[1] == a[0]);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);

	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_read(img, b, sizeof(b), 1 * MiB + 17) == 0 && !memcmp(a, b, sizeof(a)));
	CHECK(img_read(img, b, 64 * KiB, 0) == 0 && !memcmp(a, b, 64 * KiB));
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_overwrites_in_place)
{
	const char *p = timg_path("inplace.qcow2");
	static uint8_t a[128 * 1024], b[sizeof(a)];
	struct img *img;
	char err[256];
	uint64_t used;

	CHECK(timg_create(p, 16 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(a, sizeof(a), 2);
	CHECK(img_write(img, a, sizeof(a), 4 * MiB) == 0);
	CHECK(img_flush(img) == 0);
	used = img->q->file_end;
	/* Written again, partly: no cluster is allocated. */
	timg_fill(a, 1000, 3);
	CHECK(img_write(img, a, 1000, 4 * MiB + 5) == 0);
	timg_fill(a, sizeof(a), 4);
	CHECK(img_write(img, a, sizeof(a), 4 * MiB) == 0);
	CHECK(img->q->file_end == used);
	CHECK(img_read(img, b, sizeof(b), 4 * MiB) == 0 && !memcmp(a, b, sizeof(a)));
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_offsets_past_4gib)
{
	const char *p = timg_path("big.qcow2");
	static uint8_t a[100000], b[sizeof(a)];
	const uint64_t offs[] = {4 * GiB - 5000, 5 * GiB + 12345, 16 * GiB - sizeof(a)};
	struct img *img;
	char err[256];
	uint64_t run;

	CHECK(timg_create(p, 16 * GiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	for (unsigned i = 0; i < 3; i++) {
		timg_fill(a, sizeof(a), 10 + i);
		CHECK(img_write(img, a, sizeof(a), offs[i]) == 0);
	}
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	for (unsigned i = 0; i < 3; i++) {
		timg_fill(a, sizeof(a), 10 + i);
		CHECK(img_read(img, b, sizeof(b), offs[i]) == 0 && !memcmp(a, b, sizeof(a)));
	}
	CHECK(img_map(img, 4 * GiB, &run) == 1 && run == 64 * KiB * 2);
	CHECK(img_map(img, 4 * GiB + 128 * KiB, &run) == 0 && run == 1 * GiB - 128 * KiB);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_small_clusters_grow_refcount_table)
{
	const char *p = timg_path("small.qcow2");
	static uint8_t a[64 * 1024], b[sizeof(a)];
	struct img *img;
	char err[256];
	uint32_t rt0;

	/* 512-byte clusters: one refcount table cluster covers only 8 MiB of file. */
	CHECK(timg_create(p, 64 * MiB, 9, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	rt0 = img->q->rt_clusters;
	for (unsigned i = 0; i < 40 * MiB / sizeof(a); i++) {
		timg_fill(a, sizeof(a), i);
		CHECK(img_write(img, a, sizeof(a),
		                (uint64_t)i * (sizeof(a) + 100) + (i & 1) * 50) == 0);
	}
	CHECK(img->q->rt_clusters > rt0);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	for (unsigned i = 0; i < 40 * MiB / sizeof(a); i += 37) {
		timg_fill(a, sizeof(a), i);
		CHECK(img_read(img, b, sizeof(b), (uint64_t)i * (sizeof(a) + 100) + (i & 1) * 50) ==
		      0);
		CHECK(!memcmp(a, b, sizeof(a)));
	}
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_rdonly_and_bounds)
{
	const char *p = timg_path("bounds.qcow2");
	uint8_t buf[64] = {1};
	struct img *img;
	char err[256];
	uint64_t run;

	CHECK(timg_create(p, 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_write(img, buf, sizeof(buf), 0) == -EROFS);
	CHECK(img_flush(img) == 0);
	CHECK(img_close(img) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_write(img, buf, sizeof(buf), 1 * MiB - 32) == -EINVAL);
	CHECK(img_read(img, buf, sizeof(buf), 1 * MiB - 32) == -EINVAL);
	CHECK(img_read(img, buf, 1, UINT64_MAX) == -EINVAL);
	CHECK(img_write(img, buf, SIZE_MAX, 1) == -EINVAL);
	CHECK(strstr(img_error(img), "passes the end"));
	CHECK(img_read(img, buf, 0, 1 * MiB) == 0);
	CHECK(img_map(img, 1 * MiB, &run) == -EINVAL);
	CHECK(img_write(img, buf, 32, 1 * MiB - 32) == 0);
	CHECK(img_close(img) == 0);
}

UNIT_TEST(img_raw_backend)
{
	const char *p = timg_path("disk.raw");
	static uint8_t a[5000], b[sizeof(a)];
	struct img_check_result r;
	struct img *img;
	char err[256];
	uint64_t run;
	int fd = open(p, O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 1 * MiB + 100) == 0);
	close(fd);
	/* A raw file is never taken for qcow2, nor guessed. */
	CHECK(img_open(&img, p, IMG_FMT_AUTO, 0, err, sizeof(err)) == -EINVAL);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == -EINVAL);
	CHECK(img_open(&img, p, IMG_FMT_RAW, 0, err, sizeof(err)) == 0);
	CHECK(img_size(img) == 1 * MiB + 100);
	timg_fill(a, sizeof(a), 5);
	CHECK(img_write(img, a, sizeof(a), 1 * MiB + 100 - sizeof(a)) == 0);
	CHECK(img_read(img, b, sizeof(b), 1 * MiB + 100 - sizeof(b)) == 0 &&
	      !memcmp(a, b, sizeof(a)));
	CHECK(img_write(img, a, 101, 1 * MiB) == -EINVAL);
	CHECK(img_map(img, 4096, &run) == 1 && run == 1 * MiB + 100 - 4096);
	CHECK(img_flush(img) == 0);
	CHECK(img_check(img, &r, NULL, NULL, err, sizeof(err)) == -ENOTSUP);
	CHECK(img_cluster_size(img) == 0);
	CHECK(img_close(img) == 0);
}

/* The host file system refuses a write half way: the image stays consistent and usable. */
UNIT_TEST(img_write_error_leaves_image_consistent)
{
	const char *p = timg_path("full.qcow2");
	static uint8_t a[4 * 1024 * 1024], b[sizeof(a)];
	struct rlimit old, lim;
	struct img *img;
	struct stat st;
	char err[256];
	int rc;

	CHECK(timg_create(p, 64 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	timg_fill(a, sizeof(a), 6);
	CHECK(img_write(img, a, 1 * MiB, 0) == 0);
	CHECK(img_flush(img) == 0);
	CHECK(stat(p, &st) == 0);
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size + 200 * KiB;
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	rc = img_write(img, a, sizeof(a), 8 * MiB + 1000);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	CHECK(rc == -EFBIG);
	CHECK(strstr(img_error(img), "write"));
	CHECK(img_flush(img) == 0);
	CHECK(timg_check(img) == 0);
	CHECK(img_read(img, b, 1 * MiB, 0) == 0 && !memcmp(a, b, 1 * MiB));
	CHECK(img_read(img, b, 4096, 8 * MiB + 1000) == 0 && all_zero(b, 4096));
	/* With room again, the same write succeeds. */
	CHECK(img_write(img, a, sizeof(a), 8 * MiB + 1000) == 0);
	CHECK(img_read(img, b, sizeof(b), 8 * MiB + 1000) == 0 && !memcmp(a, b, sizeof(a)));
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

/* Through the public interface only: sequential overwrites must not move the file's end. */
UNIT_TEST(img_sequential_overwrite_keeps_file_size)
{
	const char *p = timg_path("seq.qcow2");
	static uint8_t a[256 * 1024];
	struct img *img;
	char err[256];
	struct stat st1, st2;

	CHECK(timg_create(p, 8 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&img, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	for (uint64_t off = 0; off < 8 * MiB; off += sizeof(a)) {
		timg_fill(a, sizeof(a), off);
		CHECK(img_write(img, a, sizeof(a), off) == 0);
	}
	CHECK(img_flush(img) == 0);
	CHECK(stat(p, &st1) == 0);
	for (uint64_t off = 0; off < 8 * MiB; off += sizeof(a))
		CHECK(img_write(img, a, sizeof(a), off) == 0);
	CHECK(img_flush(img) == 0);
	CHECK(stat(p, &st2) == 0);
	CHECK(st1.st_size == st2.st_size);
	CHECK(img_allocated(img) >= 8 * MiB);
	CHECK(timg_check(img) == 0);
	CHECK(img_close(img) == 0);
}

/* Across processes and within one: any number of readers, or one writer. */
UNIT_TEST(img_one_writer_or_many_readers)
{
	const char *p = timg_path("lock.qcow2");
	struct img *a, *b;
	char err[256];

	CHECK(timg_create(p, 1 * MiB, 0, NULL, IMG_FMT_AUTO) == 0);
	CHECK(img_open(&a, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_open(&b, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == -EBUSY);
	CHECK(strstr(err, "in use"));
	CHECK(img_open(&b, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == -EBUSY);
	CHECK(img_close(a) == 0);
	CHECK(img_open(&a, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_open(&b, p, IMG_FMT_QCOW2, IMG_RDONLY, err, sizeof(err)) == 0);
	CHECK(img_close(b) == 0);
	CHECK(img_open(&b, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == -EBUSY);
	CHECK(img_close(a) == 0);
	CHECK(img_open(&a, p, IMG_FMT_QCOW2, 0, err, sizeof(err)) == 0);
	CHECK(img_close(a) == 0);
}

/*
 * An encrypted image opened by its master key (as img_create gave it to
 * its maker) reads what its passphrase wrote; another key, or one of
 * another length, does not open it; a passphrase is never taken for one.
 */
UNIT_TEST(img_luks_opens_by_master_key)
{
	const char *p = timg_path("master.qcow2");
	uint8_t mk[IMG_MASTER_KEY_LEN] = {0}, buf[4096], back[4096];
	struct img_secret s = {.path = p, .pass = "pass-one", .len = 8};
	struct img_secrets set = {.v = &s, .n = 1};
	struct img_create_opts o = {
		.size = 1 * MiB, .pass = "pass-one", .pass_len = 8, .master_out = mk};
	struct img *img;
	char err[256];

	unlink(p);
	CHECK(img_create(p, &o, err, sizeof(err)) == 0);
	CHECK(!all_zero(mk, sizeof(mk)));
	memset(buf, 0x5a, sizeof(buf));
	CHECK(img_open_secrets(&img, p, IMG_FMT_QCOW2, 0, &set, err, sizeof(err)) == 0);
	CHECK(img_write(img, buf, sizeof(buf), 64 * KiB) == 0);
	CHECK(img_close(img) == 0);
	s = (struct img_secret){.path = p, .pass = mk, .len = sizeof(mk), .master = true};
	CHECK(img_open_secrets(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, &set, err, sizeof(err)) == 0);
	CHECK(img_read(img, back, sizeof(back), 64 * KiB) == 0);
	CHECK(memcmp(buf, back, sizeof(buf)) == 0);
	CHECK(img_close(img) == 0);
	mk[7] ^= 1;
	CHECK(img_open_secrets(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, &set, err, sizeof(err)) ==
	      -EACCES);
	mk[7] ^= 1;
	s.len = 32;
	CHECK(img_open_secrets(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, &set, err, sizeof(err)) ==
	      -EACCES);
	s = (struct img_secret){.path = p, .pass = "pass-one", .len = 8, .master = true};
	CHECK(img_open_secrets(&img, p, IMG_FMT_QCOW2, IMG_RDONLY, &set, err, sizeof(err)) ==
	      -EACCES);
	unlink(p);
}
