// SPDX-License-Identifier: MIT
#include "vcpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "confine.h"
#include "log.h"
#include "x86/cpu_state.h"
#include "x86/cpuid.h"

int vcpu_create(struct vm *vm, unsigned index, struct vcpu *v)
{
	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->index = index;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (v->fd < 0) {
		int e = errno;

		log_err("KVM_CREATE_VCPU %u failed: %s", index, strerror(e));
		return -e;
	}
	v->run = mmap(NULL, (size_t)vm->vcpu_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
	              0);
	if (v->run == MAP_FAILED) {
		int e = errno;

		v->run = NULL;
		close(v->fd);
		v->fd = -1;
		log_err("cannot map kvm_run of vCPU %u: %s", index, strerror(e));
		return -e;
	}
	return 0;
}

static int vcpu_ioctl(struct vcpu *v, unsigned long req, void *arg, const char *what)
{
	if (ioctl(v->fd, req, arg) < 0) {
		int e = errno;

		log_err("vCPU %u: %s failed: %s", v->index, what, strerror(e));
		return -e;
	}
	return 0;
}

int vcpu_setup_cpuid(struct vcpu *v)
{
	const struct kvm_cpuid2 *sup = v->vm->supported_cpuid;
	size_t size = sizeof(*sup) + sup->nent * sizeof(sup->entries[0]);
	struct kvm_cpuid2 *c = malloc(size);
	int ret;

	if (!c)
		return -ENOMEM;
	memcpy(c, sup, size);
	cpuid_normalize(c, v->index, v->vm->nr_vcpus, v->vm->tsc_deadline);
	ret = vcpu_ioctl(v, KVM_SET_CPUID2, c, "KVM_SET_CPUID2");
	free(c);
	return ret;
}

static int vcpu_setup_msrs(struct vcpu *v)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[CPU_STATE_MAX_MSRS];
	} m;
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = cpu_state_msrs(m.e);
	n = ioctl(v->fd, KVM_SET_MSRS, &m);
	if (n != (int)m.hdr.nmsrs) {
		log_err("vCPU %u: KVM_SET_MSRS set %d of %u MSRs (stopped at %#x)", v->index, n,
		        m.hdr.nmsrs, n >= 0 && n < (int)m.hdr.nmsrs ? m.e[n].index : 0);
		return -EINVAL;
	}
	return 0;
}

int vcpu_setup_boot(struct vcpu *v, uint64_t entry, uint64_t boot_params)
{
	struct kvm_lapic_state lapic;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_fpu fpu;
	int ret;

	ret = vcpu_setup_cpuid(v);
	if (ret)
		return ret;
	ret = vcpu_setup_msrs(v);
	if (ret)
		return ret;
	cpu_state_fpu(&fpu);
	ret = vcpu_ioctl(v, KVM_SET_FPU, &fpu, "KVM_SET_FPU");
	if (ret)
		return ret;
	ret = vcpu_ioctl(v, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC");
	if (ret)
		return ret;
	cpu_state_lapic(&lapic);
	ret = vcpu_ioctl(v, KVM_SET_LAPIC, &lapic, "KVM_SET_LAPIC");
	if (ret || v->index != 0)
		return ret;

	ret = vcpu_ioctl(v, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS");
	if (ret)
		return ret;
	cpu_state_sregs(&sregs);
	ret = vcpu_ioctl(v, KVM_SET_SREGS, &sregs, "KVM_SET_SREGS");
	if (ret)
		return ret;
	cpu_state_regs(&regs, entry, boot_params);
	return vcpu_ioctl(v, KVM_SET_REGS, &regs, "KVM_SET_REGS");
}

static unsigned long long vcpu_rip(struct vcpu *v)
{
	struct kvm_regs regs;

	return ioctl(v->fd, KVM_GET_REGS, &regs) == 0 ? regs.rip : 0;
}

static void vcpu_exit_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	int is_write = run->io.direction == KVM_EXIT_IO_OUT;

	/* String I/O (rep outsb) arrives as count back-to-back elements. */
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
		if (bus_access(&v->vm->pio, run->io.port, data, run->io.size, is_write))
			log_guest(LOG_DEBUG, "vCPU %u: %s of unclaimed port %#x", v->index,
			          is_write ? "write" : "read", run->io.port);
	}
}

static void vcpu_exit_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;

	if (run->mmio.len > sizeof(run->mmio.data))
		return;
	if (bus_access(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
	               run->mmio.is_write))
		log_guest(LOG_WARN, "vCPU %u: %s of unclaimed MMIO address %#llx", v->index,
		          run->mmio.is_write ? "write" : "read",
		          (unsigned long long)run->mmio.phys_addr);
}

