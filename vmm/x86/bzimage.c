// SPDX-License-Identifier: MIT
/*
 * Linux x86 boot protocol (Documentation/x86/boot.rst): header checks, the
 * zero page, the e820 map and where the initrd goes. Pure code: the caller
 * does the file and guest-memory I/O, so all of this is unit tested.
 */
#include "x86/bzimage.h"

#include <asm/e820.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "x86/layout.h"

#define HDR_OFFSET 0x1f1
#define HDR_MAGIC 0x53726448 /* "HdrS" */
#define BOOT_FLAG 0xaa55
#define PAGE_SIZE 4096ULL
/* The 64-bit entry sits 0x200 into the protected-mode part (boot.rst). */
#define ENTRY_64_OFFSET 0x200

#define REFUSE(why)             \
	do {                    \
		k->error = why; \
		return -EINVAL; \
	} while (0)

int bzimage_parse(const uint8_t *head, size_t head_len, uint64_t file_size, struct bzimage *k)
{
	struct setup_header h;
	size_t hdr_len;
	unsigned sects;

	memset(k, 0, sizeof(*k));
	if (head_len > file_size || head_len < HDR_OFFSET + sizeof(h))
		REFUSE("file too short to hold a Linux boot header");
	memcpy(&h, head + HDR_OFFSET, sizeof(h));
	if (h.boot_flag != BOOT_FLAG || h.header != HDR_MAGIC)
		REFUSE("no Linux boot header ('HdrS' signature); is it a bzImage?");
	if (h.version < BZIMAGE_MIN_VERSION)
		REFUSE("boot protocol older than 2.12; use a Linux 3.8 or newer kernel");
	if (!(h.loadflags & LOADED_HIGH) || !(h.xloadflags & XLF_KERNEL_64))
		REFUSE("not a 64-bit x86 kernel (no 64-bit entry point)");

	/* The header ends where the 2-byte jump at 0x200 lands. */
	hdr_len = 0x202 + head[0x201] - HDR_OFFSET;
	if (hdr_len > sizeof(h))
		hdr_len = sizeof(h);
	if (hdr_len < offsetof(struct setup_header, init_size) + sizeof(h.init_size))
		REFUSE("boot header shorter than its protocol version requires");

	sects = h.setup_sects ? h.setup_sects : 4;
	k->setup_size = (uint64_t)(sects + 1) * 512;
	if (k->setup_size > head_len || k->setup_size >= file_size)
		REFUSE("truncated: the file ends inside the setup code");
	k->kernel_size = file_size - k->setup_size;
	/* syssize counts 16-byte paragraphs of the protected-mode part. */
	if (h.syssize == 0 || (uint64_t)h.syssize * 16 > k->kernel_size)
		REFUSE("truncated: the file is shorter than its header says");

	if (h.kernel_alignment == 0 || (h.kernel_alignment & (h.kernel_alignment - 1)))
		REFUSE("corrupt header: kernel alignment is not a power of two");
	if (h.pref_address < HIGH_MEM_START || h.pref_address % h.kernel_alignment)
		REFUSE("corrupt header: bad preferred load address");
	if (h.init_size < k->kernel_size || h.cmdline_size == 0)
		REFUSE("corrupt header: bad init_size or cmdline_size");
	/* Compared without a sum that could wrap. */
	if (h.pref_address >= GUEST_MMIO_GAP_START ||
	    h.init_size > GUEST_MMIO_GAP_START - h.pref_address)
		REFUSE("corrupt header: the kernel would not fit below 3 GiB");
	k->load_addr = h.pref_address;
	k->mem_needed = h.pref_address + h.init_size;
	k->entry = h.pref_address + ENTRY_64_OFFSET;
	k->seg[0] = (struct kernel_seg){.gpa = h.pref_address,
	                                .offset = k->setup_size,
	                                .filesz = k->kernel_size,
	                                .memsz = h.init_size};
	k->nr_seg = 1;

	k->hdr = h;
	k->hdr_len = hdr_len;
	return 0;
}

int bzimage_place_initrd(const struct bzimage *k, uint64_t low_ram_end, uint64_t initrd_size,
                         uint64_t *addr)
{
	uint64_t top = low_ram_end;
	uint64_t start;

	if (top > (uint64_t)k->hdr.initrd_addr_max + 1)
		top = (uint64_t)k->hdr.initrd_addr_max + 1;
	if (initrd_size == 0 || initrd_size > top)
		return -ENOMEM;
	start = (top - initrd_size) & ~(PAGE_SIZE - 1);
	if (start < k->mem_needed)
		return -ENOMEM;
	*addr = start;
	return 0;
}

static void e820_add(struct boot_params *bp, uint64_t addr, uint64_t size, uint32_t type)
{
	struct boot_e820_entry *e = &bp->e820_table[bp->e820_entries++];

	e->addr = addr;
	e->size = size;
	e->type = type;
}

int bzimage_e820(const struct guest_mem *mem, struct boot_params *bp)
{
	uint64_t low = guest_mem_low_size(mem);

	bp->e820_entries = 0;
	/* Conventional memory, then the EBDA/BIOS hole that holds our ACPI tables. */
	e820_add(bp, 0, EBDA_START, E820_RAM);
	e820_add(bp, EBDA_START, HIGH_MEM_START - EBDA_START, E820_RESERVED);
	if (low > HIGH_MEM_START)
		e820_add(bp, HIGH_MEM_START, low - HIGH_MEM_START, E820_RAM);
	for (int i = 1; i < mem->nr_regions; i++)
		e820_add(bp, mem->regions[i].gpa, mem->regions[i].size, E820_RAM);
	return bp->e820_entries;
}

int bzimage_boot_params(const struct bzimage *k, const struct guest_mem *mem,
                        const struct boot_info *info, struct boot_params *bp)
{
	size_t len = strlen(info->cmdline);

	/* cmdline_size excludes the terminating NUL. */
	if (len > k->hdr.cmdline_size || len >= BOOT_CMDLINE_MAX)
		return -E2BIG;

	memset(bp, 0, sizeof(*bp));
	memcpy(&bp->hdr, &k->hdr, k->hdr_len);
	bp->hdr.type_of_loader = 0xff; /* undefined loader */
	bp->hdr.loadflags &= (uint8_t) ~(KASLR_FLAG | QUIET_FLAG | KEEP_SEGMENTS | CAN_USE_HEAP);
	bp->hdr.code32_start = (uint32_t)k->load_addr;
	bp->hdr.cmd_line_ptr = (uint32_t)info->cmdline_addr;
	bp->ext_cmd_line_ptr = (uint32_t)(info->cmdline_addr >> 32);
	bp->hdr.ramdisk_image = (uint32_t)info->initrd_addr;
	bp->hdr.ramdisk_size = (uint32_t)info->initrd_size;
	bp->ext_ramdisk_image = (uint32_t)(info->initrd_addr >> 32);
	bp->ext_ramdisk_size = (uint32_t)(info->initrd_size >> 32);
	bp->acpi_rsdp_addr = info->rsdp_addr;
	bzimage_e820(mem, bp);
	return 0;
}
