// SPDX-License-Identifier: MIT
/*
 * Pausing a VM: each vCPU thread is kicked out of KVM_RUN and parks on a
 * condition variable until resumed. An I/O or MMIO exit is complete (and
 * the registers consistent) only after the next KVM_RUN, so a vCPU that was
 * handling one when the pause came re-enters KVM_RUN once with
 * immediate_exit set before it parks (vcpu.c): a parked vCPU has no
 * half-done instruction, and its registers are what a snapshot saves.
 */
#include <errno.h>
#include <time.h>

#include "lazy_mem.h"
#include "log.h"
#include "vcpu.h"
#include "vm.h"
#include "x86/state.h"

static unsigned started_vcpus(struct vm *vm)
{
	unsigned n = 0;

	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		n += vm->vcpus[i].started != 0;
	return n;
}

int vm_pause(struct vm *vm, int timeout_ms)
{
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, 1);
	pthread_mutex_unlock(&vm->pause_lock);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	pthread_mutex_lock(&vm->pause_lock);
	while (ret == 0 && vm->parked < started_vcpus(vm) && !atomic_load(&vm->stopping))
		ret = -pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &until);
	if (ret == 0 && atomic_load(&vm->stopping))
		ret = -ESHUTDOWN;
	if (ret) {
		atomic_store(&vm->pause_req, 0);
		pthread_cond_broadcast(&vm->pause_cond);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	if (ret && vm->resumed)
		vm->resumed(vm->resumed_ctx);
	if (!ret && vm_clock_parked(vm))
		log_warn("the guest's clock runs on while it is paused");
	return ret;
}

void vm_resume(struct vm *vm)
{
	/* Before any vCPU runs: it must not read the clock that ran on meanwhile. */
	if (vm_clock_running(vm))
		log_warn("the guest's clock jumps by the time it was paused");
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, 0);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	if (vm->lazy)
		lazy_mem_go(vm->lazy);
	if (vm->resumed)
		vm->resumed(vm->resumed_ctx);
}

bool vm_pause_point(struct vm *vm, struct kvm_run *run)
{
	if (!atomic_load(&vm->pause_req))
		return false;
	pthread_mutex_lock(&vm->pause_lock);
	vm->parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->parked--;
	/*
	 * The kick's immediate_exit would make every later KVM_RUN return at
	 * once; but a VM stopping keeps it, or a kick that came while we were
	 * parked would be lost and KVM_RUN would never return.
	 */
	if (!atomic_load(&vm->stopping))
		run->immediate_exit = 0;
	pthread_mutex_unlock(&vm->pause_lock);
	return true;
}
