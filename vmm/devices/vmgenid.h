/* SPDX-License-Identifier: MIT */
#ifndef HUSK_DEVICES_VMGENID_H
#define HUSK_DEVICES_VMGENID_H

struct vm;

/*
 * VM Generation ID (the DSDT's VGEN device, vmm/x86/dsdt.asl): 16 random
 * bytes at VMGENID_ADDR, new for every boot and every restore. A snapshot's
 * children start with the same memory, RNG state included; the new bytes
 * and the event device's interrupt make each guest's vmgenid driver reseed
 * its kernel's RNG as it comes back. 0 or -errno.
 */
int vmgenid_boot(struct vm *vm);
/* After vm_snapshot_restore(), before the vCPUs run: the IOAPIC latches the edge. */
int vmgenid_restored(struct vm *vm);

#endif
