// SPDX-License-Identifier: MIT
#include <asm/e820.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "x86/bzimage.h"
#include "x86/layout.h"

#define MiB (1ULL << 20)
#define SETUP_SECTS 4
#define SETUP_SIZE ((SETUP_SECTS + 1) * 512)
#define PM_SIZE (64 * 1024)
#define IMAGE_SIZE (SETUP_SIZE + PM_SIZE)

/* A synthetic bzImage: a valid 2.15 header, then PM_SIZE bytes of "kernel". */
static uint8_t *make_image(void)
{
	uint8_t *img = calloc(1, IMAGE_SIZE);
	struct setup_header h;

	memset(&h, 0, sizeof(h));
	h.setup_sects = SETUP_SECTS;
	h.syssize = PM_SIZE / 16;
	h.boot_flag = 0xaa55;
	h.header = 0x53726448;
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h.kernel_alignment = 0x200000;
	h.relocatable_kernel = 1;
	h.pref_address = 0x1000000;
	h.init_size = 0x800000;
	h.cmdline_size = 2047;
	h.initrd_addr_max = 0x7fffffff;
	memcpy(img + 0x1f1, &h, sizeof(h));
	img[0x200] = 0xeb; /* jmp short over the header */
	img[0x201] = (uint8_t)(0x1f1 + sizeof(h) - 0x202);
	return img;
}

static int parse(const uint8_t *img, size_t len, struct bzimage *k)
{
	return bzimage_parse(img, len, len, k);
}

UNIT_TEST(bzimage_accepts_valid_header)
{
	uint8_t *img = make_image();
	struct bzimage k;

	CHECK(parse(img, IMAGE_SIZE, &k) == 0);
	CHECK(k.setup_size == SETUP_SIZE);
	CHECK(k.kernel_size == PM_SIZE);
	CHECK(k.load_addr == 0x1000000);
	CHECK(k.mem_needed == 0x1000000 + 0x800000);
	CHECK(k.hdr_len == sizeof(struct setup_header));
	/* One segment, entered at the 64-bit entry 0x200 into it. */
	CHECK(k.nr_seg == 1 && k.entry == 0x1000000 + 0x200);
	CHECK(k.seg[0].gpa == 0x1000000 && k.seg[0].offset == SETUP_SIZE);
	CHECK(k.seg[0].filesz == PM_SIZE);
	free(img);
}

UNIT_TEST(bzimage_rejects_truncated_files)
{
	uint8_t *img = make_image();
	struct bzimage k;

	/* Every prefix of the image is refused, and nothing reads past it. */
	for (size_t len = 0; len < IMAGE_SIZE; len += (len < 4096 ? 1 : 997)) {
		uint8_t *copy = malloc(len ? len : 1);

		memcpy(copy, img, len);
		CHECK(parse(copy, len, &k) == -EINVAL);
		CHECK(k.error != NULL);
		free(copy);
	}
	/* head shorter than the file but missing the setup sectors. */
	CHECK(bzimage_parse(img, 0x300, IMAGE_SIZE, &k) == -EINVAL);
	/* head_len larger than the file is a caller bug, refused too. */
	CHECK(bzimage_parse(img, IMAGE_SIZE, IMAGE_SIZE - 1, &k) == -EINVAL);
	free(img);
}

static int parse_with(size_t off, const void *v, size_t n)
{
	uint8_t *img = make_image();
	struct bzimage k;
	int ret;

	memcpy(img + off, v, n);
	ret = parse(img, IMAGE_SIZE, &k);
	free(img);
	return ret;
}

#define HDR(field) (0x1f1 + offsetof(struct setup_header, field))

UNIT_TEST(bzimage_rejects_corrupt_headers)
{
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	uint8_t u8;

	u16 = 0x1234;
	CHECK(parse_with(HDR(boot_flag), &u16, 2) == -EINVAL);
	u32 = 0x53726449;
	CHECK(parse_with(HDR(header), &u32, 4) == -EINVAL);
	u16 = 0x020b; /* too old for a 64-bit entry */
	CHECK(parse_with(HDR(version), &u16, 2) == -EINVAL);
	u16 = 0;
	CHECK(parse_with(HDR(xloadflags), &u16, 2) == -EINVAL);
	u8 = 0;
	CHECK(parse_with(HDR(loadflags), &u8, 1) == -EINVAL);
	u32 = (PM_SIZE / 16) + 1; /* claims more than the file has */
	CHECK(parse_with(HDR(syssize), &u32, 4) == -EINVAL);
	u32 = 0x300000; /* not a power of two */
	CHECK(parse_with(HDR(kernel_alignment), &u32, 4) == -EINVAL);
	u64 = 0x1000;
	CHECK(parse_with(HDR(pref_address), &u64, 8) == -EINVAL);
	u64 = 0xfffffffffff00000ULL; /* would wrap / land above the gap */
	CHECK(parse_with(HDR(pref_address), &u64, 8) == -EINVAL);
	u32 = 16; /* smaller than the kernel itself */
	CHECK(parse_with(HDR(init_size), &u32, 4) == -EINVAL);
	u8 = 200; /* setup sectors beyond the file */
	CHECK(parse_with(HDR(setup_sects), &u8, 1) == -EINVAL);
	u8 = 0; /* header shorter than init_size: an old kernel's jump */
	CHECK(parse_with(0x201, &u8, 1) == -EINVAL);
}

