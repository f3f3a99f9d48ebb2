// SPDX-License-Identifier: MIT
/*
 * Minimal ACPI 6 tables (ACPI spec 6.4: 5.2.5 RSDP, 5.2.8 XSDT, 5.2.9 FADT,
 * 5.2.10 FACS, 5.2.12 MADT). Not the hardware-reduced profile: that one makes
 * Linux drop the legacy PIC and with it the ISA IRQ numbers that serial and
 * command-line virtio-mmio devices use. The fixed hardware is only the PM1a
 * event and control blocks (for S5 power-off) and the reset register; the
 * system is always in ACPI mode (no SMI command port) and raises no SCI.
 */
#include "x86/acpi.h"

#include <errno.h>
#include <string.h>

#include "x86/layout.h"

struct acpi_sdt_header {
	char signature[4];
	uint32_t length;
	uint8_t revision;
	uint8_t checksum;
	char oem_id[6];
	char oem_table_id[8];
	uint32_t oem_revision;
	char creator_id[4];
	uint32_t creator_revision;
} __attribute__((packed));

struct acpi_rsdp {
	char signature[8];
	uint8_t checksum;
	char oem_id[6];
	uint8_t revision;
	uint32_t rsdt_address;
	uint32_t length;
	uint64_t xsdt_address;
	uint8_t extended_checksum;
	uint8_t reserved[3];
} __attribute__((packed));

struct acpi_gas {
	uint8_t space_id;
	uint8_t bit_width;
	uint8_t bit_offset;
	uint8_t access_size;
	uint64_t address;
} __attribute__((packed));

struct acpi_fadt {
	struct acpi_sdt_header h;
	uint32_t firmware_ctrl;
	uint32_t dsdt;
	uint8_t reserved0;
	uint8_t preferred_pm_profile;
	uint16_t sci_int;
	uint32_t smi_cmd;
	uint8_t acpi_enable, acpi_disable, s4bios_req, pstate_cnt;
	uint32_t pm1a_evt_blk, pm1b_evt_blk, pm1a_cnt_blk, pm1b_cnt_blk;
	uint32_t pm2_cnt_blk, pm_tmr_blk, gpe0_blk, gpe1_blk;
	uint8_t pm1_evt_len, pm1_cnt_len, pm2_cnt_len, pm_tmr_len;
	uint8_t gpe0_blk_len, gpe1_blk_len, gpe1_base, cst_cnt;
	uint16_t p_lvl2_lat, p_lvl3_lat, flush_size, flush_stride;
	uint8_t duty_offset, duty_width, day_alrm, mon_alrm, century;
	uint16_t iapc_boot_arch;
	uint8_t reserved1;
	uint32_t flags;
	struct acpi_gas reset_reg;
	uint8_t reset_value;
	uint16_t arm_boot_arch;
	uint8_t minor_version;
	uint64_t x_firmware_ctrl;
	uint64_t x_dsdt;
	struct acpi_gas x_pm1a_evt_blk, x_pm1b_evt_blk, x_pm1a_cnt_blk, x_pm1b_cnt_blk;
	struct acpi_gas x_pm2_cnt_blk, x_pm_tmr_blk, x_gpe0_blk, x_gpe1_blk;
	struct acpi_gas sleep_control_reg;
	struct acpi_gas sleep_status_reg;
	uint64_t hypervisor_vendor_id;
} __attribute__((packed));

_Static_assert(sizeof(struct acpi_fadt) == 276, "FADT layout");

struct acpi_facs {
	char signature[4];
	uint32_t length;
	uint32_t hardware_signature;
	uint32_t firmware_waking_vector;
	uint32_t global_lock;
	uint32_t flags;
	uint64_t x_firmware_waking_vector;
	uint8_t version;
	uint8_t reserved[3];
	uint32_t ospm_flags;
	uint8_t reserved2[24];
} __attribute__((packed));

_Static_assert(sizeof(struct acpi_facs) == 64, "FACS layout");

struct madt_header {
	struct acpi_sdt_header h;
	uint32_t lapic_address;
	uint32_t flags;
} __attribute__((packed));

struct madt_lapic {
	uint8_t type, length, processor_uid, apic_id;
	uint32_t flags;
} __attribute__((packed));

struct madt_ioapic {
	uint8_t type, length, ioapic_id, reserved;
	uint32_t address;
	uint32_t gsi_base;
} __attribute__((packed));

struct madt_int_override {
	uint8_t type, length, bus, source;
	uint32_t gsi;
	uint16_t flags;
} __attribute__((packed));

