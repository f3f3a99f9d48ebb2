/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_BOOT_H
#define HUSK_X86_BOOT_H

#include <stdint.h>

#include "vm.h"
#include "x86/bzimage.h"

/* The kernel and initrd files, checked before any guest exists. */
struct boot_files {
	int kernel_fd;
	uint64_t kernel_file_size;
	struct bzimage k;
	int initrd_fd; /* -1: no initrd */
	uint64_t initrd_size;
	uint64_t initrd_addr;
};

/*
 * Opens and checks the kernel (a 64-bit bzImage) and the optional initrd,
 * and that both fit in mem_size bytes of guest RAM. Prints one line naming
 * the file and the problem on failure. Returns 0 or -errno.
 */
int boot_open(struct boot_files *b, const char *kernel, const char *initrd, uint64_t mem_size)
	__attribute__((warn_unused_result));

/*
 * Loads the guest: kernel and initrd into RAM, the zero page with the
 * command line, ACPI tables, boot page tables and GDT; then sets up every
 * vCPU to enter the kernel's 64-bit entry point. Returns 0 or -errno.
 */
int boot_load(struct boot_files *b, struct vm *vm, const char *cmdline)
	__attribute__((warn_unused_result));

void boot_close(struct boot_files *b);

#endif
