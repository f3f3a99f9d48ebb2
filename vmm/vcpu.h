/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VCPU_H
#define HUSK_VCPU_H

#include <signal.h>
#include <stdint.h>

#include "vm.h"

/* Sent to a vCPU thread to make KVM_RUN return; its handler does nothing. */
#define VCPU_KICK_SIGNAL SIGUSR1

/* Creates vCPU index (its APIC ID) and maps its kvm_run page. */
int vcpu_create(struct vm *vm, unsigned index, struct vcpu *vcpu)
	__attribute__((warn_unused_result));

/*
 * Loads boot state: CPUID, MSRs, FPU and LAPIC on every vCPU; registers and
 * long-mode segments on the boot CPU (index 0) only, since the others wait
 * for the guest's INIT/SIPI in the in-kernel LAPIC.
 */
int vcpu_setup_boot(struct vcpu *vcpu, uint64_t entry, uint64_t boot_params)
	__attribute__((warn_unused_result));

/* Loads CPUID only: what a vCPU restored from a snapshot needs before its state. */
int vcpu_setup_cpuid(struct vcpu *vcpu) __attribute__((warn_unused_result));

/* Starts the vCPU's thread, which runs the guest until the VM stops. */
int vcpu_start(struct vcpu *vcpu) __attribute__((warn_unused_result));

/* Makes a running vCPU leave KVM_RUN and see that the VM is stopping. */
void vcpu_kick(struct vcpu *vcpu);

void vcpu_join(struct vcpu *vcpu);
void vcpu_destroy(struct vcpu *vcpu);

#endif
