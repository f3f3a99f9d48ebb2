/* SPDX-License-Identifier: MIT */
#ifndef HUSK_X86_STATE_H
#define HUSK_X86_STATE_H

/*
 * KVM state of a paused VM as byte blobs for a snapshot (vmm/snapshot.c):
 * each function fills a malloc'd blob or loads one. The blobs are this
 * build's structs behind a small header (magic, version, sizes) that the
 * loaders check before use; the snapshot file checksums them.
 */
#include <stdbool.h>
#include <stddef.h>

struct vm;
struct vcpu;

/* One vCPU: registers, special registers, XSAVE, XCRs, LAPIC, MP state,
 * pending events, debug registers and every MSR KVM lists for saving. */
int vcpu_state_save(struct vcpu *v, void **blob, size_t *len) __attribute__((warn_unused_result));
/* Loads a blob into a vCPU whose CPUID is already set (vcpu_setup_cpuid). */
int vcpu_state_restore(struct vcpu *v, const void *blob, size_t len)
	__attribute__((warn_unused_result));

/* VM-wide: PIC master and slave, IOAPIC, PIT and the KVM clock. */
int vm_state_save(struct vm *vm, void **blob, size_t *len) __attribute__((warn_unused_result));
int vm_state_restore(struct vm *vm, const void *blob, size_t len)
	__attribute__((warn_unused_result));
/*
 * The KVM clock stands still while the vCPUs are parked, as across a
 * snapshot and its restore (QEMU's stop and cont do the same): parked takes
 * its value (a restore records the saved one), running sets it back, so the
 * guest's monotonic clock does not jump by the time it waited (a VMM held
 * for a resume, a warm VMM in its pool, the restore's own work). 0 or
 * -errno; running without a parked value does nothing.
 */
int vm_clock_parked(struct vm *vm) __attribute__((warn_unused_result));
int vm_clock_running(struct vm *vm) __attribute__((warn_unused_result));
/* The IOAPIC's unmasked pins, to the log (a state dump, vm_dump()). */
void vm_state_dump(struct vm *vm);
/*
 * A parked vCPU's registers, pending events, LAPIC state and KVM counters,
 * with read_mem the code at its RIP and its stack's top, to the log (vm_dump()).
 */
void vcpu_state_dump(struct vcpu *v, bool read_mem);

#endif