struct madt_lapic_nmi {
	uint8_t type, length, processor_uid;
	uint16_t flags;
	uint8_t lint;
} __attribute__((packed));

#define MADT_TYPE_LAPIC 0
#define MADT_TYPE_IOAPIC 1
#define MADT_TYPE_INT_OVERRIDE 2
#define MADT_TYPE_LAPIC_NMI 4
#define MADT_LAPIC_ENABLED 1
#define MADT_PCAT_COMPAT 1
#define MADT_IRQ_ACTIVE_HIGH 0x1
#define MADT_IRQ_LEVEL 0xc

#define FADT_F_WBINVD (1U << 0)
#define FADT_F_PWR_BUTTON (1U << 4) /* 1: no fixed power button */
#define FADT_F_SLP_BUTTON (1U << 5) /* 1: no fixed sleep button */
#define FADT_F_RESET_REG_SUP (1U << 10)
#define FADT_BOOT_VGA_NOT_PRESENT (1U << 2)
#define FADT_BOOT_CMOS_RTC_NOT_PRESENT (1U << 5)
#define ACPI_SPACE_SYSTEM_IO 1
#define ACPI_ACCESS_BYTE 1
#define ACPI_ACCESS_WORD 2
#define ACPI_ACCESS_DWORD 3

/* The DSDT as iasl compiled vmm/x86/dsdt.asl: a whole table, header and checksum included. */
#include "dsdt.h"

uint8_t acpi_checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum = (uint8_t)(sum + *b++);
	return sum;
}

static void sdt_init(void *table, const char *sig, uint32_t len, uint8_t rev)
{
	struct acpi_sdt_header *h = table;

	memcpy(h->signature, sig, 4);
	h->length = len;
	h->revision = rev;
	memcpy(h->oem_id, "HUSK  ", 6);
	memcpy(h->oem_table_id, "HUSKVMM ", 8);
	h->oem_revision = 1;
	memcpy(h->creator_id, "HUSK", 4);
	h->creator_revision = 1;
}

static void sdt_seal(void *table)
{
	struct acpi_sdt_header *h = table;

	h->checksum = 0;
	h->checksum = (uint8_t)-acpi_checksum(table, h->length);
}

static struct acpi_gas io_reg(uint16_t port, uint8_t bytes)
{
	struct acpi_gas g = {
		.space_id = ACPI_SPACE_SYSTEM_IO,
		.bit_width = (uint8_t)(bytes * 8),
		.access_size = bytes == 1   ? ACPI_ACCESS_BYTE
	                       : bytes == 2 ? ACPI_ACCESS_WORD
	                                    : ACPI_ACCESS_DWORD,
		.address = port,
	};

	return g;
}

/* Hands out 16-byte aligned room in buf; NULL when full. */
static void *take(uint8_t *buf, size_t buflen, size_t *off, size_t len)
{
	void *p;

	*off = (*off + 15) & ~(size_t)15;
	if (len > buflen || *off > buflen - len)
		return NULL;
	p = buf + *off;
	*off += len;
	return p;
}

static void fill_fadt(struct acpi_fadt *f, uint64_t dsdt, uint64_t facs)
{
	sdt_init(f, "FACP", sizeof(*f), 6);
	f->minor_version = 4;
	f->firmware_ctrl = (uint32_t)facs;
	f->x_firmware_ctrl = facs;
	f->dsdt = (uint32_t)dsdt;
	f->x_dsdt = dsdt;
	f->sci_int = ACPI_SCI_IRQ;
	f->flags = FADT_F_WBINVD | FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON | FADT_F_RESET_REG_SUP;
	f->iapc_boot_arch = FADT_BOOT_VGA_NOT_PRESENT | FADT_BOOT_CMOS_RTC_NOT_PRESENT;
	f->pm1a_evt_blk = PORT_ACPI_PM1A_EVT;
	f->pm1_evt_len = PORT_ACPI_PM1A_EVT_LEN;
	f->x_pm1a_evt_blk = io_reg(PORT_ACPI_PM1A_EVT, PORT_ACPI_PM1A_EVT_LEN);
	f->pm1a_cnt_blk = PORT_ACPI_PM1A_CNT;
	f->pm1_cnt_len = PORT_ACPI_PM1A_CNT_LEN;
	f->x_pm1a_cnt_blk = io_reg(PORT_ACPI_PM1A_CNT, PORT_ACPI_PM1A_CNT_LEN);
	f->reset_reg = io_reg(PORT_ACPI_RESET, 1);
	f->reset_value = ACPI_RESET_VALUE;
	memcpy(&f->hypervisor_vendor_id, "HUSKVMM\0", 8);
	sdt_seal(f);
}

