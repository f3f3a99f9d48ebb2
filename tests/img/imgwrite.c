// SPDX-License-Identifier: MIT
/*
 * imgwrite IMAGE MIRROR SEED COUNT [MAXLEN]: COUNT random writes (offsets
 * aligned or not, lengths 1..MAXLEN, random, zero or repeated bytes) into
 * IMAGE through the image library, the same into the raw file MIRROR. Every
 * write is read back; the image is flushed, closed and reopened now and
 * then; at the end IMAGE is compared with MIRROR (see compare_all). Encrypted
 * images open with IMGWRITE_KEYS="IMAGE=PASSPHRASE ...". Exit status 0 when
 * everything matched, 1 with a message naming the first difference.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img.h"

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int die(const char *what, const char *why)
{
	fprintf(stderr, "imgwrite: %s: %s\n", what, why);
	return 1;
}

/* IMGWRITE_KEYS="IMAGE=PASSPHRASE ...": the keys of encrypted images in the chain. */
static const struct img_secrets *secrets(void)
{
	static struct img_secret v[8];
	static struct img_secrets all = {.v = v};
	static char *text;
	char *save = NULL;

	if (text || !getenv("IMGWRITE_KEYS"))
		return text ? &all : NULL;
	text = strdup(getenv("IMGWRITE_KEYS"));
	for (char *t = text ? strtok_r(text, " ", &save) : NULL; t && all.n < 8;
	     t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');

		if (eq) {
			*eq = '\0';
			v[all.n++] = (struct img_secret){
				.path = t, .pass = eq + 1, .len = strlen(eq + 1)};
		}
	}
	return &all;
}

static int reopen(struct img **img, const char *path)
{
	char err[512];

	if (*img && img_close(*img))
		return die(path, "close failed");
	*img = NULL;
	if (img_open_secrets(img, path, IMG_FMT_QCOW2, 0, secrets(), err, sizeof(err)))
		return die(path, err);
	return 0;
}

static int compare_range(struct img *img, int fd, uint8_t *a, uint8_t *b, size_t chunk,
                         uint64_t off, uint64_t end)
{
	for (; off < end; off += chunk) {
		size_t n = end - off < chunk ? (size_t)(end - off) : chunk;
		ssize_t got = pread(fd, b, n, (off_t)off);

		if (got < 0)
			return die("mirror", strerror(errno));
		memset(b + got, 0, n - (size_t)got);
		if (img_read(img, a, n, off))
			return die("read", img_error(img));
		if (memcmp(a, b, n)) {
			size_t i = 0;

			while (a[i] == b[i])
				i++;
			fprintf(stderr, "imgwrite: image and mirror differ at %llu\n",
			        (unsigned long long)(off + i));
			return 1;
		}
	}
	return 0;
}

/*
 * All of the mirror's data regions; in its holes, all the image holds as
 * data and the first 4 KiB of every other run (reading gigabytes of holes
 * would be slow; qemu-img compare checks those independently).
 */
static int compare_all(struct img *img, int fd, uint8_t *a, uint8_t *b, size_t chunk)
{
	uint64_t size = img_size(img), off = 0;

	while (off < size) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;
		uint64_t hole_end = d < 0 || (uint64_t)d > size ? size : (uint64_t)d, run;

		while (off < hole_end) {
			int m = img_map(img, off, &run);

			if (m < 0)
				return die("map", img_error(img));
			run = run < hole_end - off ? run : hole_end - off;
			if (compare_range(img, fd, a, b, chunk, off,
			                  off + (m == 1       ? run
			                         : run < 4096 ? run
			                                      : 4096)))
				return 1;
			off += run;
		}
		if (off >= size)
			break;
		h = lseek(fd, (off_t)off, SEEK_HOLE);
		if (compare_range(img, fd, a, b, chunk, off,
		                  h < 0 || (uint64_t)h > size ? size : (uint64_t)h))
			return 1;
		off = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct img *img = NULL;
	uint64_t count, maxlen = 300000, size, cs;
	uint8_t *buf, *back;
	int fd;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: imgwrite IMAGE MIRROR SEED COUNT [MAXLEN]\n");
		return 2;
	}
	rng = strtoull(argv[3], NULL, 0) * 2654435761u + 1;
	count = strtoull(argv[4], NULL, 0);
	if (argc == 6)
		maxlen = strtoull(argv[5], NULL, 0);
	if (!maxlen)
		return die("MAXLEN", "must be above zero");
	if (reopen(&img, argv[1]))
		return 1;
	fd = open(argv[2], O_RDWR);
	if (fd < 0)
		return die(argv[2], strerror(errno));
	size = img_size(img);
	cs = img_cluster_size(img);
	buf = malloc(maxlen > 1 << 20 ? maxlen : 1 << 20);
	back = malloc(maxlen > 1 << 20 ? maxlen : 1 << 20);
	if (!buf || !back || !size)
		return die("setup", "out of memory or empty image");
	for (uint64_t i = 0; i < count; i++) {
		uint64_t len = next() % maxlen + 1, off, r = next() % 8;

		if (len > size)
			len = size;
		off = next() % (size - len + 1);
		if (r < 3)
			off -= off % cs; /* cluster aligned */
		else if (r == 3)
			off = size - len; /* the end */
		if (r == 4)
			len = len < cs ? len : cs;
		switch (next() % 4) {
		case 0:
			memset(buf, 0, len);
			break;
		case 1:
			memset(buf, (int)(next() & 0xff), len);
			break;
		default:
			for (uint64_t j = 0; j < len; j++)
				buf[j] = (uint8_t)next();
		}
		if (img_write(img, buf, len, off))
			return die("write", img_error(img));
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			return die("mirror write", strerror(errno));
		if (img_read(img, back, len, off))
			return die("read", img_error(img));
		if (memcmp(buf, back, len)) {
			fprintf(stderr, "imgwrite: write %llu: read-back differs\n",
			        (unsigned long long)i);
			return 1;
		}
		if (next() % 64 == 0 && img_flush(img))
			return die("flush", img_error(img));
		if (next() % 128 == 0 && reopen(&img, argv[1]))
			return 1;
	}
	if (compare_all(img, fd, buf, back, 1 << 20))
		return 1;
	if (reopen(&img, argv[1]) || compare_all(img, fd, buf, back, 1 << 20))
		return 1;
	if (img_close(img))
		return die(argv[1], "close failed");
	close(fd);
	free(buf);
	free(back);
	return 0;
}
