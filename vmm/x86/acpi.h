/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_ACPI_H
#define HUSK_X86_ACPI_H

#include <stddef.h>
#include <stdint.h>

/*
 * Builds ACPI tables (RSDP, XSDT, FADT, FACS, DSDT, MADT) into buf, which the
 * caller copies to guest-physical address base. They tell the guest its CPUs
 * and interrupt controllers (MADT) and give it power-off (PM1a control block
 * + \_S5) and reset (FADT reset register) through the I/O ports in layout.h.
 *
 * Returns the number of bytes used (the RSDP is at base), or -ENOSPC if
 * buflen is too small, or -EINVAL for nr_vcpus outside 1..255.
 */
long acpi_build(uint8_t *buf, size_t buflen, uint64_t base, unsigned nr_vcpus);

/* 8-bit sum of len bytes; an ACPI table is valid when its sum is 0. */
uint8_t acpi_checksum(const void *p, size_t len);

#endif
