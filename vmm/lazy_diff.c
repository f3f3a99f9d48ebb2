// SPDX-License-Identifier: MIT
/* What a lazy restore of a diff places from its memory file (lazy_diff.h). */
#include "lazy_diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"
#include "log.h"
#include "uffd.h"
#include "vm.h"

#define PAGE 4096UL

/* The file's bytes copied in. */
static int diff_copy(int uffd, int base_fd, uint8_t *host, size_t len, uint64_t off)
{
	uint8_t *buf = malloc(len);
	size_t got = 0;
	int ret;

	while (buf && got < len) {
		ssize_t n = pread(base_fd, buf + got, len - got, (off_t)(off + got));

		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	ret = buf ? uffd_place(uffd, host, buf, len) : -ENOMEM;
	free(buf);
	return ret;
}

int lazy_diff_place(int uffd, int base_fd, uint8_t *host, size_t len, uint64_t off)
{
	size_t pos = 0, d, h;

	while (pos < len) {
		off_t data = lseek(base_fd, (off_t)(off + pos), SEEK_DATA), hole;
		int ret = 0;

		if (data < 0 && errno != ENXIO)
			data = (off_t)(off + pos); /* no SEEK_DATA here: all of it is data */
		d = data < 0 || (uint64_t)data >= off + len ? len
		                                            : ((uint64_t)data - off) & ~(PAGE - 1);
		/* Zero pages wake a waiter at once: what it then reads is right. */
		if (d > pos)
			ret = uffd_place(uffd, host + pos, NULL, d - pos);
		if (ret || d >= len)
			return ret;
		hole = lseek(base_fd, data, SEEK_HOLE);
		h = hole < 0 || (uint64_t)hole >= off + len
		            ? len
		            : ((uint64_t)hole - off + PAGE - 1) & ~(PAGE - 1);
		/* The file's pages: the mapping first, then the wake, so no one reads early. */
		if (mmap(host + d, h - d, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, base_fd,
		         (off_t)(off + d)) != MAP_FAILED) {
			madvise(host + d, h - d, MADV_DONTDUMP);
			uffd_wake(uffd, (uintptr_t)(host + d), h - d);
		} else {
			ret = diff_copy(uffd, base_fd, host + d, h - d, off + d);
			if (ret)
				return ret;
		}
		pos = h;
	}
	return 0;
}

void lazy_diff_unregister(int uffd, uint8_t *host, const uint8_t *bitmap, uint32_t nr)
{
	for (uint32_t pg = 0, end; pg < nr; pg = end) {
		int stored = bitmap[pg / 8] >> (pg % 8) & 1;

		for (end = pg + 1; end < nr && (bitmap[end / 8] >> (end % 8) & 1) == stored;)
			end++;
		if (stored &&
		    uffd_unregister(uffd, host + (size_t)pg * PAGE, (size_t)(end - pg) * PAGE))
			log_warn("lazy restore: UFFDIO_UNREGISTER: %s", strerror(errno));
	}
}

void lazy_diff_unmap(struct vm *vm, uint8_t *host, size_t len, int base_fd, uint64_t off)
{
	int ret = guest_mem_map_range(host, len, base_fd, off);

	if (ret)
		vm_stop(vm, VM_EXIT_ERROR, "lazy restore: cannot map the memory file back: %s",
		        strerror(-ret));
	else
		madvise(host, len, MADV_DONTDUMP);
}
