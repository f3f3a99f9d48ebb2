/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_BOOT_H
#define HUSK_X86_BOOT_H

#include <pthread.h>
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
	/* The loader thread, which reads both images into guest RAM. */
	const struct guest_mem *mem;
	pthread_t loader;
	int loader_running;
	int load_result;
};

/*
 * Opens and checks the kernel (an ELF vmlinux or a 64-bit bzImage) and the
 * optional initrd, and that both fit in mem_size bytes of guest RAM. Prints one line naming
 * the file and the problem on failure. Returns 0 or -errno.
 */
int boot_open(struct boot_files *b, const char *kernel, const char *initrd, uint64_t mem_size)
	__attribute__((warn_unused_result));

/*
 * Reads the kernel and initrd into guest RAM on a thread of their own, so
 * that the reads overlap creating the VM (both take a while under nested
 * virtualization). mem must stay mapped until boot_load_images_wait().
 * Returns 0 or -errno if the thread could not start.
 */
int boot_load_images_start(struct boot_files *b, const struct guest_mem *mem)
	__attribute__((warn_unused_result));

/* Waits for the loader; returns 0 or the -errno it failed with (logged). */
int boot_load_images_wait(struct boot_files *b) __attribute__((warn_unused_result));

/*
 * Writes the zero page with the command line, ACPI tables, boot page tables
 * and GDT, and sets up every vCPU to enter the kernel's 64-bit entry point.
 * Call after the images are loaded. Returns 0 or -errno (logged).
 */
int boot_setup(struct boot_files *b, struct vm *vm, const char *cmdline)
	__attribute__((warn_unused_result));

/* Closes the files, waiting for a loader still running. */
void boot_close(struct boot_files *b);

#endif
