// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "x86/cpuid.h"

static struct kvm_cpuid2 *make_cpuid(const char *vendor)
{
	static const struct {
		unsigned fn, idx, flags;
	} leaves[] = {
		{0, 0, 0},
		{1, 0, 0},
		{4, 0, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{4, 1, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{4, 2, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{4, 3, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{0xb, 0, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{0xb, 1, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{0xb, 2, KVM_CPUID_FLAG_SIGNIFCANT_INDEX},
		{0x80000001, 0, 0},
		{0x80000008, 0, 0},
		{0x8000000a, 0, 0},
	};
	unsigned n = sizeof(leaves) / sizeof(leaves[0]);
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

	c->nent = n;
	for (unsigned i = 0; i < n; i++) {
		c->entries[i].function = leaves[i].fn;
		c->entries[i].index = leaves[i].idx;
		c->entries[i].flags = leaves[i].flags;
		c->entries[i].eax = c->entries[i].ebx = c->entries[i].ecx = c->entries[i].edx =
			0xffffffff;
	}
	memcpy(&c->entries[0].ebx, vendor, 4);
	memcpy(&c->entries[0].edx, vendor + 4, 4);
	memcpy(&c->entries[0].ecx, vendor + 8, 4);
	c->entries[1].ecx = 1U << 5; /* leaf 1 features: VMX only, as a baseline */
	/* Leaf 4: L1d, L1i, L2, L3 (type 1/2/3 in bits 4:0, level in 7:5). */
	c->entries[2].eax = (1 << 5) | 1;
	c->entries[3].eax = (1 << 5) | 2;
	c->entries[4].eax = (2 << 5) | 3;
	c->entries[5].eax = (3 << 5) | 3;
	return c;
}

UNIT_TEST(cpuid_topology_intel)
{
	struct kvm_cpuid2 *c = make_cpuid("GenuineIntel");
	struct kvm_cpuid_entry2 *e;

	cpuid_normalize(c, 3, 4, 1);
	e = cpuid_find(c, 1, 0);
	CHECK(e && (e->ecx & (1U << 31)));
	CHECK(e->ecx & (1U << 24)); /* TSC deadline, as asked */
	CHECK((e->ebx >> 24) == 3);
	CHECK(((e->ebx >> 16) & 0xff) == 4);
	CHECK(e->edx & (1U << 28));
	e = cpuid_find(c, 4, 0);
	CHECK(e && (e->eax >> 26) == 3);
	CHECK(((e->eax >> 14) & 0xfff) == 0); /* L1 is private */
	e = cpuid_find(c, 4, 3);
	CHECK(e && ((e->eax >> 14) & 0xfff) == 3); /* L3 shared by all 4 */
	e = cpuid_find(c, 0xb, 0);
	CHECK(e && e->ebx == 1 && e->edx == 3 && ((e->ecx >> 8) & 0xff) == 1);
	e = cpuid_find(c, 0xb, 1);
	CHECK(e && e->ebx == 4 && e->eax == 2 && ((e->ecx >> 8) & 0xff) == 2);
	e = cpuid_find(c, 0xb, 2);
	CHECK(e && e->ebx == 0 && ((e->ecx >> 8) & 0xff) == 0);
	CHECK(cpuid_find(c, 0x12345, 0) == NULL);
	e = cpuid_find(c, 1, 0);
	CHECK(e && !(e->ecx & (1U << 5))); /* no VMX for the guest */
	free(c);
}

UNIT_TEST(cpuid_topology_amd)
{
	struct kvm_cpuid2 *c = make_cpuid("AuthenticAMD");
	struct kvm_cpuid_entry2 *e;

	cpuid_normalize(c, 0, 2, 0);
	e = cpuid_find(c, 0x80000008, 0);
	CHECK(e && (e->ecx & 0xff) == 1 && ((e->ecx >> 12) & 0xf) == 1);
	e = cpuid_find(c, 0x80000001, 0);
	CHECK(e && !(e->ecx & (1U << 22))); /* TOPOEXT hidden */
	CHECK(e->ecx & (1U << 1));          /* CmpLegacy */
	CHECK(!(e->ecx & (1U << 2)));       /* no SVM for the guest */
	e = cpuid_find(c, 0x8000000a, 0);
	CHECK(e && !e->eax && !e->ebx && !e->ecx && !e->edx); /* nor its features */
	e = cpuid_find(c, 4, 0);
	CHECK(e && e->eax == ((1 << 5) | 1)); /* leaf 4 left alone on AMD */
	free(c);
}

UNIT_TEST(cpuid_single_vcpu)
{
	struct kvm_cpuid2 *c = make_cpuid("AuthenticAMD");
	struct kvm_cpuid_entry2 *e;

	cpuid_normalize(c, 0, 1, 0);
	e = cpuid_find(c, 1, 0);
	CHECK(e && !(e->edx & (1U << 28)) && ((e->ebx >> 16) & 0xff) == 1);
	CHECK(!(e->ecx & (1U << 24))); /* no TSC deadline unless KVM has it */
	CHECK(e->ecx & (1U << 31));
	e = cpuid_find(c, 0x80000008, 0);
	CHECK(e && (e->ecx & 0xff) == 0);
	free(c);
}
