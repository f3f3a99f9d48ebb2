// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "kvm_stats.h"
#include "log.h"
#include "vcpu.h"
#include "vm.h"
#include "x86/state.h"

#define VCPU_STATE_MAGIC 0x55435348u /* "HSCU" */
#define VCPU_STATE_VERSION 1
#define MAX_MSRS 1024

struct vcpu_state {
	uint32_t magic, version, size, nmsrs;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xsave xsave;
	struct kvm_xcrs xcrs;
	struct kvm_lapic_state lapic;
	struct kvm_mp_state mp;
	struct kvm_vcpu_events events;
	struct kvm_debugregs dregs;
	struct kvm_msr_entry msrs[];
};

static int get(struct vcpu *v, unsigned long req, void *arg, const char *what)
{
	if (ioctl(v->fd, req, arg) < 0) {
		int e = errno;

		log_err("snapshot: vCPU %u: %s failed: %s", v->index, what, strerror(e));
		return -e;
	}
	return 0;
}

/* The MSRs KVM says a VMM should save (KVM_GET_MSR_INDEX_LIST); NULL if none. */
static struct kvm_msr_list *msr_index_list(int kvm_fd)
{
	struct kvm_msr_list probe = {.nmsrs = 0}, *list;

	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return NULL;
	if (probe.nmsrs == 0 || probe.nmsrs > MAX_MSRS)
		return NULL;
	list = calloc(1, sizeof(*list) + probe.nmsrs * sizeof(list->indices[0]));
	if (!list)
		return NULL;
	list->nmsrs = probe.nmsrs;
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
		free(list);
		return NULL;
	}
	return list;
}

/*
 * KVM_GET_MSRS / KVM_SET_MSRS stop at the first MSR they cannot handle and
 * return how many they did: go on after it, so that one MSR this host lacks
 * costs that MSR only. Returns how many entries were kept (moved to the front).
 */
static unsigned msrs_transfer(struct vcpu *v, unsigned long req, struct kvm_msr_entry *e,
                              unsigned n)
{
	struct kvm_msrs *m = malloc(sizeof(*m) + n * sizeof(*e));
	unsigned done = 0, kept = 0;

	if (!m)
		return 0;
	while (done < n) {
		int got;

		m->nmsrs = n - done;
		m->pad = 0;
		memcpy(m->entries, e + done, (n - done) * sizeof(*e));
		got = ioctl(v->fd, req, m);
		if (got < 0)
			got = 0;
		memmove(e + kept, m->entries, (size_t)got * sizeof(*e));
		kept += (unsigned)got;
		done += (unsigned)got;
		if (done < n) {
			log_debug("vCPU %u: MSR %#x %s", v->index, e[done].index,
			          req == KVM_GET_MSRS ? "cannot be read; left out" : "refused");
			done++;
		}
	}
	free(m);
	return kept;
}

int vcpu_state_save(struct vcpu *v, void **blob, size_t *len)
{
	struct kvm_msr_list *list = msr_index_list(v->vm->kvm_fd);
	unsigned n = list ? list->nmsrs : 0;
	size_t size = sizeof(struct vcpu_state) + n * sizeof(struct kvm_msr_entry);
	struct vcpu_state *s = calloc(1, size);
	int ret;

	if (!s) {
		free(list);
		return -ENOMEM;
	}
	s->magic = VCPU_STATE_MAGIC;
	s->version = VCPU_STATE_VERSION;
	ret = get(v, KVM_GET_REGS, &s->regs, "KVM_GET_REGS");
	if (!ret)
		ret = get(v, KVM_GET_SREGS, &s->sregs, "KVM_GET_SREGS");
	if (!ret)
		ret = get(v, KVM_GET_XSAVE, &s->xsave, "KVM_GET_XSAVE");
	if (!ret)
		ret = get(v, KVM_GET_XCRS, &s->xcrs, "KVM_GET_XCRS");
	if (!ret)
		ret = get(v, KVM_GET_LAPIC, &s->lapic, "KVM_GET_LAPIC");
	if (!ret)
		ret = get(v, KVM_GET_MP_STATE, &s->mp, "KVM_GET_MP_STATE");
	if (!ret)
		ret = get(v, KVM_GET_VCPU_EVENTS, &s->events, "KVM_GET_VCPU_EVENTS");
	if (!ret)
		ret = get(v, KVM_GET_DEBUGREGS, &s->dregs, "KVM_GET_DEBUGREGS");
	for (unsigned i = 0; i < n; i++)
		s->msrs[i].index = list->indices[i];
	free(list);
	if (ret) {
		free(s);
		return ret;
	}
	s->nmsrs = msrs_transfer(v, KVM_GET_MSRS, s->msrs, n);
	s->size = (uint32_t)(sizeof(*s) + s->nmsrs * sizeof(s->msrs[0]));
	*blob = s;
	*len = s->size;
	return 0;
}

