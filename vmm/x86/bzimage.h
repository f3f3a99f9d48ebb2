/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_BZIMAGE_H
#define HUSK_X86_BZIMAGE_H

#include <asm/bootparam.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/* Bytes of a bzImage that hold the real-mode setup code and its header. */
#define BZIMAGE_SETUP_MAX (64 * 512)
/* Oldest boot protocol we accept: 2.12 brought xloadflags (64-bit entry). */
#define BZIMAGE_MIN_VERSION 0x020c

/* A piece of the kernel file that goes to guest RAM; memory past filesz stays zero. */
struct kernel_seg {
	uint64_t gpa, offset, filesz, memsz;
};
#define KERNEL_SEGS_MAX 8

/* A kernel as checked: a bzImage, or an ELF vmlinux (x86/vmlinux.h). */
struct bzimage {
	struct setup_header hdr; /* as found in the image (a vmlinux: made up) */
	size_t hdr_len;          /* bytes of hdr the image really defines */
	uint64_t setup_size;     /* real-mode part: (setup_sects + 1) * 512 */
	uint64_t kernel_size;    /* protected-mode part that follows it */
	uint64_t load_addr;      /* where the protected-mode part goes */
	uint64_t mem_needed;     /* load_addr + init_size: end of the kernel's footprint */
	uint64_t entry;          /* 64-bit entry point, guest-physical */
	struct kernel_seg seg[KERNEL_SEGS_MAX];
	unsigned nr_seg;
	uint64_t note_off, note_len; /* a vmlinux's PT_NOTE segment in the file */
	const char *error;           /* why bzimage_parse() refused the image */
};

/*
 * Checks a bzImage's header. head holds the first head_len bytes of the file
 * (at least the setup sectors, BZIMAGE_SETUP_MAX covers every kernel) and
 * file_size is the whole file's size. Returns 0 and fills k, or -EINVAL for
 * anything that is not a 64-bit-capable, loadable bzImage, including a
 * truncated file, with k->error saying why. Never reads past head_len.
 */
int bzimage_parse(const uint8_t *head, size_t head_len, uint64_t file_size, struct bzimage *k)
	__attribute__((warn_unused_result));

/*
 * Chooses where the initrd goes: as high as the kernel allows below
 * low_ram_end (the end of RAM under the MMIO gap), page aligned, above the
 * kernel's footprint. Returns 0, or -ENOMEM if it does not fit.
 */
int bzimage_place_initrd(const struct bzimage *k, uint64_t low_ram_end, uint64_t initrd_size,
                         uint64_t *addr) __attribute__((warn_unused_result));

struct boot_info {
	uint64_t cmdline_addr;
	const char *cmdline;
	uint64_t initrd_addr, initrd_size; /* size 0: no initrd */
	uint64_t rsdp_addr;                /* 0: none */
};

/*
 * Fills the zero page: the kernel's own setup header, loader type, command
 * line and initrd pointers, ACPI RSDP and the e820 map of mem. Returns 0,
 * or -E2BIG when the command line is longer than the kernel accepts.
 */
int bzimage_boot_params(const struct bzimage *k, const struct guest_mem *mem,
                        const struct boot_info *info, struct boot_params *bp)
	__attribute__((warn_unused_result));

/* Writes the e820 map of mem into bp; returns the number of entries. */
int bzimage_e820(const struct guest_mem *mem, struct boot_params *bp);

#endif
