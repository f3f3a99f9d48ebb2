// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

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
