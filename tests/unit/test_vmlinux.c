// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "x86/layout.h"
#include "x86/vmlinux.h"

#define FILE_SIZE (8ULL << 20)
#define TEXT_PADDR 0x1000000ULL

/* The shape of a 6.1 vmlinux: text, data, percpu, init+bss, a note. */
static uint8_t head[VMLINUX_HEAD_MAX];

static Elf64_Phdr *phdr(unsigned i)
{
	return (Elf64_Phdr *)(head + sizeof(Elf64_Ehdr) + i * sizeof(Elf64_Phdr));
}

static void make_head(void)
{
	Elf64_Ehdr *e = (Elf64_Ehdr *)head;
	static const Elf64_Phdr ph[] = {
		{PT_LOAD, PF_R | PF_X, 0x200000, 0, TEXT_PADDR, 0x400000, 0x400000, 0x200000},
		{PT_LOAD, PF_R | PF_W, 0x600000, 0, TEXT_PADDR + 0x400000, 0x100000, 0x100000,
	         4096},
		{PT_LOAD, PF_R | PF_W, 0x700000, 0, TEXT_PADDR + 0x500000, 0x80000, 0x300000, 4096},
		{PT_NOTE, PF_R, 0x7f0000, 0, TEXT_PADDR + 0x3ff000, 0x100, 0x100, 4},
	};

	memset(head, 0, sizeof(head));
	memcpy(e->e_ident, ELFMAG, SELFMAG);
	e->e_ident[EI_CLASS] = ELFCLASS64;
	e->e_ident[EI_DATA] = ELFDATA2LSB;
	e->e_type = ET_EXEC;
	e->e_machine = EM_X86_64;
	e->e_entry = TEXT_PADDR;
	e->e_phoff = sizeof(*e);
	e->e_phentsize = sizeof(Elf64_Phdr);
	e->e_phnum = 4;
	memcpy(phdr(0), ph, sizeof(ph));
}

UNIT_TEST(vmlinux_accepts_a_kernel_shape)
{
	struct bzimage k;

	make_head();
	CHECK(vmlinux_is_elf(head, sizeof(head)));
	CHECK(vmlinux_parse(head, sizeof(head), FILE_SIZE, &k) == 0);
	CHECK(k.nr_seg == 3);
	CHECK(k.entry == TEXT_PADDR);
	CHECK(k.load_addr == TEXT_PADDR);
	CHECK(k.mem_needed == TEXT_PADDR + 0x800000);
	CHECK(k.seg[2].offset == 0x700000 && k.seg[2].filesz == 0x80000);
	CHECK(k.seg[2].memsz == 0x300000);
	CHECK(k.kernel_size == 0x580000);
	/* The made-up header is what bzimage_boot_params() and the kernel read. */
	CHECK(k.hdr.header == 0x53726448 && k.hdr.boot_flag == 0xaa55);
	CHECK(k.hdr.cmdline_size > 0 && k.hdr.initrd_addr_max > 0);
	CHECK(k.hdr_len == sizeof(k.hdr));
}

