// SPDX-License-Identifier: MIT
/*
 * Fuzzes the image library's header and table parsing: the input, laid out
 * as a small qcow2 file (the fuzzer's bytes over a valid skeleton, so it
 * gets past the magic quickly), is opened read-only, read in a few ranges
 * chosen by the input, and checked; then opened read-write, written and
 * flushed, with a key for it, so that a crypt method and an encryption
 * header extension in the input take it through the LUKS header's checks.
 * Every result must be 0 or a negative errno; nothing may crash or
 * allocate more than the file could justify (libFuzzer's -rss_limit_mb and
 * -malloc_limit_mb catch that).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "img.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CS 512

/* A valid image: 512-byte clusters, 1 MiB, header / refcount table / block / L1 / L2 / data. */
static void skeleton(uint8_t *f)
{
	static const uint8_t hdr[] = {
		'Q', 'F', 'I', 0xfb, 0, 0,    0, 3,  /* magic, version */
		0,   0,   0,   0,    0, 0,    0, 0,  /* backing offset */
		0,   0,   0,   0,    0, 0,    0, 9,  /* backing size, cluster_bits */
		0,   0,   0,   0,    0, 0x10, 0, 0,  /* size: 1 MiB */
		0,   0,   0,   0,    0, 0,    0, 64, /* crypt, l1_size */
		0,   0,   0,   0,    0, 0,    6, 0,  /* l1 offset: cluster 3 */
		0,   0,   0,   0,    0, 0,    2, 0,  /* refcount table: cluster 1 */
		0,   0,   0,   1,    0, 0,    0, 0,  /* 1 cluster, no snapshots */
	};
	memset(f, 0, 6 * CS);
	memcpy(f, hdr, sizeof(hdr));
	f[99] = 4;     /* refcount_order */
	f[103] = 104;  /* header length */
	f[CS + 6] = 4; /* refcount table[0] = cluster 2 */
	for (int c = 0; c < 6; c++)
		f[2 * CS + 2 * c + 1] = 1;
	f[3 * CS] = 0x80; /* L1[0] = cluster 4, COPIED */
	f[3 * CS + 6] = 8;
	f[4 * CS] = 0x80; /* L2[0] = cluster 5, COPIED */
	f[4 * CS + 6] = 0x0a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	uint8_t file[6 * CS], buf[4096];
	struct img_check_result r;
	struct img *img;
	size_t at, n;
	char err[256];
	int fd;

	static struct img_secret key = {.pass = "fuzz-pass", .len = 9};
	static const struct img_secrets keys = {.v = &key, .n = 1};

	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/fuzz_img.%d", (int)getpid());
	key.path = path;
	skeleton(file);
	/* The first two bytes choose where the rest lands: any part of the skeleton. */
	at = size >= 2 ? ((size_t)data[0] << 8 | data[1]) % sizeof(file) : 0;
	n = size > 2 ? size - 2 : 0;

	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	if (fd < 0)
		abort();
	if (write(fd, file, sizeof(file)) != (ssize_t)sizeof(file) ||
	    pwrite(fd, data + (size > 2 ? 2 : size), n, (off_t)at) != (ssize_t)n)
		abort();
	close(fd);

	if (img_open_secrets(&img, path, IMG_FMT_QCOW2, IMG_RDONLY, &keys, err, sizeof(err)) == 0) {
		uint64_t s = img_size(img), run;

		for (int i = 0; i < 4 && s; i++) {
			uint64_t off = (i * 0x9e3779b97f4a7c15ull + size) % s;
			size_t len = s - off < sizeof(buf) ? (size_t)(s - off) : sizeof(buf);
			int rc = img_read(img, buf, len, off);

			if (rc > 0 || rc < -4095)
				__builtin_trap();
			if (img_map(img, off, &run) > 2)
				__builtin_trap();
		}
		if (img_check(img, &r, NULL, NULL, err, sizeof(err)) > 0)
			__builtin_trap();
		img_close(img);
	}
	if (img_open_secrets(&img, path, IMG_FMT_QCOW2, 0, &keys, err, sizeof(err)) == 0) {
		uint64_t s = img_size(img);

		memset(buf, 0x5a, sizeof(buf));
		if (s > 3000 && img_write(img, buf, 3000, (size * 977) % (s - 3000)) == 0 &&
		    img_read(img, buf, 3000, (size * 977) % (s - 3000)) == 0)
			for (int i = 0; i < 3000; i++)
				if (buf[i] != 0x5a)
					__builtin_trap();
		if (img_flush(img) > 0)
			__builtin_trap();
		img_close(img);
	}
	unlink(path);
	return 0;
}
