/* SPDX-License-Identifier: MIT */
#ifndef HUSK_DEVICES_POWER_H
#define HUSK_DEVICES_POWER_H

struct vm;
struct power;

/*
 * The guest's ways out: the ACPI PM1a control block and reset register the
 * FADT points at, and the i8042 reset line (port 0x64, command 0xfe) that
 * Linux tries after ACPI. Power-off and reboot stop the VM with
 * VM_EXIT_OK. A reset the kernel marks warm is a panic: the guest command
 * line carries reboot=panic_warm, so Linux writes 0x1234 to the BIOS
 * reset-flag word at 0x472 only on the panic path, and the VM stops with
 * VM_EXIT_GUEST_CRASH. Returns NULL and logs on failure.
 */
struct power *power_create(struct vm *vm);

void power_destroy(struct power *p);

#endif
