// SPDX-License-Identifier: MIT
/*
 * An uncompressed x86-64 Linux kernel (vmlinux, ELF64) loaded segment by
 * segment and entered at its 64-bit entry point, as Firecracker boots
 * guests: the guest skips copying and decompressing itself. Pure code, like
 * bzimage.c: the caller reads the file into guest memory.
 */
#include "x86/vmlinux.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

#include "x86/layout.h"

#define REFUSE(why)             \
	do {                    \
		k->error = why; \
		return -EINVAL; \
	} while (0)

/* What the decompressor would pass on from a 6.x bzImage's own header. */
#define HDR_MAGIC 0x53726448 /* "HdrS" */
#define BOOT_FLAG 0xaa55
#define HDR_VERSION 0x020f
#define KERNEL_ALIGN 0x200000
#define CMDLINE_SIZE 2047 /* x86 COMMAND_LINE_SIZE less its NUL */
#define INITRD_ADDR_MAX 0x7fffffff

int vmlinux_is_elf(const uint8_t *head, size_t head_len)
{
	return head_len >= SELFMAG && !memcmp(head, ELFMAG, SELFMAG);
}

static void synth_header(struct bzimage *k)
{
	struct setup_header *h = &k->hdr;

	memset(h, 0, sizeof(*h));
	h->boot_flag = BOOT_FLAG;
	h->header = HDR_MAGIC;
	h->version = HDR_VERSION;
	h->loadflags = LOADED_HIGH;
	h->xloadflags = XLF_KERNEL_64;
	h->kernel_alignment = KERNEL_ALIGN;
	h->pref_address = k->load_addr;
	h->init_size = (uint32_t)(k->mem_needed - k->load_addr);
	h->cmdline_size = CMDLINE_SIZE;
	h->initrd_addr_max = INITRD_ADDR_MAX;
	k->hdr_len = sizeof(*h);
}

/* One PT_LOAD: in the file, in RAM between 1 MiB and the MMIO gap, no sum wraps. */
static const char *check_segment(const Elf64_Phdr *p, uint64_t file_size)
{
	if (p->p_filesz > p->p_memsz)
		return "corrupt ELF: a segment's file size exceeds its memory size";
	if (p->p_offset > file_size || p->p_filesz > file_size - p->p_offset)
		return "truncated: a segment lies past the end of the file";
	if (p->p_paddr < HIGH_MEM_START || p->p_paddr >= GUEST_MMIO_GAP_START ||
	    p->p_memsz > GUEST_MMIO_GAP_START - p->p_paddr)
		return "a segment's physical address is outside 1 MiB..3 GiB; "
		       "is it an x86-64 Linux vmlinux?";
	return NULL;
}

int vmlinux_parse(const uint8_t *head, size_t head_len, uint64_t file_size, struct bzimage *k)
{
	Elf64_Ehdr e;
	uint64_t lo = UINT64_MAX, hi = 0;
	int entry_found = 0;

	memset(k, 0, sizeof(*k));
	if (head_len > file_size || head_len < sizeof(e) || !vmlinux_is_elf(head, head_len))
		REFUSE("not an ELF file");
	memcpy(&e, head, sizeof(e));
	if (e.e_ident[EI_CLASS] != ELFCLASS64 || e.e_ident[EI_DATA] != ELFDATA2LSB ||
	    e.e_machine != EM_X86_64)
		REFUSE("not an x86-64 ELF (a 32-bit or foreign kernel?)");
	if (e.e_type != ET_EXEC)
		REFUSE("not an executable ELF (e_type is not ET_EXEC)");
	if (e.e_phentsize != sizeof(Elf64_Phdr) || e.e_phnum == 0)
		REFUSE("corrupt ELF: no program headers");
	if (e.e_phoff > head_len || (uint64_t)e.e_phnum * sizeof(Elf64_Phdr) > head_len - e.e_phoff)
		REFUSE("the program headers lie beyond the file's first 4 KiB");

	for (unsigned i = 0; i < e.e_phnum; i++) {
		Elf64_Phdr p;
		const char *why;

		memcpy(&p, head + e.e_phoff + i * sizeof(p), sizeof(p));
		if (p.p_type == PT_NOTE && !k->note_len && p.p_offset <= file_size &&
		    p.p_filesz <= file_size - p.p_offset) {
			k->note_off = p.p_offset;
			k->note_len =
				p.p_filesz < VMLINUX_NOTES_MAX ? p.p_filesz : VMLINUX_NOTES_MAX;
		}
		if (p.p_type != PT_LOAD || p.p_memsz == 0)
			continue;
		why = check_segment(&p, file_size);
		if (why)
			REFUSE(why);
		if (k->nr_seg == KERNEL_SEGS_MAX)
			REFUSE("more loadable segments than a Linux vmlinux has");
		k->seg[k->nr_seg++] = (struct kernel_seg){.gpa = p.p_paddr,
		                                          .offset = p.p_offset,
		                                          .filesz = p.p_filesz,
		                                          .memsz = p.p_memsz};
		k->kernel_size += p.p_filesz;
		if (p.p_paddr < lo)
			lo = p.p_paddr;
		if (p.p_paddr + p.p_memsz > hi)
			hi = p.p_paddr + p.p_memsz;
		if (e.e_entry >= p.p_paddr && e.e_entry < p.p_paddr + p.p_filesz)
			entry_found = 1;
	}
	if (k->nr_seg == 0)
		REFUSE("no loadable segments");
	if (!k->note_len)
		REFUSE("no ELF notes, so not a Linux vmlinux");
	for (unsigned i = 0; i < k->nr_seg; i++)
		for (unsigned j = i + 1; j < k->nr_seg; j++)
			if (k->seg[i].gpa < k->seg[j].gpa + k->seg[j].memsz &&
			    k->seg[j].gpa < k->seg[i].gpa + k->seg[i].memsz)
				REFUSE("corrupt ELF: two segments overlap");
	if (!entry_found)
		REFUSE("the entry point is outside the loaded segments "
		       "(not a vmlinux with a physical entry point)");
	k->load_addr = lo;
	k->mem_needed = hi;
	k->entry = e.e_entry;
	synth_header(k);
	return 0;
}

#define NOTE_ALIGN(n) (((n) + 3) & ~(uint64_t)3)

int vmlinux_check_notes(const uint8_t *notes, size_t len, struct bzimage *k)
{
	size_t off = 0;

	while (len - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr n;
		uint64_t name_len, desc_len;

		memcpy(&n, notes + off, sizeof(n));
		off += sizeof(n);
		name_len = NOTE_ALIGN((uint64_t)n.n_namesz);
		desc_len = NOTE_ALIGN((uint64_t)n.n_descsz);
		if (name_len > len - off)
			break;
		if (n.n_namesz == sizeof("Linux") && !memcmp(notes + off, "Linux", sizeof("Linux")))
			return 0;
		off += name_len;
		if (desc_len > len - off)
			break;
		off += desc_len;
	}
	k->error = "no \"Linux\" ELF note: an ELF file, but not a Linux kernel";
	return -EINVAL;
}
