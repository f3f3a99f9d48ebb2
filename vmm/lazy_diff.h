/* SPDX-License-Identifier: MIT */
#ifndef HUSK_LAZY_DIFF_H
#define HUSK_LAZY_DIFF_H

#include <stddef.h>
#include <stdint.h>

struct vm;

/*
 * A diff's chunk with fewer pages than this (of chunk_pages) is not lazy:
 * its pages are written over the memory file's mapping before the guest
 * runs, as an eager restore would (snap_reader_load_memory_below()). These
 * are the kernel's scattered writes, what a resumed guest touches first;
 * mapping the file back around their few pages while the guest runs costs
 * more than writing them (nested: 20-50 ms a chunk against 1-10).
 */
#define LAZY_DIFF_DENSE(chunk_pages) ((chunk_pages) / 4 * 3)

/*
 * Places [off, off + len) of the memory file base_fd at host, in a chunk
 * registered with uffd: its data mapped back from the file (MAP_PRIVATE,
 * shared through the page cache as before; whoever waits there is woken
 * to fault it in), its holes as zero pages, as guest_mem_map_range() maps
 * them. A VMM out of mappings (vm.max_map_count) gets a copy instead.
 * 0 or -errno.
 */
int lazy_diff_place(int uffd, int base_fd, uint8_t *host, size_t len, uint64_t off)
	__attribute__((warn_unused_result));

/* Unregisters each run of pages set in bitmap (nr pages from host): they are in. */
void lazy_diff_unregister(int uffd, uint8_t *host, const uint8_t *bitmap, uint32_t nr);

/*
 * Maps [off, off + len) of base_fd over host again (a start that failed
 * after making it anonymous); stops vm if it cannot.
 */
void lazy_diff_unmap(struct vm *vm, uint8_t *host, size_t len, int base_fd, uint64_t off);

#endif
