/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_LAYOUT_H
#define HUSK_X86_LAYOUT_H

/*
 * Where the VMM puts boot structures in guest-physical memory. Everything but
 * the kernel, the initrd and the ACPI tables lives in the first 1 MiB, in RAM
 * the guest reclaims once it has booted.
 */
#define BOOT_GDT_ADDR 0x500ULL
#define BOOT_GDT_ENTRIES 4
#define BOOT_IDT_ADDR 0x520ULL
#define BOOT_PARAMS_ADDR 0x7000ULL
#define BOOT_STACK_ADDR 0x8ff0ULL
#define BOOT_PML4_ADDR 0x9000ULL
#define BOOT_PDPT_ADDR 0xa000ULL
#define BOOT_PD_ADDR 0xb000ULL
#define BOOT_CMDLINE_ADDR 0x20000ULL
#define BOOT_CMDLINE_MAX 0x10000ULL

/* Low RAM ends where a PC's EBDA would begin; up to 1 MiB is reserved. */
#define EBDA_START 0x9fc00ULL
#define HIGH_MEM_START 0x100000ULL

/* ACPI tables live in the reserved BIOS area, as on a PC. */
#define ACPI_TABLES_ADDR 0xe0000ULL
#define ACPI_TABLES_SIZE 0x10000ULL

/*
 * The VM Generation ID's 16 bytes, in the reserved area above the tables,
 * and the GSI (an IOAPIC pin past the ISA ones) of the event device that
 * announces a new one. No ULL: dsdt.asl reads these through iasl.
 */
#define VMGENID_ADDR 0xf0000
#define VMGENID_SIZE 16
#define GED_GSI 16

/* BIOS data area word the kernel sets to 0x1234 before a warm reset. */
#define BDA_RESET_FLAG_ADDR 0x472ULL
#define BDA_RESET_FLAG_WARM 0x1234

#define IOAPIC_ADDR 0xfec00000ULL
#define LAPIC_ADDR 0xfee00000ULL
/* KVM wants three pages for the TSS and one for the EPT identity map (Intel). */
#define KVM_TSS_ADDR 0xfffbd000ULL
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000ULL

/* I/O ports */
#define PORT_COM1 0x3f8
#define PORT_COM1_IRQ 4
#define PORT_I8042_CMD 0x64
/*
 * ACPI fixed hardware (FADT): the PM1a event block (status, enable), the
 * PM1a control block (sleep type and enable) and the reset register.
 */
#define PORT_ACPI_PM1A_EVT 0x600
#define PORT_ACPI_PM1A_EVT_LEN 4
#define PORT_ACPI_PM1A_CNT 0x604
#define PORT_ACPI_PM1A_CNT_LEN 2
#define PORT_ACPI_RESET 0x608
#define ACPI_RESET_VALUE 0x1
#define ACPI_SCI_IRQ 9

#endif
