/* SPDX-License-Identifier: MIT */
#ifndef HUSK_GUEST_MEM_H
#define HUSK_GUEST_MEM_H

#include <stdbool.h>
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
	/*
	 * Pages that may differ from the memory file the VM was restored over:
	 * a bit per page of RAM (regions back to back, as in the file), set by
	 * every writer of guest memory in the VMM and OR'd with KVM's dirty log
	 * at a pause. NULL when not tracked.
	 */
	uint64_t *dirty;
	bool dirty_lost;   /* KVM's log could not be read: the bits say nothing */
	bool dirty_verify; /* a diff also compares every page and fails on a missed one */
};

/*
 * A size as --mem takes it: "256M", "1G", "512" (MiB), "1048576K"; also the
 * "MiB"/"MB" spellings. 0, -EINVAL or -ERANGE.
 */
int guest_mem_parse_size(const char *s, uint64_t *out) __attribute__((warn_unused_result));

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
 * Maps [off, off + len) of fd over host, data only: a hole of the file (a
 * page of zeros) keeps the anonymous mapping under it, so a guest that
 * reads or writes it never adds a page to the file (on tmpfs a fault on a
 * hole would) and the memory a pause reads there is the zero page. 0 or
 * -errno.
 */
int guest_mem_map_range(uint8_t *host, uint64_t len, int fd, uint64_t off)
	__attribute__((warn_unused_result));

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

/*
 * Starts tracking which pages differ from the file guest RAM was mapped
 * from (guest_mem_map_file): 0 or -ENOMEM. guest_mem_free() ends it.
 */
int guest_mem_track(struct guest_mem *mem) __attribute__((warn_unused_result));

/*
 * Records that the VMM writes (or may write) [gpa, gpa+len): every writer
 * of guest memory outside KVM calls it, or a diff snapshot loses its bytes.
 * Safe from any thread; nothing when untracked or outside RAM.
 */
void guest_mem_mark(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

/* ORs a KVM dirty log of region i (a bit per page of it) into the record. */
void guest_mem_mark_region(const struct guest_mem *mem, int i, const uint64_t *bits);

/* Whether the record says which pages were written (kept, and KVM's log all read into it). */
static inline bool guest_mem_tracked(const struct guest_mem *mem)
{
	return mem->dirty && !mem->dirty_lost;
}

/* Whether the page at RAM offset off may differ from the file (true when untracked). */
static inline bool guest_mem_page_dirty(const struct guest_mem *mem, uint64_t off)
{
	uint64_t pg = off / 4096;

	if (!guest_mem_tracked(mem))
		return true;
	return __atomic_load_n(&mem->dirty[pg / 64], __ATOMIC_RELAXED) >> (pg % 64) & 1;
}

/* Bytes of guest RAM below 4 GiB (the region that starts at 0). */
uint64_t guest_mem_low_size(const struct guest_mem *mem);

#endif
