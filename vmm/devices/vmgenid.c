// SPDX-License-Identifier: MIT
#include "devices/vmgenid.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

#include "guest_mem.h"
#include "vm.h"
#include "x86/layout.h"

/* A generation id no guest has seen: every boot and every restore differs. */
static int new_generation(struct vm *vm)
{
	uint8_t fresh[VMGENID_SIZE];

	if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh))
		return errno ? -errno : -EIO;
	return guest_mem_write(&vm->mem, VMGENID_ADDR, fresh, sizeof(fresh));
}

int vmgenid_boot(struct vm *vm)
{
	return new_generation(vm);
}

int vmgenid_restored(struct vm *vm)
{
	int ret = new_generation(vm);

	/* An edge on the event device's pin; its _EVT notifies VGEN. */
	if (!ret)
		ret = vm_irq_line(vm, GED_GSI, 1);
	if (!ret)
		ret = vm_irq_line(vm, GED_GSI, 0);
	return ret;
}