static void fill_facs(struct acpi_facs *facs)
{
	memcpy(facs->signature, "FACS", 4);
	facs->length = sizeof(*facs);
	facs->version = 2;
}

static void fill_madt(uint8_t *t, size_t len, unsigned nr_vcpus)
{
	struct madt_header *m = (struct madt_header *)t;
	uint8_t *p = t + sizeof(*m);

	sdt_init(m, "APIC", (uint32_t)len, 5);
	m->lapic_address = (uint32_t)LAPIC_ADDR;
	m->flags = MADT_PCAT_COMPAT; /* the in-kernel 8259 pair is there */
	for (unsigned i = 0; i < nr_vcpus; i++) {
		struct madt_lapic l = {MADT_TYPE_LAPIC, sizeof(l), (uint8_t)i, (uint8_t)i,
		                       MADT_LAPIC_ENABLED};

		memcpy(p, &l, sizeof(l));
		p += sizeof(l);
	}
	struct madt_ioapic io = {MADT_TYPE_IOAPIC, sizeof(io), 0, 0, (uint32_t)IOAPIC_ADDR, 0};
	memcpy(p, &io, sizeof(io));
	p += sizeof(io);
	/* The SCI is level-triggered, active high, on its ISA line. */
	struct madt_int_override sci = {
		MADT_TYPE_INT_OVERRIDE, sizeof(sci),  0,
		ACPI_SCI_IRQ,           ACPI_SCI_IRQ, MADT_IRQ_ACTIVE_HIGH | MADT_IRQ_LEVEL};
	memcpy(p, &sci, sizeof(sci));
	p += sizeof(sci);
	/* LINT1 of every processor is the NMI line, as the LAPIC setup says. */
	struct madt_lapic_nmi nmi = {MADT_TYPE_LAPIC_NMI, sizeof(nmi), 0xff, 0, 1};
	memcpy(p, &nmi, sizeof(nmi));
	sdt_seal(m);
}

long acpi_build(uint8_t *buf, size_t buflen, uint64_t base, unsigned nr_vcpus)
{
	size_t off = 0;
	size_t madt_len = sizeof(struct madt_header) + nr_vcpus * sizeof(struct madt_lapic) +
	                  sizeof(struct madt_ioapic) + sizeof(struct madt_int_override) +
	                  sizeof(struct madt_lapic_nmi);
	size_t xsdt_len = sizeof(struct acpi_sdt_header) + 2 * sizeof(uint64_t);
	struct acpi_rsdp *rsdp;
	uint8_t *xsdt, *dsdt, *madt;
	struct acpi_fadt *fadt;
	struct acpi_facs *facs;
	uint64_t entries[2];

	if (nr_vcpus < 1 || nr_vcpus > 255)
		return -EINVAL;
	memset(buf, 0, buflen);
	rsdp = take(buf, buflen, &off, sizeof(*rsdp));
	xsdt = take(buf, buflen, &off, xsdt_len);
	fadt = take(buf, buflen, &off, sizeof(*fadt));
	dsdt = take(buf, buflen, &off, sizeof(dsdt_aml));
	madt = take(buf, buflen, &off, madt_len);
	off = (off + 63) & ~(size_t)63; /* the FACS must be 64-byte aligned */
	facs = take(buf, buflen, &off, sizeof(*facs));
	if (!rsdp || !xsdt || !fadt || !dsdt || !madt || !facs)
		return -ENOSPC;

	memcpy(dsdt, dsdt_aml, sizeof(dsdt_aml));

	fill_facs(facs);
	fill_fadt(fadt, base + (uint64_t)(dsdt - buf), base + (uint64_t)((uint8_t *)facs - buf));
	fill_madt(madt, madt_len, nr_vcpus);

	sdt_init(xsdt, "XSDT", (uint32_t)xsdt_len, 1);
	entries[0] = base + (uint64_t)((uint8_t *)fadt - buf);
	entries[1] = base + (uint64_t)(madt - buf);
	memcpy(xsdt + sizeof(struct acpi_sdt_header), entries, sizeof(entries));
	sdt_seal(xsdt);

	memcpy(rsdp->signature, "RSD PTR ", 8);
	memcpy(rsdp->oem_id, "HUSK  ", 6);
	rsdp->revision = 2;
	rsdp->length = sizeof(*rsdp);
	rsdp->xsdt_address = base + (uint64_t)(xsdt - buf);
	rsdp->checksum = (uint8_t)-acpi_checksum(rsdp, 20);
	rsdp->extended_checksum = (uint8_t)-acpi_checksum(rsdp, sizeof(*rsdp));
	return (long)off;
}
