// SPDX-License-Identifier: MIT
/*
 * diskbench: sequential and 4 KiB random throughput of a block device, with
 * O_DIRECT so the guest's page cache does not hide the device. Runs inside a
 * guest (static binary); prints one line of key=value figures.
 *
 * usage: diskbench DEVICE MIB RANDOM_OPS
 * Writes MIB MiB sequentially (1 MiB requests), reads them back, then does
 * RANDOM_OPS 4 KiB writes and as many reads at random offsets in that range.
 * Data is a pattern checked on read, so a wrong read is an error, not a
 * fast one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SEQ_BLOCK (1u << 20)
#define RND_BLOCK 4096u

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every 8-byte word holds its own byte offset: any misplaced block shows. */
static void fill(uint8_t *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = off + i;
		memcpy(buf + i, &v, 8);
	}
}

static int verify(const uint8_t *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v;
		memcpy(&v, buf + i, 8);
		if (v != off + i) {
			fprintf(stderr, "diskbench: wrong data at byte %llu\n",
			        (unsigned long long)(off + i));
			return -1;
		}
	}
	return 0;
}

static int io(int fd, int write_it, uint8_t *buf, size_t len, uint64_t off)
{
	ssize_t n = write_it ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);

	if (n != (ssize_t)len) {
		fprintf(stderr, "diskbench: %s of %zu bytes at %llu: %s\n",
		        write_it ? "write" : "read", len, (unsigned long long)off,
		        n < 0 ? strerror(errno) : "short");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t bytes, ops, *offs;
	uint8_t *buf;
	double t, seq_w, seq_r, rnd_w, rnd_r;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: diskbench DEVICE MIB RANDOM_OPS\n");
		return 2;
	}
	bytes = strtoull(argv[2], NULL, 10) << 20;
	ops = strtoull(argv[3], NULL, 10);
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || !bytes || !ops || posix_memalign((void **)&buf, 4096, SEQ_BLOCK)) {
		fprintf(stderr, "diskbench: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	offs = calloc(ops, sizeof(*offs));
	srandom(42);
	for (uint64_t i = 0; i < ops; i++)
		offs[i] = ((uint64_t)random() % (bytes / RND_BLOCK)) * RND_BLOCK;

	t = now();
	for (uint64_t off = 0; off < bytes; off += SEQ_BLOCK) {
		fill(buf, SEQ_BLOCK, off);
		if (io(fd, 1, buf, SEQ_BLOCK, off))
			return 1;
	}
	if (fdatasync(fd))
		return 1;
	seq_w = now() - t;

	t = now();
	for (uint64_t off = 0; off < bytes; off += SEQ_BLOCK)
		if (io(fd, 0, buf, SEQ_BLOCK, off) || verify(buf, SEQ_BLOCK, off))
			return 1;
	seq_r = now() - t;

	t = now();
	for (uint64_t i = 0; i < ops; i++) {
		fill(buf, RND_BLOCK, offs[i]);
		if (io(fd, 1, buf, RND_BLOCK, offs[i]))
			return 1;
	}
	if (fdatasync(fd))
		return 1;
	rnd_w = now() - t;

	t = now();
	for (uint64_t i = 0; i < ops; i++)
		if (io(fd, 0, buf, RND_BLOCK, offs[i]) || verify(buf, RND_BLOCK, offs[i]))
			return 1;
	rnd_r = now() - t;

	printf("seq_write_mbs=%.1f seq_read_mbs=%.1f rand_write_iops=%.0f rand_read_iops=%.0f\n",
	       (double)bytes / 1e6 / seq_w, (double)bytes / 1e6 / seq_r, (double)ops / rnd_w,
	       (double)ops / rnd_r);
	return 0;
}
