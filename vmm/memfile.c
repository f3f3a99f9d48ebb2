// SPDX-License-Identifier: MIT
/*
 * Memory files: a snapshot's guest RAM uncompressed, made once
 * (husk-vmm --extract-memory) and mapped MAP_PRIVATE by every VMM restored
 * from that snapshot with --mem-file. A restore then reads nothing up
 * front, and the pages no child writes are one copy in the page cache for
 * all of them. lz4 snapshots stay the format for storage and pause; this
 * is a cache of one (FORMAT.md, "Memory files").
 *
 * The file: guest RAM, regions back to back (pages the snapshot holds as
 * zero left as holes), then a 4 KiB footer naming the snapshot it was made
 * from, so that a file and a snapshot that do not belong together are refused.
 */
#include "memfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap/snapfile.h"

#define FOOTER 4096
#define MAGIC "HUSKMEM1"
#define VERSION 1

/* magic[8] version u32 reserved u32 ram_size u64 snapshot length u64 snapshot table sum u32 */
static void footer_make(uint8_t *f, uint64_t ram_size, uint64_t snap_len, uint32_t snap_sum)
{
	memset(f, 0, FOOTER);
	memcpy(f, MAGIC, 8);
	for (int i = 0; i < 4; i++)
		f[8 + i] = (uint8_t)(VERSION >> (8 * i));
	for (int i = 0; i < 8; i++) {
		f[16 + i] = (uint8_t)(ram_size >> (8 * i));
		f[24 + i] = (uint8_t)(snap_len >> (8 * i));
	}
	for (int i = 0; i < 4; i++)
		f[32 + i] = (uint8_t)(snap_sum >> (8 * i));
}

int memfile_extract(const char *snap, const char *out, int threads, char *err, size_t errlen)
{
	uint8_t footer[FOOTER], *map = MAP_FAILED;
	struct snap_mem_info info;
	struct snap_reader *r = NULL;
	struct guest_mem view;
	uint64_t len;
	uint32_t sum;
	char tmp[4200];
	int fd = -1, ret;

	ret = snap_reader_open(snap, &r, err, errlen);
	if (ret)
		return ret;
	if (snap_reader_memory_info(r, &info)) {
		snprintf(err, errlen, "%s holds no guest RAM", snap);
		snap_reader_close(r);
		return -ENOENT;
	}
	if (snap_reader_base(r, &len, &sum) == 0) {
		snprintf(err, errlen,
		         "%s is a diff over another snapshot's memory: a memory file is made "
		         "of a full snapshot",
		         snap);
		snap_reader_close(r);
		return -EINVAL;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)(info.ram_size + FOOTER)) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot make %s: %s", tmp, strerror(-ret));
		goto out;
	}
	map = mmap(NULL, info.ram_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED || guest_mem_view(&view, map, info.ram_size)) {
		ret = map == MAP_FAILED ? -errno : -EINVAL;
		snprintf(err, errlen, "cannot map %s: %s", tmp, strerror(-ret));
		goto out;
	}
	ret = snap_reader_load_memory(r, &view, threads, err, errlen);
	if (!ret && msync(map, info.ram_size, MS_SYNC) < 0)
		ret = -errno;
	snap_reader_identity(r, &len, &sum);
	footer_make(footer, info.ram_size, len, sum);
	if (!ret && pwrite(fd, footer, FOOTER, (off_t)info.ram_size) != FOOTER)
		ret = -EIO;
	if (!ret && (fsync(fd) < 0 || rename(tmp, out) < 0))
		ret = -errno;
	if (ret && !err[0])
		snprintf(err, errlen, "cannot write %s: %s", out, strerror(-ret));
out:
	if (map != MAP_FAILED)
		munmap(map, info.ram_size);
	if (fd >= 0)
		close(fd);
	if (ret)
		unlink(tmp);
	snap_reader_close(r);
	return ret;
}

int memfile_map(struct guest_mem *mem, struct snap_reader *r, const char *path,
                struct memfile_base *base, char *err, size_t errlen)
{
	uint8_t footer[FOOTER], want[FOOTER];
	uint64_t len;
	uint32_t sum;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), ret;

	if (fd < 0 || fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the memory file %s: %s", path, strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	base->fd = -1;
	/* A diff goes over its base's memory: the file must be the base's. */
	if (snap_reader_base(r, &len, &sum))
		snap_reader_identity(r, &len, &sum);
	footer_make(want, mem->ram_size, len, sum);
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != mem->ram_size + FOOTER ||
	    pread(fd, footer, FOOTER, (off_t)mem->ram_size) != FOOTER || memcmp(footer, MAGIC, 8)) {
		snprintf(err, errlen,
		         "%s is not a memory file of a %llu MiB guest (make it with husk-vmm "
		         "--extract-memory)",
		         path, (unsigned long long)(mem->ram_size >> 20));
		close(fd);
		return -EINVAL;
	}
	if (memcmp(footer, want, 40)) {
		snprintf(err, errlen,
		         "%s was made from another snapshot than this one; make it again from "
		         "this snapshot (husk-vmm --extract-memory)",
		         path);
		close(fd);
		return -EINVAL;
	}
	ret = guest_mem_map_file(mem, fd);
	if (ret) {
		snprintf(err, errlen, "cannot map %s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	*base = (struct memfile_base){.fd = fd, .snap_len = len, .snap_sum = sum};
	return 0;
}
