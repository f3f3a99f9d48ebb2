// SPDX-License-Identifier: MIT
/* Helpers shared by the image library's unit tests (see test_img.h). */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_img.h"

static char dir[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_dir(void)
{
	if (dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *timg_path(const char *name)
{
	static char paths[8][512];
	static unsigned next;
	char *p = paths[next++ % 8];

	if (!dir[0]) {
		const char *t = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/husk-img-unit-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(dir))
			abort();
		atexit(rm_dir);
	}
	snprintf(p, 512, "%s/%s", dir, name);
	unlink(p);
	return p;
}

int timg_create(const char *path, uint64_t size, unsigned cluster_bits, const char *backing,
                enum img_format backing_fmt)
{
	struct img_create_opts o = {.size = size,
	                            .cluster_bits = cluster_bits,
	                            .backing = backing,
	                            .backing_fmt = backing_fmt};
	char err[256];

	return img_create(path, &o, err, sizeof(err));
}

int timg_patch(const char *path, uint64_t off, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY), rc = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, data, len, (off_t)off) != (ssize_t)len)
		rc = -EIO;
	close(fd);
	return rc;
}

int timg_patch_be32(const char *path, uint64_t off, uint32_t v)
{
	v = htobe32(v);
	return timg_patch(path, off, &v, sizeof(v));
}

int timg_patch_be64(const char *path, uint64_t off, uint64_t v)
{
	v = htobe64(v);
	return timg_patch(path, off, &v, sizeof(v));
}

uint64_t timg_get_be64(const char *path, uint64_t off)
{
	uint64_t v = 0;
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		if (pread(fd, &v, sizeof(v), (off_t)off) != sizeof(v))
			v = 0;
		close(fd);
	}
	return be64toh(v);
}

void timg_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

long timg_check(struct img *img)
{
	struct img_check_result r;
	char err[256];

	if (img_check(img, &r, NULL, NULL, err, sizeof(err)))
		return -1;
	return (long)(r.corruptions * 1000 + r.leaks);
}
