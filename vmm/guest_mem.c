// SPDX-License-Identifier: MIT
#include "guest_mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SZ_2M (2ULL << 20)

static int region_map(struct guest_region *r, uint64_t gpa, uint64_t size)
{
	/*
	 * Map 2 MiB more than needed and keep a 2 MiB-aligned window: where the
	 * host backs anonymous memory with transparent huge pages, KVM can then
	 * map guest RAM with 2 MiB nested page-table entries, one fault per
	 * 2 MiB instead of 512 (a boot measured 2.2k exits instead of 10.7k). We do not
	 * madvise(MADV_HUGEPAGE): that opts into direct compaction, which
	 * stalled guest loading for up to a second once host memory fragmented.
	 */
	uint8_t *p = mmap(NULL, size + SZ_2M, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *aligned;

	if (p == MAP_FAILED)
		return -ENOMEM;
	aligned = (uint8_t *)(((uintptr_t)p + SZ_2M - 1) & ~(uintptr_t)(SZ_2M - 1));
	if (aligned > p)
		munmap(p, (size_t)(aligned - p));
	munmap(aligned + size, (size_t)(p + SZ_2M - aligned));
	/* Guest RAM is never part of a host core dump. */
	madvise(aligned, size, MADV_DONTDUMP);
	r->gpa = gpa;
	r->size = size;
	r->host = aligned;
	return 0;
}

#define PAGE_4K 4096ULL

int guest_mem_map_range(uint8_t *host, uint64_t len, int fd, uint64_t off)
{
	uint64_t pos = 0, end;
	off_t data, hole;

	while (pos < len) {
		data = lseek(fd, (off_t)(off + pos), SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			return 0; /* holes to the end */
		if (data < 0)     /* no SEEK_DATA here: the whole range from the file */
			return mmap(host + pos, len - pos, PROT_READ | PROT_WRITE,
			            MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd,
			            (off_t)(off + pos)) == MAP_FAILED
			               ? -errno
			               : 0;
		if ((uint64_t)data >= off + len)
			return 0;
		hole = lseek(fd, data, SEEK_HOLE);
		pos = ((uint64_t)data - off) & ~(uint64_t)(PAGE_4K - 1);
		end = hole < 0 || (uint64_t)hole >= off + len ? len : (uint64_t)hole - off;
		end = (end + PAGE_4K - 1) & ~(uint64_t)(PAGE_4K - 1);
		if (end > len)
			end = len;
		if (mmap(host + pos, end - pos, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd,
		         (off_t)(off + pos)) == MAP_FAILED)
			return -errno;
		pos = end;
	}
	return 0;
}

int guest_mem_map_file(struct guest_mem *mem, int fd)
{
	uint64_t off = 0;
	int ret;

	for (int i = 0; i < mem->nr_regions; i++) {
		struct guest_region *r = &mem->regions[i];

		ret = guest_mem_map_range(r->host, r->size, fd, off);
		if (ret)
			return ret;
		madvise(r->host, r->size, MADV_DONTDUMP);
		off += r->size;
	}
	return 0;
}

int guest_mem_view(struct guest_mem *mem, uint8_t *base, uint64_t ram_size)
{
	uint64_t low;

	memset(mem, 0, sizeof(*mem));
	/* 1 TiB is far beyond what a sandbox gets and keeps every sum below 2^64. */
	if (ram_size < SZ_2M || ram_size % SZ_2M || ram_size > (1ULL << 40))
		return -EINVAL;
	low = ram_size < GUEST_MMIO_GAP_START ? ram_size : GUEST_MMIO_GAP_START;
	mem->regions[0] = (struct guest_region){.gpa = 0, .size = low, .host = base};
	mem->nr_regions = 1;
	if (ram_size > low) {
		mem->regions[1] = (struct guest_region){.gpa = GUEST_MMIO_GAP_END,
		                                        .size = ram_size - low,
		                                        .host = base ? base + low : NULL};
		mem->nr_regions = 2;
	}
	mem->ram_size = ram_size;
	return 0;
}

int guest_mem_parse_size(const char *s, uint64_t *out)
{
	char *end;
	uint64_t v, shift = 20;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		return -EINVAL;
	}
	if (*end && strcmp(end, "iB") && strcmp(end, "B"))
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int guest_mem_init(struct guest_mem *mem, uint64_t ram_size)
{
	/* The layout as a view without memory, then each region mapped on its own. */
	int ret = guest_mem_view(mem, NULL, ram_size), nr = mem->nr_regions;

	if (ret)
		return ret;
	mem->nr_regions = 0;
	for (int i = 0; i < nr; i++) {
		ret = region_map(&mem->regions[i], mem->regions[i].gpa, mem->regions[i].size);
		if (ret) {
			guest_mem_free(mem);
			return ret;
		}
		mem->nr_regions = i + 1;
	}
	return 0;
}

void guest_mem_free(struct guest_mem *mem)
{
	free(mem->dirty);
	for (int i = 0; i < mem->nr_regions; i++)
		munmap(mem->regions[i].host, mem->regions[i].size);
	memset(mem, 0, sizeof(*mem));
}

void *gpa_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	if (len == 0 || gpa + len < gpa)
		return NULL;
	for (int i = 0; i < mem->nr_regions; i++) {
		const struct guest_region *r = &mem->regions[i];

		/* Written so that no sum can wrap: gpa >= r->gpa first. */
		if (gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

int guest_mem_read(const struct guest_mem *mem, uint64_t gpa, void *dst, uint64_t len)
{
	const void *p = gpa_ptr(mem, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, len);
	return 0;
}

int guest_mem_write(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gpa_ptr(mem, gpa, len);

	if (!p)
		return -EFAULT;
	guest_mem_mark(mem, gpa, len);
	memcpy(p, src, len);
	return 0;
}

int guest_mem_track(struct guest_mem *mem)
{
	/* Region sizes are multiples of 2 MiB: each region starts on a word. */
	mem->dirty = calloc(mem->ram_size / PAGE_4K / 64 + 1, sizeof(uint64_t));
	return mem->dirty ? 0 : -ENOMEM;
}

static void dirty_set(uint64_t *bits, uint64_t first, uint64_t last)
{
	for (uint64_t pg = first; pg <= last; pg++)
		__atomic_fetch_or(&bits[pg / 64], 1ULL << (pg % 64), __ATOMIC_RELAXED);
}

void guest_mem_mark(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	uint64_t off = 0;

	if (!mem->dirty || len == 0 || gpa + len < gpa)
		return;
	for (int i = 0; i < mem->nr_regions; i++) {
		const struct guest_region *r = &mem->regions[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size) {
			uint64_t at = off + (gpa - r->gpa),
				 end = len < r->size - (gpa - r->gpa) ? at + len : off + r->size;

			dirty_set(mem->dirty, at / PAGE_4K, (end - 1) / PAGE_4K);
			return;
		}
		off += r->size;
	}
}

void guest_mem_mark_region(const struct guest_mem *mem, int i, const uint64_t *bits)
{
	uint64_t off = 0;

	if (!mem->dirty || i < 0 || i >= mem->nr_regions)
		return;
	for (int k = 0; k < i; k++)
		off += mem->regions[k].size;
	for (uint64_t w = 0; w < mem->regions[i].size / PAGE_4K / 64; w++)
		if (bits[w])
			__atomic_fetch_or(&mem->dirty[off / PAGE_4K / 64 + w], bits[w],
			                  __ATOMIC_RELAXED);
}

uint64_t guest_mem_low_size(const struct guest_mem *mem)
{
	return mem->nr_regions ? mem->regions[0].size : 0;
}
