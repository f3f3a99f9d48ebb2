/* SPDX-License-Identifier: MIT */
#ifndef HUSK_MEMFILE_H
#define HUSK_MEMFILE_H

#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

struct snap_reader;

/*
 * Writes the guest RAM of snapshot snap uncompressed to out (through
 * out.tmp, renamed at the end), decompressing on threads threads, with the
 * footer that names snap. 0, or -errno with a sentence in err.
 */
int memfile_extract(const char *snap, const char *out, int threads, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* The memory a VM runs on, once mapped: a later pause writes a diff over it. */
struct memfile_base {
	int fd;            /* the memory file, read-only; -1: none */
	uint64_t snap_len; /* the identity of the snapshot it was made from */
	uint32_t snap_sum;
};

/*
 * Maps the memory file at path over mem (guest_mem_map_file) after checking
 * that it holds mem's size and was made from the snapshot r reads, or, when
 * r is a diff, from r's base. *base keeps the file open (the caller closes
 * base->fd). -EINVAL for a file that does not belong, or -errno; err says which.
 */
int memfile_map(struct guest_mem *mem, struct snap_reader *r, const char *path,
                struct memfile_base *base, char *err, size_t errlen)
	__attribute__((warn_unused_result));

#endif
