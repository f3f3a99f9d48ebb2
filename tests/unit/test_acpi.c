// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "x86/acpi.h"
#include "x86/layout.h"

static uint8_t buf[ACPI_TABLES_SIZE];

static const uint8_t *table_at(uint64_t gpa)
{
	if (gpa < ACPI_TABLES_ADDR || gpa >= ACPI_TABLES_ADDR + sizeof(buf))
		return NULL;
	return buf + (gpa - ACPI_TABLES_ADDR);
}

static uint32_t u32_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* Follows RSDP -> XSDT -> FADT/MADT -> DSDT, checking every checksum. */
static void check_tables(unsigned nr_vcpus)
{
	long len = acpi_build(buf, sizeof(buf), ACPI_TABLES_ADDR, nr_vcpus);
	const uint8_t *xsdt, *fadt = NULL, *madt = NULL, *dsdt, *facs;
	unsigned lapics = 0;

	CHECK(len > 0 && len <= (long)sizeof(buf));
	CHECK(memcmp(buf, "RSD PTR ", 8) == 0);
	CHECK(acpi_checksum(buf, 20) == 0);
	CHECK(acpi_checksum(buf, 36) == 0);
	CHECK(buf[15] == 2);
	xsdt = table_at(u64_at(buf + 24));
	CHECK(xsdt && memcmp(xsdt, "XSDT", 4) == 0);
	CHECK(acpi_checksum(xsdt, u32_at(xsdt + 4)) == 0);
	for (uint32_t off = 36; off < u32_at(xsdt + 4); off += 8) {
		const uint8_t *t = table_at(u64_at(xsdt + off));

		CHECK(t != NULL);
		CHECK(acpi_checksum(t, u32_at(t + 4)) == 0);
		if (!memcmp(t, "FACP", 4))
			fadt = t;
		if (!memcmp(t, "APIC", 4))
			madt = t;
	}
	CHECK(fadt && madt);
	CHECK(u32_at(fadt + 4) == 276);
	CHECK(!(u32_at(fadt + 112) & (1U << 20)));           /* not HW_REDUCED: keeps the PIC */
	CHECK(u32_at(fadt + 64) == PORT_ACPI_PM1A_CNT);      /* PM1a control block */
	CHECK(u64_at(fadt + 172 + 4) == PORT_ACPI_PM1A_CNT); /* X_PM1a_CNT_BLK */
	CHECK(u32_at(fadt + 56) == PORT_ACPI_PM1A_EVT && fadt[88] == 4 && fadt[89] == 2);
	CHECK(u32_at(fadt + 48) == 0); /* no SMI command port: always in ACPI mode */
	facs = table_at(u64_at(fadt + 132));
	CHECK(facs && memcmp(facs, "FACS", 4) == 0 && u32_at(facs + 4) == 64);
	CHECK(u64_at(fadt + 132) % 64 == 0);
	CHECK(u32_at(fadt + 36) == u64_at(fadt + 132));
	CHECK(u64_at(fadt + 116 + 4) == PORT_ACPI_RESET && fadt[128] == ACPI_RESET_VALUE);
	dsdt = table_at(u64_at(fadt + 140));
	CHECK(dsdt && memcmp(dsdt, "DSDT", 4) == 0);
	CHECK(u32_at(fadt + 40) == u64_at(fadt + 140));
	CHECK(acpi_checksum(dsdt, u32_at(dsdt + 4)) == 0);
	CHECK(memmem(dsdt + 36, u32_at(dsdt + 4) - 36, "_S5_", 4) != NULL);
	/* The generation id device, matched by its compatible id, and the event device. */
	CHECK(memmem(dsdt + 36, u32_at(dsdt + 4) - 36, "VM_GEN_COUNTER", 14) != NULL);
	CHECK(memmem(dsdt + 36, u32_at(dsdt + 4) - 36, "ACPI0013", 8) != NULL);
	CHECK(u32_at(madt + 36) == LAPIC_ADDR);
	CHECK(u32_at(madt + 40) & 1); /* PCAT_COMPAT: legacy PIC present */
	for (uint32_t off = 44; off < u32_at(madt + 4); off += madt[off + 1]) {
		CHECK(madt[off + 1] >= 2);
		if (madt[off] == 0) {
			CHECK(madt[off + 3] == lapics); /* APIC ID == vCPU index */
			CHECK(u32_at(madt + off + 4) & 1);
			lapics++;
		}
		if (madt[off] == 1)
			CHECK(u32_at(madt + off + 4) == IOAPIC_ADDR);
	}
	CHECK(lapics == nr_vcpus);
}

UNIT_TEST(acpi_tables_one_cpu)
{
	check_tables(1);
}

UNIT_TEST(acpi_tables_many_cpus)
{
	check_tables(2);
	check_tables(64);
	check_tables(255);
}

UNIT_TEST(acpi_refuses_bad_input)
{
	CHECK(acpi_build(buf, sizeof(buf), ACPI_TABLES_ADDR, 0) == -EINVAL);
	CHECK(acpi_build(buf, sizeof(buf), ACPI_TABLES_ADDR, 256) == -EINVAL);
	CHECK(acpi_build(buf, 100, ACPI_TABLES_ADDR, 1) == -ENOSPC);
	CHECK(acpi_build(buf, 400, ACPI_TABLES_ADDR, 255) == -ENOSPC);
}