int vcpu_state_restore(struct vcpu *v, const void *blob, size_t len)
{
	const struct vcpu_state *in = blob;
	struct vcpu_state *s;
	unsigned set;
	int ret;

	if (len < sizeof(*in) || in->magic != VCPU_STATE_MAGIC ||
	    in->version != VCPU_STATE_VERSION || in->size != len || in->nmsrs > MAX_MSRS ||
	    len != sizeof(*in) + in->nmsrs * sizeof(in->msrs[0]))
		return -EINVAL;
	/* A private copy: the ioctls take non-const structs, and blob may be unaligned. */
	s = malloc(len);
	if (!s)
		return -ENOMEM;
	memcpy(s, blob, len);
	/* Firecracker's order: MP state first, the LAPIC before the MSRs (TSC deadline). */
	ret = get(v, KVM_SET_MP_STATE, &s->mp, "KVM_SET_MP_STATE");
	if (!ret)
		ret = get(v, KVM_SET_REGS, &s->regs, "KVM_SET_REGS");
	if (!ret)
		ret = get(v, KVM_SET_SREGS, &s->sregs, "KVM_SET_SREGS");
	if (!ret)
		ret = get(v, KVM_SET_XSAVE, &s->xsave, "KVM_SET_XSAVE");
	if (!ret)
		ret = get(v, KVM_SET_XCRS, &s->xcrs, "KVM_SET_XCRS");
	if (!ret)
		ret = get(v, KVM_SET_DEBUGREGS, &s->dregs, "KVM_SET_DEBUGREGS");
	if (!ret)
		ret = get(v, KVM_SET_LAPIC, &s->lapic, "KVM_SET_LAPIC");
	if (!ret) {
		set = msrs_transfer(v, KVM_SET_MSRS, s->msrs, s->nmsrs);
		if (set < s->nmsrs)
			log_info("vCPU %u: %u of %u saved MSRs were refused by this host", v->index,
			         s->nmsrs - set, s->nmsrs);
		ret = get(v, KVM_SET_VCPU_EVENTS, &s->events, "KVM_SET_VCPU_EVENTS");
	}
	free(s);
	return ret;
}

/* LAPIC register offsets (Intel SDM vol. 3, table 11-1); each is 32 bits on a 16-byte stride. */
#define APIC_TPR 0x80
#define APIC_PPR 0xa0
#define APIC_SVR 0xf0
#define APIC_ISR 0x100
#define APIC_IRR 0x200
#define APIC_LVTT 0x320
#define APIC_TMICT 0x380
#define APIC_TMCCT 0x390
#define MSR_TSC 0x10
#define MSR_TSC_DEADLINE 0x6e0

static uint32_t apic_reg(const struct kvm_lapic_state *l, unsigned off)
{
	uint32_t v;

	memcpy(&v, l->regs + off, sizeof(v));
	return v;
}

/* The vectors set in a 256-bit LAPIC register (ISR, IRR) as "0x31 0xec", or "none". */
static void apic_vectors(const struct kvm_lapic_state *l, unsigned base, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (unsigned v = 0; v < 256 && used + 6 < len; v++)
		if (apic_reg(l, base + (v / 32) * 0x10) & (1u << (v % 32)))
			used += (size_t)snprintf(out + used, len - used, "%s%#x", used ? " " : "",
			                         v);
	if (!used)
		snprintf(out, len, "none");
}

/* Bytes of guest memory at a guest-virtual address, as hex, or why not. */
static void guest_bytes(struct vcpu *v, uint64_t gva, unsigned len, char *out, size_t outlen)
{
	struct kvm_translation t = {.linear_address = gva};
	uint8_t b[64];
	size_t used = 0;

	if (len > sizeof(b) || ioctl(v->fd, KVM_TRANSLATE, &t) < 0 || !t.valid) {
		snprintf(out, outlen, "not mapped");
		return;
	}
	/* Within the page: the next one may map elsewhere. */
	if ((t.physical_address & 4095) + len > 4096)
		len = 4096 - (unsigned)(t.physical_address & 4095);
	if (guest_mem_read(&v->vm->mem, t.physical_address, b, len)) {
		snprintf(out, outlen, "gpa %#llx outside RAM",
		         (unsigned long long)t.physical_address);
		return;
	}
	used = (size_t)snprintf(out, outlen, "(gpa %#llx)", (unsigned long long)t.physical_address);
	for (unsigned i = 0; i < len && used + 4 < outlen; i++)
		used += (size_t)snprintf(out + used, outlen - used, " %02x", b[i]);
}

