// SPDX-License-Identifier: MIT
/*
 * The CPU state a 64-bit Linux entry expects (boot.rst, "64-bit Boot
 * Protocol"): long mode with paging on an identity map, flat __BOOT_CS /
 * __BOOT_DS segments, interrupts off, RSI pointing at the zero page.
 */
#include "x86/cpu_state.h"

#include <errno.h>
#include <string.h>

#include "x86/layout.h"

#define GDT_ENTRY(flags, base, limit)                                                       \
	((((uint64_t)(base)&0xff000000ULL) << 32) | (((uint64_t)(flags)&0xf0ffULL) << 40) | \
	 (((uint64_t)(limit)&0xf0000ULL) << 32) | (((uint64_t)(base)&0xffffffULL) << 16) |  \
	 ((uint64_t)(limit)&0xffffULL))

/* null, 64-bit code, data, 64-bit TSS: Linux's boot GDT layout. */
static const uint64_t boot_gdt[BOOT_GDT_ENTRIES] = {
	0,
	GDT_ENTRY(0xa09b, 0, 0xfffff),
	GDT_ENTRY(0xc093, 0, 0xfffff),
	GDT_ENTRY(0x808b, 0, 0xfffff),
};

#define SEL_CODE (1 * 8)
#define SEL_DATA (2 * 8)
#define SEL_TSS (3 * 8)

int cpu_state_tables(const struct guest_mem *mem)
{
	uint64_t *pml4 = gpa_ptr(mem, BOOT_PML4_ADDR, 4096);
	uint64_t *pdpt = gpa_ptr(mem, BOOT_PDPT_ADDR, 4096);
	uint64_t *pd = gpa_ptr(mem, BOOT_PD_ADDR, 4096);
	uint64_t idt = 0;

	if (!pml4 || !pdpt || !pd)
		return -EFAULT;
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT_ADDR | PTE_PRESENT | PTE_RW;
	pdpt[0] = BOOT_PD_ADDR | PTE_PRESENT | PTE_RW;
	for (uint64_t i = 0; i < 512; i++)
		pd[i] = (i << 21) | PTE_PRESENT | PTE_RW | PTE_PS;

	if (guest_mem_write(mem, BOOT_GDT_ADDR, boot_gdt, sizeof(boot_gdt)) ||
	    guest_mem_write(mem, BOOT_IDT_ADDR, &idt, sizeof(idt)))
		return -EFAULT;
	return 0;
}

void cpu_state_segment(uint64_t desc, uint16_t selector, struct kvm_segment *seg)
{
	uint32_t limit = (uint32_t)((desc & 0xffff) | ((desc >> 32) & 0xf0000));

	memset(seg, 0, sizeof(*seg));
	seg->base = ((desc >> 16) & 0xffffff) | ((desc >> 32) & 0xff000000);
	seg->g = (desc >> 55) & 1;
	seg->limit = seg->g ? (limit << 12) | 0xfff : limit;
	seg->selector = selector;
	seg->type = (desc >> 40) & 0xf;
	seg->s = (desc >> 44) & 1;
	seg->dpl = (desc >> 45) & 3;
	seg->present = (desc >> 47) & 1;
	seg->avl = (desc >> 52) & 1;
	seg->l = (desc >> 53) & 1;
	seg->db = (desc >> 54) & 1;
	seg->unusable = !seg->present;
}

void cpu_state_sregs(struct kvm_sregs *s)
{
	struct kvm_segment data;

	cpu_state_segment(boot_gdt[1], SEL_CODE, &s->cs);
	cpu_state_segment(boot_gdt[2], SEL_DATA, &data);
	s->ds = s->es = s->fs = s->gs = s->ss = data;
	cpu_state_segment(boot_gdt[3], SEL_TSS, &s->tr);

	s->gdt.base = BOOT_GDT_ADDR;
	s->gdt.limit = sizeof(boot_gdt) - 1;
	s->idt.base = BOOT_IDT_ADDR;
	s->idt.limit = sizeof(uint64_t) - 1;

	/* PE|MP|ET|NE|WP|AM|PG: caches on, as Linux itself sets CR0 later. */
	s->cr0 = 0x80050033ULL;
	s->cr3 = BOOT_PML4_ADDR;
	s->cr4 = X86_CR4_PAE;
	s->efer = X86_EFER_LME | X86_EFER_LMA;
}

void cpu_state_regs(struct kvm_regs *r, uint64_t entry, uint64_t boot_params)
{
	memset(r, 0, sizeof(*r));
	r->rflags = 0x2; /* bit 1 is always set; IF is clear */
	r->rip = entry;
	r->rsi = boot_params;
	r->rsp = BOOT_STACK_ADDR;
	r->rbp = BOOT_STACK_ADDR;
}

void cpu_state_fpu(struct kvm_fpu *fpu)
{
	memset(fpu, 0, sizeof(*fpu));
	fpu->fcw = 0x37f;
	fpu->mxcsr = 0x1f80;
}

#define MSR_IA32_TSC 0x10
#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102

#define MISC_ENABLE_FAST_STRING 1ULL
#define MTRR_ENABLE (1ULL << 11)
#define MTRR_TYPE_WB 6ULL

unsigned cpu_state_msrs(struct kvm_msr_entry *m)
{
	static const struct {
		uint32_t index;
		uint64_t data;
	} boot[] = {
		{MSR_IA32_SYSENTER_CS, 0},
		{MSR_IA32_SYSENTER_ESP, 0},
		{MSR_IA32_SYSENTER_EIP, 0},
		{MSR_STAR, 0},
		{MSR_CSTAR, 0},
		{MSR_KERNEL_GS_BASE, 0},
		{MSR_SYSCALL_MASK, 0},
		{MSR_LSTAR, 0},
		{MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING},
		/* All memory write-back: without MTRRs Linux would run uncached. */
		{MSR_MTRR_DEF_TYPE, MTRR_ENABLE | MTRR_TYPE_WB},
	};
	unsigned n = sizeof(boot) / sizeof(boot[0]);

	_Static_assert(sizeof(boot) / sizeof(boot[0]) <= CPU_STATE_MAX_MSRS, "msr room");
	for (unsigned i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		m[i].index = boot[i].index;
		m[i].data = boot[i].data;
	}
	return n;
}

#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

static void lapic_set_lvt_mode(struct kvm_lapic_state *lapic, int reg, uint32_t mode)
{
	uint32_t v;

	memcpy(&v, &lapic->regs[reg], sizeof(v));
	v = (v & ~0x700U) | (mode << 8);
	memcpy(&lapic->regs[reg], &v, sizeof(v));
}

void cpu_state_lapic(struct kvm_lapic_state *lapic)
{
	lapic_set_lvt_mode(lapic, APIC_LVT0, APIC_MODE_EXTINT);
	lapic_set_lvt_mode(lapic, APIC_LVT1, APIC_MODE_NMI);
}
