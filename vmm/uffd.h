/* SPDX-License-Identifier: MIT */
#ifndef HUSK_UFFD_H
#define HUSK_UFFD_H

#include <stddef.h>
#include <stdint.h>

/*
 * userfaultfd (missing mode, anonymous memory), for lazy_mem.c: a thread
 * touching a registered page that is not there yet waits, in the kernel,
 * until the page is placed; KVM's own accesses to guest memory wait the
 * same way, so a vCPU blocks inside KVM_RUN.
 */

/*
 * A userfaultfd (non-blocking, close-on-exec) past the API handshake: the
 * system call, or /dev/userfaultfd where the call is not allowed. The fd,
 * or -errno with a sentence in err (-EPERM: not allowed for this process,
 * -ENOSYS: a kernel without it).
 */
int uffd_open(char *err, size_t errlen) __attribute__((warn_unused_result));

/* Registers [start, start+len) (page-aligned) for missing-page faults; 0 or -errno. */
int uffd_register(int uffd, void *start, size_t len) __attribute__((warn_unused_result));

/* Undoes it; waiting threads wake and find ordinary memory. 0 or -errno. */
int uffd_unregister(int uffd, void *start, size_t len) __attribute__((warn_unused_result));

/* Wakes threads waiting on [addr, addr+len) whose pages are there already. */
void uffd_wake(int uffd, uint64_t addr, size_t len);

/*
 * Places len bytes at dst: a copy of src, or zero pages when src is NULL.
 * A page found there already (EEXIST) is kept; partial progress and EAGAIN
 * (the address space changed meanwhile) go on from where the kernel stopped.
 */
int uffd_place(int uffd, uint8_t *dst, const uint8_t *src, size_t len)
	__attribute__((warn_unused_result));

#endif
