/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_CPUID_H
#define HUSK_X86_CPUID_H

#include <linux/kvm.h>

/*
 * Adjusts a copy of KVM_GET_SUPPORTED_CPUID for one vCPU of an nr_vcpus
 * guest: the hypervisor bit, APIC IDs, and a topology of one socket with
 * nr_vcpus cores of one thread each, told consistently through leaves 1, 4,
 * 0xb, 0x1f and 0x80000008. AMD's extended topology leaf is hidden so the
 * guest uses the legacy leaves we do fill in. KVM leaves the TSC-deadline
 * timer out of its list although its in-kernel LAPIC has one; tsc_deadline
 * (KVM_CAP_TSC_DEADLINE_TIMER) adds it, which spares the guest calibrating
 * the LAPIC timer against the PIT at boot.
 */
void cpuid_normalize(struct kvm_cpuid2 *cpuid, unsigned vcpu_index, unsigned nr_vcpus,
                     int tsc_deadline);

/* The entry for function/index, or NULL. */
struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *cpuid, unsigned function, unsigned index);

#endif
