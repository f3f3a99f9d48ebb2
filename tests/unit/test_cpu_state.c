// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "guest_mem.h"
#include "unit.h"
#include "x86/cpu_state.h"
#include "x86/layout.h"

#define MiB (1ULL << 20)

UNIT_TEST(page_tables_identity_map_first_gib)
{
	struct guest_mem m;
	uint64_t pml4[512], pdpt[512], pd[512];

	CHECK(guest_mem_init(&m, 64 * MiB) == 0);
	CHECK(cpu_state_tables(&m) == 0);
	CHECK(guest_mem_read(&m, BOOT_PML4_ADDR, pml4, sizeof(pml4)) == 0);
	CHECK(guest_mem_read(&m, BOOT_PDPT_ADDR, pdpt, sizeof(pdpt)) == 0);
	CHECK(guest_mem_read(&m, BOOT_PD_ADDR, pd, sizeof(pd)) == 0);
	CHECK(pml4[0] == (BOOT_PDPT_ADDR | PTE_PRESENT | PTE_RW));
	CHECK(pdpt[0] == (BOOT_PD_ADDR | PTE_PRESENT | PTE_RW));
	for (int i = 1; i < 512; i++) {
		CHECK(pml4[i] == 0);
		CHECK(pdpt[i] == 0);
	}
	/* Walk a few addresses through the tables: virtual == physical. */
	for (uint64_t va = 0; va < BOOT_IDENTITY_MAP_SIZE; va += 0x1234567) {
		uint64_t pde = pd[(va >> 21) & 511];

		CHECK(pde & PTE_PRESENT);
		CHECK(pde & PTE_PS);
		CHECK((pde & ~0x1fffffULL) + (va & 0x1fffff) == va);
	}
	/* Tables must not overlap the zero page, GDT or command line. */
	CHECK(BOOT_PML4_ADDR >= BOOT_PARAMS_ADDR + 4096);
	CHECK(BOOT_PD_ADDR + 4096 <= BOOT_CMDLINE_ADDR);
	guest_mem_free(&m);
}

UNIT_TEST(page_tables_need_ram)
{
	struct guest_mem m = {0};

	CHECK(cpu_state_tables(&m) == -EFAULT);
}

UNIT_TEST(gdt_segments_decode)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	cpu_state_sregs(&s);
	CHECK(s.cs.selector == 8 && s.cs.l == 1 && s.cs.db == 0 && s.cs.present == 1);
	CHECK(s.cs.type == 0xb && s.cs.s == 1 && s.cs.g == 1 && s.cs.limit == 0xffffffff);
	CHECK(s.cs.base == 0 && s.cs.dpl == 0 && !s.cs.unusable);
	CHECK(s.ds.selector == 0x10 && s.ds.type == 3 && s.ds.db == 1 && s.ds.l == 0);
	CHECK(s.ss.selector == 0x10 && s.es.selector == 0x10);
	CHECK(s.tr.selector == 0x18 && s.tr.type == 0xb && s.tr.s == 0);
	CHECK(s.gdt.base == BOOT_GDT_ADDR && s.gdt.limit == BOOT_GDT_ENTRIES * 8 - 1);
	CHECK(s.cr0 & X86_CR0_PE);
	CHECK(s.cr0 & X86_CR0_PG);
	CHECK(!(s.cr0 & (1ULL << 30))); /* caches enabled (CD clear) */
	CHECK(s.cr4 & X86_CR4_PAE);
	CHECK(s.cr3 == BOOT_PML4_ADDR);
	CHECK(s.efer == (X86_EFER_LME | X86_EFER_LMA));
}

UNIT_TEST(segment_decode_byte_granular)
{
	struct kvm_segment seg;
	/* base 0x12345678, limit 0x5ffff byte granular, 32-bit data, DPL 3 */
	uint64_t d = 0x12000000ULL << 32 | 0x345678ULL << 16 | 0x5ULL << 48 | 0xffffULL |
	             0x40f3ULL << 40;

	cpu_state_segment(d, 0x2b, &seg);
	CHECK(seg.base == 0x12345678);
	CHECK(seg.limit == 0x5ffff);
	CHECK(seg.g == 0 && seg.db == 1 && seg.dpl == 3 && seg.type == 3 && seg.present == 1);
	cpu_state_segment(0, 0, &seg);
	CHECK(seg.unusable == 1);
}

UNIT_TEST(boot_regs_and_msrs)
{
	struct kvm_msr_entry msrs[CPU_STATE_MAX_MSRS];
	struct kvm_regs r;
	unsigned n;
	int mtrr = 0;

	cpu_state_regs(&r, 0x1000200, BOOT_PARAMS_ADDR);
	CHECK(r.rip == 0x1000200 && r.rsi == BOOT_PARAMS_ADDR);
	CHECK(r.rflags == 2); /* interrupts off */
	n = cpu_state_msrs(msrs);
	CHECK(n > 0 && n <= CPU_STATE_MAX_MSRS);
	for (unsigned i = 0; i < n; i++)
		if (msrs[i].index == 0x2ff)
			mtrr = msrs[i].data == 0x806;
	CHECK(mtrr);
}
