/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_CPU_STATE_H
#define HUSK_X86_CPU_STATE_H

#include <linux/kvm.h>
#include <stdint.h>

#include "guest_mem.h"

/* Page-table entry bits used by the boot identity map. */
#define PTE_PRESENT (1ULL << 0)
#define PTE_RW (1ULL << 1)
#define PTE_PS (1ULL << 7)
#define BOOT_IDENTITY_MAP_SIZE (1ULL << 30)

#define X86_CR0_PE (1ULL << 0)
#define X86_CR0_PG (1ULL << 31)
#define X86_CR4_PAE (1ULL << 5)
#define X86_EFER_LME (1ULL << 8)
#define X86_EFER_LMA (1ULL << 10)

/*
 * Writes the boot GDT, an empty IDT and page tables that identity-map the
 * first 1 GiB with 2 MiB pages (what the 64-bit boot protocol requires to be
 * mapped: kernel, zero page, command line). Returns 0 or -EFAULT.
 */
int cpu_state_tables(const struct guest_mem *mem) __attribute__((warn_unused_result));

/* Decodes a GDT descriptor into the segment-register cache KVM wants. */
void cpu_state_segment(uint64_t desc, uint16_t selector, struct kvm_segment *seg);

/* Turns KVM's reset-state sregs into 64-bit long mode on the boot tables. */
void cpu_state_sregs(struct kvm_sregs *sregs);

/* General registers for the 64-bit entry: RIP = entry, RSI = zero page. */
void cpu_state_regs(struct kvm_regs *regs, uint64_t entry, uint64_t boot_params);

/* x87/SSE state as after FNINIT with the MXCSR reset value. */
void cpu_state_fpu(struct kvm_fpu *fpu);

/*
 * Fills msrs (room for CPU_STATE_MAX_MSRS entries) with the boot values of
 * the MSRs Linux expects a loader to have set. Returns the entry count.
 */
#define CPU_STATE_MAX_MSRS 16
unsigned cpu_state_msrs(struct kvm_msr_entry *msrs);

/* LAPIC as a PC BIOS leaves it: LINT0 ExtINT, LINT1 NMI. */
void cpu_state_lapic(struct kvm_lapic_state *lapic);

#endif