UNIT_TEST(bzimage_survives_random_corruption)
{
	uint8_t *img = make_image();
	struct bzimage k;
	unsigned seed = 12345;

	/* Whatever a flipped byte in the header does, parse returns cleanly. */
	for (int i = 0; i < 20000; i++) {
		uint8_t *copy = malloc(IMAGE_SIZE);
		int ret;

		memcpy(copy, img, IMAGE_SIZE);
		for (int j = 0; j < 4; j++) {
			seed = seed * 1103515245 + 12345;
			copy[0x1f1 + (seed >> 8) % 0x80] = (uint8_t)(seed >> 20);
		}
		ret = parse(copy, IMAGE_SIZE, &k);
		CHECK(ret == 0 || ret == -EINVAL);
		if (ret == 0) {
			CHECK(k.setup_size + k.kernel_size == IMAGE_SIZE);
			CHECK(k.mem_needed <= GUEST_MMIO_GAP_START);
		}
		free(copy);
	}
	free(img);
}

UNIT_TEST(bzimage_places_initrd_high_and_aligned)
{
	uint8_t *img = make_image();
	struct bzimage k;
	uint64_t addr;

	CHECK(parse(img, IMAGE_SIZE, &k) == 0);
	CHECK(bzimage_place_initrd(&k, 128 * MiB, 4 * MiB + 123, &addr) == 0);
	CHECK(addr % 4096 == 0);
	CHECK(addr + 4 * MiB + 123 <= 128 * MiB);
	CHECK(addr >= 128 * MiB - 5 * MiB);
	CHECK(addr >= k.mem_needed);
	/* Does not fit above the kernel's footprint (24 MiB). */
	CHECK(bzimage_place_initrd(&k, 32 * MiB, 9 * MiB, &addr) == -ENOMEM);
	CHECK(bzimage_place_initrd(&k, 32 * MiB, 0, &addr) == -ENOMEM);
	CHECK(bzimage_place_initrd(&k, 32 * MiB, UINT64_MAX, &addr) == -ENOMEM);
	/* initrd_addr_max caps the placement below RAM's end. */
	k.hdr.initrd_addr_max = 64 * MiB - 1;
	CHECK(bzimage_place_initrd(&k, 1024 * MiB, 1 * MiB, &addr) == 0);
	CHECK(addr == 63 * MiB);
	free(img);
}

UNIT_TEST(bzimage_boot_params_and_e820)
{
	uint8_t *img = make_image();
	struct boot_params *bp = calloc(1, sizeof(*bp));
	struct guest_mem m;
	struct bzimage k;
	struct boot_info info = {
		.cmdline_addr = BOOT_CMDLINE_ADDR,
		.cmdline = "console=ttyS0 quiet",
		.initrd_addr = 0x7000000,
		.initrd_size = 0x123456,
		.rsdp_addr = ACPI_TABLES_ADDR,
	};

	CHECK(parse(img, IMAGE_SIZE, &k) == 0);
	CHECK(guest_mem_init(&m, 256 * MiB) == 0);
	memset(bp, 0xa5, sizeof(*bp));
	CHECK(bzimage_boot_params(&k, &m, &info, bp) == 0);
	CHECK(bp->hdr.header == 0x53726448);
	CHECK(bp->hdr.type_of_loader == 0xff);
	CHECK(bp->hdr.cmd_line_ptr == BOOT_CMDLINE_ADDR);
	CHECK(bp->ext_cmd_line_ptr == 0);
	CHECK(bp->hdr.ramdisk_image == 0x7000000);
	CHECK(bp->hdr.ramdisk_size == 0x123456);
	CHECK(bp->acpi_rsdp_addr == ACPI_TABLES_ADDR);
	CHECK(bp->sentinel == 0); /* the rest of the zero page was cleared */
	CHECK(bp->e820_entries == 3);
	CHECK(bp->e820_table[0].addr == 0 && bp->e820_table[0].size == EBDA_START);
	CHECK(bp->e820_table[0].type == E820_RAM);
	CHECK(bp->e820_table[1].type == E820_RESERVED);
	CHECK(bp->e820_table[1].addr <= ACPI_TABLES_ADDR);
	CHECK(bp->e820_table[1].addr + bp->e820_table[1].size >=
	      ACPI_TABLES_ADDR + ACPI_TABLES_SIZE);
	CHECK(bp->e820_table[2].addr == HIGH_MEM_START);
	CHECK(bp->e820_table[2].addr + bp->e820_table[2].size == 256 * MiB);
	guest_mem_free(&m);

	/* Above 3 GiB, RAM continues after the MMIO gap. */
	CHECK(guest_mem_init(&m, 4096 * MiB) == 0);
	CHECK(bzimage_e820(&m, bp) == 4);
	CHECK(bp->e820_table[2].addr + bp->e820_table[2].size == GUEST_MMIO_GAP_START);
	CHECK(bp->e820_table[3].addr == GUEST_MMIO_GAP_END);
	CHECK(bp->e820_table[3].size == 4096 * MiB - GUEST_MMIO_GAP_START);
	guest_mem_free(&m);
	free(bp);
	free(img);
}

UNIT_TEST(bzimage_cmdline_length_limit)
{
	uint8_t *img = make_image();
	struct boot_params *bp = calloc(1, sizeof(*bp));
	char *line = malloc(4096);
	struct guest_mem m;
	struct bzimage k;
	struct boot_info info = {.cmdline_addr = BOOT_CMDLINE_ADDR, .cmdline = line};

	CHECK(parse(img, IMAGE_SIZE, &k) == 0);
	CHECK(guest_mem_init(&m, 64 * MiB) == 0);
	memset(line, 'x', 2047);
	line[2047] = '\0'; /* exactly cmdline_size: accepted */
	CHECK(bzimage_boot_params(&k, &m, &info, bp) == 0);
	memset(line, 'x', 2048);
	line[2048] = '\0';
	CHECK(bzimage_boot_params(&k, &m, &info, bp) == -E2BIG);
	guest_mem_free(&m);
	free(line);
	free(bp);
	free(img);
}