/* KVM's counters for the vCPU: a second dump tells a looping vCPU from a blocked one. */
static void vcpu_counters_dump(struct vcpu *v)
{
	static const char *const names[] = {"exits",           "pf_taken",   "irq_injections",
	                                    "insn_emulation",  "halt_exits", "signal_exits",
	                                    "irq_window_exits"};
	char line[512];
	size_t used = 0;

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]) && used + 40 < sizeof(line);
	     i++) {
		uint64_t n = 0;

		if (kvm_stats_add(v->fd, names[i], &n))
			continue;
		used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s %llu",
		                         used ? ", " : "", names[i], (unsigned long long)n);
	}
	if (used)
		log_warn("vCPU %u kvm: %s", v->index, line);
}

/*
 * Where a parked vCPU stands: a guest that stopped taking its devices'
 * interrupts shows here whether it runs with them masked (RFLAGS.IF, TPR),
 * holds one in service (ISR) or has one waiting (IRR), whether its timer is
 * armed, and what it executes (the code at RIP, the top of its stack, which
 * hold the return addresses to look up in the kernel's System.map). Main
 * thread, vCPUs parked (vm_dump()); read_mem false while a lazy restore
 * still fills guest memory, whose faults this thread must not wait on.
 */
void vcpu_state_dump(struct vcpu *v, bool read_mem)
{
	struct kvm_msr_entry e[2] = {{.index = MSR_TSC}, {.index = MSR_TSC_DEADLINE}};
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events ev;
	struct kvm_sregs sregs;
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	char isr[128], irr[128], code[256], stack[256];

	if (get(v, KVM_GET_REGS, &regs, "KVM_GET_REGS") ||
	    get(v, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS") ||
	    get(v, KVM_GET_MP_STATE, &mp, "KVM_GET_MP_STATE") ||
	    get(v, KVM_GET_VCPU_EVENTS, &ev, "KVM_GET_VCPU_EVENTS") ||
	    get(v, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC"))
		return;
	if (msrs_transfer(v, KVM_GET_MSRS, e, 2) != 2)
		e[0].data = e[1].data = 0;
	log_warn("vCPU %u: rip %#llx, rsp %#llx, rflags %#llx (interrupts %s), cs %#x, cr0 %#llx, "
	         "cr2 %#llx, cr3 %#llx, efer %#llx, mp state %u, injected irq %u (vector %#x), "
	         "exception %u (vector %u), interrupt shadow %u, nmi pending %u",
	         v->index, (unsigned long long)regs.rip, (unsigned long long)regs.rsp,
	         (unsigned long long)regs.rflags, regs.rflags & 0x200 ? "on" : "off",
	         sregs.cs.selector, (unsigned long long)sregs.cr0, (unsigned long long)sregs.cr2,
	         (unsigned long long)sregs.cr3, (unsigned long long)sregs.efer, mp.mp_state,
	         ev.interrupt.injected, ev.interrupt.nr, ev.exception.injected, ev.exception.nr,
	         ev.interrupt.shadow, ev.nmi.pending);
	apic_vectors(&lapic, APIC_ISR, isr, sizeof(isr));
	apic_vectors(&lapic, APIC_IRR, irr, sizeof(irr));
	log_warn("vCPU %u lapic: svr %#x, tpr %#x, ppr %#x, isr %s, irr %s; timer lvt %#x, "
	         "initial %u, current %u, tsc %#llx, deadline %#llx",
	         v->index, apic_reg(&lapic, APIC_SVR), apic_reg(&lapic, APIC_TPR),
	         apic_reg(&lapic, APIC_PPR), isr, irr, apic_reg(&lapic, APIC_LVTT),
	         apic_reg(&lapic, APIC_TMICT), apic_reg(&lapic, APIC_TMCCT),
	         (unsigned long long)e[0].data, (unsigned long long)e[1].data);
	vcpu_counters_dump(v);
	if (!read_mem)
		return;
	guest_bytes(v, regs.rip, 16, code, sizeof(code));
	guest_bytes(v, regs.rsp, 64, stack, sizeof(stack));
	log_warn("vCPU %u: code at rip %s; stack %s", v->index, code, stack);
}
