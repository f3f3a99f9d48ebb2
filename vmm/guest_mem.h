/* SPDX-License-Identifier: MIT */
#ifndef HUSK_GUEST_MEM_H
#define HUSK_GUEST_MEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Guest RAM. On x86 RAM below 4 GiB stops at GUEST_MMIO_GAP_START so that
 * device windows (virtio-mmio, IOAPIC, LAPIC) have room; the rest of RAM
 * continues at 4 GiB.
 */
#define GUEST_MMIO_GAP_START 0xc0000000ULL
#define GUEST_MMIO_GAP_END 0x100000000ULL
#define GUEST_MEM_MAX_REGIONS 2

struct guest_region {
	uint64_t gpa;  /* first guest-physical address */
	uint64_t size; /* bytes */
	uint8_t *host; /* host mapping of the first byte */
};

struct guest_mem {
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
	int nr_regions;
	uint64_t ram_size; /* sum of region sizes */
};

/*
 * Reserves ram_size bytes of guest RAM (a multiple of 2 MiB, at least 2 MiB),
 * split around the MMIO gap. Pages are not touched: the host commits memory
 * only as the guest uses it. Returns 0, -EINVAL for a bad size or -ENOMEM.
 */
int guest_mem_init(struct guest_mem *mem, uint64_t ram_size) __attribute__((warn_unused_result));

/*
 * Maps guest RAM from fd (MAP_PRIVATE, over what guest_mem_init() reserved):
 * the regions back to back from offset 0, so that pages the guest never
 * writes stay shared with every other mapping of the file through the page
 * cache, and its writes stay its own. The file must hold ram_size bytes.
 * 0 or -errno.
 */
int guest_mem_map_file(struct guest_mem *mem, int fd) __attribute__((warn_unused_result));

/*
 * A guest_mem over ram_size bytes at base (a file mapping, say), laid out as
 * guest_mem_init() lays out guest RAM; not to be freed. 0 or -EINVAL.
 */
int guest_mem_view(struct guest_mem *mem, uint8_t *base, uint64_t ram_size)
	__attribute__((warn_unused_result));

/* Unmaps guest RAM; safe on a zeroed or already freed guest_mem. */
void guest_mem_free(struct guest_mem *mem);

/*
 * The one way to reach guest memory: a host pointer to [gpa, gpa+len), or
 * NULL when len is 0, when gpa+len overflows, or when any byte of the range
 * is outside a single RAM region. The pointer stays valid until
 * guest_mem_free(); the guest may change the bytes at any time.
 */
void *gpa_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

/* Copies to/from guest memory through gpa_ptr(); 0 or -EFAULT. */
int guest_mem_read(const struct guest_mem *mem, uint64_t gpa, void *dst, uint64_t len)
	__attribute__((warn_unused_result));
int guest_mem_write(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len)
	__attribute__((warn_unused_result));

/* Bytes of guest RAM below 4 GiB (the region that starts at 0). */
uint64_t guest_mem_low_size(const struct guest_mem *mem);

#endif
