/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_VMLINUX_H
#define HUSK_X86_VMLINUX_H

#include <stddef.h>
#include <stdint.h>

#include "x86/bzimage.h"

/* Bytes at the start of a vmlinux that must hold its ELF and program headers. */
#define VMLINUX_HEAD_MAX 4096
/* Most bytes of ELF notes read to tell a Linux kernel from another ELF. */
#define VMLINUX_NOTES_MAX 4096

/* True when head starts with the ELF magic (the caller then uses vmlinux_parse). */
int vmlinux_is_elf(const uint8_t *head, size_t head_len);

/*
 * Checks an uncompressed Linux kernel (the ELF vmlinux a kernel build leaves
 * at its top) and fills k as bzimage_parse() does: its loadable segments at
 * their physical addresses, the 64-bit entry point (phys_startup_64) and a
 * setup header of our own, as the decompressor would have passed it on.
 * Booting it skips the guest's decompression. head holds the first head_len
 * bytes of the file; file_size is the whole file's. Returns 0, or -EINVAL
 * with k->error saying why. Never reads past head_len.
 */
int vmlinux_parse(const uint8_t *head, size_t head_len, uint64_t file_size, struct bzimage *k)
	__attribute__((warn_unused_result));

/*
 * Says whether notes (the len bytes of k->note_off..note_len, read by the
 * caller) hold a note named "Linux", which every vmlinux since 4.17 carries
 * (its build salt) and an ordinary program does not. Returns 0, or -EINVAL
 * with k->error set. Never reads past len.
 */
int vmlinux_check_notes(const uint8_t *notes, size_t len, struct bzimage *k)
	__attribute__((warn_unused_result));

#endif