UNIT_TEST(vmlinux_refuses_what_it_cannot_boot)
{
	struct bzimage k;
	Elf64_Ehdr *e = (Elf64_Ehdr *)head;

#define REFUSED(change)                                                             \
	do {                                                                        \
		make_head();                                                        \
		change;                                                             \
		CHECK(vmlinux_parse(head, sizeof(head), FILE_SIZE, &k) == -EINVAL); \
		CHECK(k.error != NULL);                                             \
	} while (0)
	REFUSED(head[0] = 0);
	REFUSED(e->e_ident[EI_CLASS] = ELFCLASS32);
	REFUSED(e->e_machine = EM_AARCH64);
	REFUSED(e->e_type = ET_DYN);
	REFUSED(e->e_phentsize = 32);
	REFUSED(e->e_phnum = 0);
	REFUSED(e->e_phoff = VMLINUX_HEAD_MAX - 8);
	REFUSED(e->e_phnum = 0xffff);
	/* The entry point must be in a loaded segment's file part. */
	REFUSED(e->e_entry = TEXT_PADDR + 0x500000 + 0x100000);
	REFUSED(phdr(0)->p_filesz = phdr(0)->p_memsz + 1);
	REFUSED(phdr(1)->p_offset = FILE_SIZE - 4096);
	REFUSED(phdr(1)->p_offset = UINT64_MAX - 10);
	REFUSED(phdr(0)->p_paddr = 0x1000);
	REFUSED(phdr(2)->p_paddr = GUEST_MMIO_GAP_START - 0x1000);
	REFUSED(phdr(2)->p_memsz = UINT64_MAX - 0x1000);
	REFUSED(phdr(1)->p_paddr = TEXT_PADDR + 0x300000);
	REFUSED(phdr(3)->p_type = PT_NULL);
	for (int i = 0; i < 4; i++)
		phdr(i)->p_type = PT_NOTE;
	CHECK(vmlinux_parse(head, sizeof(head), FILE_SIZE, &k) == -EINVAL);
	/* Fewer bytes than the headers need, or a head longer than the file. */
	make_head();
	CHECK(vmlinux_parse(head, 100, FILE_SIZE, &k) == -EINVAL);
	CHECK(vmlinux_parse(head, sizeof(head), 100, &k) == -EINVAL);
}

UNIT_TEST(vmlinux_survives_random_corruption)
{
	struct bzimage k;

	srand(7);
	for (int round = 0; round < 20000; round++) {
		make_head();
		for (int n = 1 + rand() % 8; n; n--)
			head[rand() % (sizeof(Elf64_Ehdr) + 4 * sizeof(Elf64_Phdr))] =
				(uint8_t)rand();
		if (vmlinux_parse(head, sizeof(head), FILE_SIZE, &k) == 0) {
			CHECK(k.nr_seg >= 1 && k.nr_seg <= KERNEL_SEGS_MAX);
			for (unsigned i = 0; i < k.nr_seg; i++) {
				CHECK(k.seg[i].gpa >= HIGH_MEM_START);
				CHECK(k.seg[i].gpa + k.seg[i].memsz <= GUEST_MMIO_GAP_START);
				CHECK(k.seg[i].offset + k.seg[i].filesz <= FILE_SIZE);
			}
			CHECK(k.mem_needed <= GUEST_MMIO_GAP_START);
		} else {
			CHECK(k.error != NULL);
		}
	}
}

/* A note: header, name padded to 4, descriptor padded to 4. */
static size_t put_note(uint8_t *at, const char *name, uint32_t type, uint32_t desc_len)
{
	Elf64_Nhdr n = {(uint32_t)strlen(name) + 1, desc_len, type};
	size_t name_len = (n.n_namesz + 3) & ~3u, off = sizeof(n);

	memcpy(at, &n, sizeof(n));
	memcpy(at + off, name, n.n_namesz);
	return off + name_len + ((desc_len + 3) & ~3u);
}

UNIT_TEST(vmlinux_wants_a_linux_note)
{
	uint8_t notes[256];
	struct bzimage k;
	size_t len;
	Elf64_Nhdr *first = (Elf64_Nhdr *)notes;

	memset(notes, 0, sizeof(notes));
	len = put_note(notes, "GNU", 3, 20);
	len += put_note(notes + len, "Xen", 18, 4);
	CHECK(vmlinux_check_notes(notes, len, &k) == -EINVAL);
	CHECK(k.error != NULL);
	len += put_note(notes + len, "Linux", 0x100, 4);
	k.error = NULL;
	CHECK(vmlinux_check_notes(notes, len, &k) == 0);
	/* Cut inside the Linux note's name, or a size that runs off the end. */
	CHECK(vmlinux_check_notes(notes, len - 8, &k) == -EINVAL);
	first->n_descsz = 0xfffffff0;
	CHECK(vmlinux_check_notes(notes, len, &k) == -EINVAL);
	first->n_descsz = 20;
	first->n_namesz = 0xffffffff;
	CHECK(vmlinux_check_notes(notes, len, &k) == -EINVAL);
	CHECK(vmlinux_check_notes(notes, 3, &k) == -EINVAL);
	CHECK(vmlinux_check_notes(notes, 0, &k) == -EINVAL);
}
