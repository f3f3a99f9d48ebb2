// SPDX-License-Identifier: MIT
#include "x86/cpuid.h"

#include <string.h>

#define CPUID_1_ECX_VMX (1U << 5)
#define CPUID_1_ECX_TSC_DEADLINE (1U << 24)
#define CPUID_1_ECX_HYPERVISOR (1U << 31)
#define CPUID_1_EDX_HTT (1U << 28)
#define CPUID_80000001_ECX_CMP_LEGACY (1U << 1)
#define CPUID_80000001_ECX_SVM (1U << 2)
#define CPUID_80000001_ECX_TOPOEXT (1U << 22)
#define TOPO_LEVEL_SMT 1
#define TOPO_LEVEL_CORE 2

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *c, unsigned function, unsigned index)
{
	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function != function)
			continue;
		if ((e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) && e->index != index)
			continue;
		return e;
	}
	return NULL;
}

static unsigned bits_for(unsigned n)
{
	unsigned b = 0;

	while ((1U << b) < n)
		b++;
	return b;
}

static int vendor_is(const struct kvm_cpuid2 *c, const char *name)
{
	for (unsigned i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];
		char v[12];

		if (e->function != 0)
			continue;
		memcpy(v, &e->ebx, 4);
		memcpy(v + 4, &e->edx, 4);
		memcpy(v + 8, &e->ecx, 4);
		return memcmp(v, name, 12) == 0;
	}
	return 0;
}

/* Leaves 0xb and 0x1f: SMT level of width 0, core level covering all vCPUs. */
static void topology_leaf(struct kvm_cpuid_entry2 *e, unsigned apic_id, unsigned nr)
{
	e->edx = apic_id;
	switch (e->index) {
	case 0:
		e->eax = 0;
		e->ebx = 1;
		e->ecx = (TOPO_LEVEL_SMT << 8) | e->index;
		break;
	case 1:
		e->eax = bits_for(nr);
		e->ebx = nr;
		e->ecx = (TOPO_LEVEL_CORE << 8) | e->index;
		break;
	default:
		e->eax = 0;
		e->ebx = 0;
		e->ecx = e->index;
		break;
	}
}

void cpuid_normalize(struct kvm_cpuid2 *c, unsigned vcpu_index, unsigned nr, int tsc_deadline)
{
	int intel = vendor_is(c, "GenuineIntel");
	unsigned logical = nr > 255 ? 255 : nr;

	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		switch (e->function) {
		/*
		 * No virtualization inside a sandbox: nested VMX/SVM is host KVM code
		 * a guest kernel could reach (it has held host-escape bugs), and our
		 * guest kernel has no KVM to use it.
		 */
		case 1:
			e->ecx &= ~CPUID_1_ECX_VMX;
			e->ecx |= CPUID_1_ECX_HYPERVISOR;
			if (tsc_deadline)
				e->ecx |= CPUID_1_ECX_TSC_DEADLINE;
			/* APIC ID, logical CPUs per package, CLFLUSH line in 8-byte units. */
			e->ebx = (vcpu_index << 24) | (logical << 16) | (8 << 8);
			if (nr > 1)
				e->edx |= CPUID_1_EDX_HTT;
			else
				e->edx &= ~CPUID_1_EDX_HTT;
			break;
		case 4:
			if (!intel || (e->eax & 0x1f) == 0)
				break;
			/* Cores per package - 1; L1/L2 private, the last level shared. */
			e->eax &= 0x3fff;
			e->eax |= (nr - 1) << 26;
			if (((e->eax >> 5) & 7) >= 3)
				e->eax |= (nr - 1) << 14;
			break;
		case 0xb:
		case 0x1f:
			topology_leaf(e, vcpu_index, nr);
			break;
		case 0x80000001:
			e->ecx &= ~(CPUID_80000001_ECX_TOPOEXT | CPUID_80000001_ECX_SVM);
			if (nr > 1 && !intel)
				e->ecx |= CPUID_80000001_ECX_CMP_LEGACY;
			else
				e->ecx &= ~CPUID_80000001_ECX_CMP_LEGACY;
			break;
		case 0x8000000a: /* SVM revision and features: none without SVM */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		case 0x80000008:
			if (intel)
				break;
			/* ApicIdCoreIdSize and NC (cores - 1). */
			e->ecx = (e->ecx & ~0xf0ffU) | (bits_for(nr) << 12) | (nr - 1);
			break;
		default:
			break;
		}
	}
}