static void vcpu_exit_system_event(struct vcpu *v)
{
	switch (v->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		vm_stop(v->vm, VM_EXIT_OK, "guest powered off");
		break;
	case KVM_SYSTEM_EVENT_RESET:
		vm_stop(v->vm, VM_EXIT_OK, "guest rebooted");
		break;
	case KVM_SYSTEM_EVENT_CRASH:
		vm_stop(v->vm, VM_EXIT_GUEST_CRASH, "guest reported a crash (RIP %#llx)",
		        vcpu_rip(v));
		break;
	default:
		vm_stop(v->vm, VM_EXIT_ERROR, "unknown KVM system event %u (RIP %#llx)",
		        v->run->system_event.type, vcpu_rip(v));
		break;
	}
}

/* Handles one exit; returns nonzero when the vCPU must stop. */
static int vcpu_handle_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		vcpu_exit_io(v);
		return 0;
	case KVM_EXIT_MMIO:
		vcpu_exit_mmio(v);
		return 0;
	case KVM_EXIT_INTR:
		return 0;
	case KVM_EXIT_SYSTEM_EVENT:
		vcpu_exit_system_event(v);
		return 1;
	case KVM_EXIT_SHUTDOWN:
		vm_stop(v->vm, VM_EXIT_GUEST_CRASH,
		        "vCPU %u: guest triple fault (shutdown) at RIP %#llx", v->index,
		        vcpu_rip(v));
		return 1;
	case KVM_EXIT_INTERNAL_ERROR:
		vm_stop(v->vm, VM_EXIT_GUEST_CRASH,
		        "vCPU %u: KVM internal error, suberror %u%s, at RIP %#llx", v->index,
		        run->internal.suberror,
		        run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION
		                ? " (emulation failure)"
		                : "",
		        vcpu_rip(v));
		return 1;
	case KVM_EXIT_FAIL_ENTRY:
		vm_stop(v->vm, VM_EXIT_GUEST_CRASH,
		        "vCPU %u: KVM could not enter the guest, hardware reason %#llx, at RIP "
		        "%#llx",
		        v->index, (unsigned long long)run->fail_entry.hardware_entry_failure_reason,
		        vcpu_rip(v));
		return 1;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC, which husk never runs. */
		vm_stop(v->vm, VM_EXIT_ERROR, "vCPU %u: unexpected HLT exit at RIP %#llx", v->index,
		        vcpu_rip(v));
		return 1;
	default:
		vm_stop(v->vm, VM_EXIT_ERROR, "vCPU %u: unhandled KVM exit reason %u at RIP %#llx",
		        v->index, run->exit_reason, vcpu_rip(v));
		return 1;
	}
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	/* The last exit was I/O or MMIO: KVM completes it in its next KVM_RUN. */
	bool io_pending = false;
	char name[16];

	snprintf(name, sizeof(name), "vcpu%u", v->index);
	pthread_setname_np(pthread_self(), name);
	if (confine_enter(ROLE_VCPU))
		vm_stop(v->vm, VM_EXIT_ERROR, "vCPU %u: cannot load its seccomp filter", v->index);
	while (!atomic_load(&v->vm->stopping)) {
		/*
		 * A pause parks a vCPU only between instructions. An I/O or MMIO
		 * exit is done (RIP past the instruction, a read's value in its
		 * register) only in the next KVM_RUN, so first one KVM_RUN with
		 * immediate_exit set: KVM finishes the exit, runs nothing more, and
		 * returns EINTR (or, for an access in pieces, the next piece's exit).
		 */
		if (io_pending && atomic_load(&v->vm->pause_req))
			v->run->immediate_exit = 1;
		/* After a pause, look at stopping again: the VM may have ended meanwhile. */
		else if (vm_pause_point(v->vm, v->run))
			continue;
		io_pending = false;
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_stop(v->vm, VM_EXIT_ERROR, "vCPU %u: KVM_RUN failed: %s", v->index,
			        strerror(errno));
			break;
		}
		io_pending =
			v->run->exit_reason == KVM_EXIT_IO || v->run->exit_reason == KVM_EXIT_MMIO;
		if (vcpu_handle_exit(v))
			break;
	}
	return NULL;
}

/*
 * A vCPU thread needs little stack. Keeping it well under 2 MiB also keeps
 * transparent huge pages off it, which would cost 2 MiB of RSS per vCPU.
 */
#define VCPU_STACK_SIZE (256 * 1024)

int vcpu_start(struct vcpu *v)
{
	pthread_attr_t attr;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, VCPU_STACK_SIZE);
	ret = pthread_create(&v->thread, &attr, vcpu_thread, v);
	pthread_attr_destroy(&attr);
	if (ret)
		return -ret;
	v->started = 1;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (!v->started)
		return;
	/* immediate_exit covers a kick that lands just before KVM_RUN. */
	v->run->immediate_exit = 1;
	pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

void vcpu_join(struct vcpu *v)
{
	if (v->started)
		pthread_join(v->thread, NULL);
	v->started = 0;
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, (size_t)v->vm->vcpu_mmap_size);
	v->run = NULL;
	if (v->fd > 0)
		close(v->fd);
	v->fd = -1;
}
