/* SPDX-License-Identifier: MIT */
#ifndef HUSK_LAZY_MEM_H
#define HUSK_LAZY_MEM_H

#include <stdbool.h>

#include "snap/snapfile.h"

struct vm;
struct lazy_mem;

/*
 * A lazy restore: guest RAM is filled from the snapshot as it is touched,
 * so that the vCPUs can run before all of it is decompressed. The 2 MiB
 * chunks the snapshot stores are registered with a userfaultfd (missing
 * mode; chunks it left out as zero stay ordinary fresh memory); a handler
 * thread answers each fault by decompressing the chunk around it into
 * place, whoever touched it (a vCPU inside KVM, a device, the VMM's own
 * snapshot writer), while a background thread fills the rest in order.
 * Once every chunk is in, both threads end and the userfaultfd and (once
 * handed over with lazy_mem_release_reader()) the snapshot file are closed.
 *
 * Starts it for vm, whose guest RAM must be untouched and laid out as the
 * snapshot's (snap_reader_memory_fits()). r stays the caller's until
 * lazy_mem_release_reader(). With base_fd >= 0, r is a diff and guest RAM
 * that descriptor's memory file, mapped (memfile_map()): the diff's pages
 * go over it, and are marked as written. Without background, chunks come
 * only as they are touched (and in lazy_mem_wait()); with vm->held, the
 * background fill waits for lazy_mem_go(). Returns 0 and *out,
 * or -errno with a sentence in err when it cannot (no userfaultfd here,
 * not allowed, out of memory); guest RAM is then as it was and can be
 * loaded eagerly instead.
 */
int lazy_mem_start(struct vm *vm, struct snap_reader *r, int base_fd, bool background,
                   struct lazy_mem **out, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Until every chunk is in, filling those nobody has taken on this thread:
 * a diff's next pause must see every page its restore placed. Guest RAM
 * stays registered with the userfaultfd until then, so the caller may not
 * be a thread that handles faults. 0, or -EIO if the load failed or stopped.
 */
int lazy_mem_wait(struct lazy_mem *l) __attribute__((warn_unused_result));

/*
 * The caller is done with the reader given to lazy_mem_start(): it is
 * closed once the last chunk is in (now, if that has happened already).
 */
void lazy_mem_release_reader(struct lazy_mem *l);

/* The guest of a --held restore runs: the background fill may begin. */
void lazy_mem_go(struct lazy_mem *l);

/*
 * Logs how far the load is (a state dump, vm_dump()). Returns whether
 * chunks are still to come: reading guest memory may then wait on the
 * handler thread.
 */
bool lazy_mem_dump(struct lazy_mem *l);

/*
 * Stops both threads, wherever they are, and frees everything (the reader
 * too, if released). Guest memory not yet filled reads as zeros after this:
 * call it only once nothing runs the guest any more. NULL is fine.
 */
void lazy_mem_destroy(struct lazy_mem *l);

#endif
