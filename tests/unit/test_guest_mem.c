// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "unit.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

UNIT_TEST(guest_mem_rejects_bad_sizes)
{
	struct guest_mem m;

	CHECK(guest_mem_init(&m, 0) == -EINVAL);
	CHECK(guest_mem_init(&m, 1 * MiB) == -EINVAL);
	CHECK(guest_mem_init(&m, 3 * MiB) == -EINVAL);
	CHECK(guest_mem_init(&m, 1ULL << 41) == -EINVAL);
}

UNIT_TEST(gpa_ptr_edges_of_ram)
{
	struct guest_mem m;
	uint8_t *base;

	CHECK(guest_mem_init(&m, 128 * MiB) == 0);
	base = gpa_ptr(&m, 0, 1);
	CHECK(base != NULL);
	CHECK(gpa_ptr(&m, 128 * MiB - 1, 1) == base + 128 * MiB - 1);
	CHECK(gpa_ptr(&m, 0, 128 * MiB) == base);
	/* One byte past the end, or a range running over it. */
	CHECK(gpa_ptr(&m, 128 * MiB, 1) == NULL);
	CHECK(gpa_ptr(&m, 128 * MiB - 4, 8) == NULL);
	CHECK(gpa_ptr(&m, 0, 128 * MiB + 1) == NULL);
	guest_mem_free(&m);
}

UNIT_TEST(gpa_ptr_zero_length_and_overflow)
{
	struct guest_mem m;

	CHECK(guest_mem_init(&m, 64 * MiB) == 0);
	CHECK(gpa_ptr(&m, 0, 0) == NULL);
	CHECK(gpa_ptr(&m, 4096, 0) == NULL);
	/* gpa + len wraps past 2^64 back into RAM. */
	CHECK(gpa_ptr(&m, UINT64_MAX, 2) == NULL);
	CHECK(gpa_ptr(&m, UINT64_MAX - 4095, 8192) == NULL);
	CHECK(gpa_ptr(&m, 4096, UINT64_MAX) == NULL);
	CHECK(gpa_ptr(&m, UINT64_MAX, 1) == NULL);
	guest_mem_free(&m);
}

UNIT_TEST(guest_mem_splits_around_mmio_gap)
{
	struct guest_mem m;
	uint8_t *p;

	CHECK(guest_mem_init(&m, 5 * GiB) == 0);
	CHECK(m.nr_regions == 2);
	CHECK(guest_mem_low_size(&m) == GUEST_MMIO_GAP_START);
	CHECK(m.regions[1].gpa == GUEST_MMIO_GAP_END);
	CHECK(m.regions[1].size == 5 * GiB - GUEST_MMIO_GAP_START);
	/* The gap itself is not RAM, nor is a range spanning the gap. */
	CHECK(gpa_ptr(&m, GUEST_MMIO_GAP_START, 1) == NULL);
	CHECK(gpa_ptr(&m, GUEST_MMIO_GAP_START - 1, 2) == NULL);
	CHECK(gpa_ptr(&m, GUEST_MMIO_GAP_END - 1, 1) == NULL);
	p = gpa_ptr(&m, GUEST_MMIO_GAP_END, 1);
	CHECK(p == m.regions[1].host);
	CHECK(gpa_ptr(&m, GUEST_MMIO_GAP_END + m.regions[1].size - 1, 1) != NULL);
	CHECK(gpa_ptr(&m, GUEST_MMIO_GAP_END + m.regions[1].size, 1) == NULL);
	guest_mem_free(&m);
	CHECK(m.nr_regions == 0);
	CHECK(gpa_ptr(&m, 0, 1) == NULL);
}

UNIT_TEST(guest_mem_copy_helpers)
{
	struct guest_mem m;
	char buf[8];

	CHECK(guest_mem_init(&m, 32 * MiB) == 0);
	CHECK(guest_mem_write(&m, 0x1000, "husk", 5) == 0);
	CHECK(guest_mem_read(&m, 0x1000, buf, 5) == 0);
	CHECK(strcmp(buf, "husk") == 0);
	CHECK(guest_mem_write(&m, 32 * MiB - 2, "husk", 5) == -EFAULT);
	CHECK(guest_mem_read(&m, 32 * MiB, buf, 1) == -EFAULT);
	guest_mem_free(&m);
}

/* --mem's sizes: suffixes and their spellings, and what is refused. */
UNIT_TEST(guest_mem_parses_sizes)
{
	uint64_t v = 0;

	CHECK(guest_mem_parse_size("512", &v) == 0 && v == 512ULL << 20);
	CHECK(guest_mem_parse_size("256M", &v) == 0 && v == 256ULL << 20);
	CHECK(guest_mem_parse_size("1G", &v) == 0 && v == 1ULL << 30);
	CHECK(guest_mem_parse_size("2GiB", &v) == 0 && v == 2ULL << 30);
	CHECK(guest_mem_parse_size("1048576K", &v) == 0 && v == 1ULL << 30);
	CHECK(guest_mem_parse_size("64MB", &v) == 0 && v == 64ULL << 20);
	CHECK(guest_mem_parse_size("", &v) == -EINVAL);
	CHECK(guest_mem_parse_size("-1", &v) == -EINVAL);
	CHECK(guest_mem_parse_size("12T", &v) == -EINVAL);
	CHECK(guest_mem_parse_size("5Mx", &v) == -EINVAL);
	CHECK(guest_mem_parse_size("99999999999999999999", &v) == -EINVAL);
	CHECK(guest_mem_parse_size("17592186044416G", &v) == -ERANGE);
}
