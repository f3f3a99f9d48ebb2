// SPDX-License-Identifier: MIT
#include "devices/power.h"

#include <string.h>

#include "bus.h"
#include "log.h"
#include "vm.h"
#include "x86/layout.h"

#define SLP_EN 0x20
#define SLP_TYP(v) (((v) >> 2) & 7)
#define SLP_TYP_S5 5 /* what the DSDT's \_S5 package says */
#define I8042_CMD_RESET 0xfe

static void power_reset(struct vm *vm)
{
	uint16_t flag = 0;

	if (guest_mem_read(&vm->mem, BDA_RESET_FLAG_ADDR, &flag, sizeof(flag)) == 0 &&
	    flag == BDA_RESET_FLAG_WARM)
		vm_stop(vm, VM_EXIT_GUEST_CRASH, "guest kernel panicked (see the console for why)");
	else
		vm_stop(vm, VM_EXIT_OK, "guest rebooted");
}

static void acpi_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	(void)dev;
	(void)off;
	/* Sleep status reads 0: the guest never wakes, it stops. */
	memset(data, 0, len);
}

static void acpi_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct vm *vm = dev;

	(void)len;
	switch (off + PORT_ACPI_SLEEP_CTL) {
	case PORT_ACPI_SLEEP_CTL:
		if (!(data[0] & SLP_EN))
			break;
		if (SLP_TYP(data[0]) == SLP_TYP_S5)
			vm_stop(vm, VM_EXIT_OK, "guest powered off");
		else
			log_guest(LOG_WARN, "guest asked for unsupported sleep type %u",
			          SLP_TYP(data[0]));
		break;
	case PORT_ACPI_RESET:
		if (data[0] == ACPI_RESET_VALUE)
			power_reset(vm);
		break;
	default:
		break;
	}
}

static const struct bus_ops acpi_ops = {.read = acpi_read, .write = acpi_write};

static void i8042_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	(void)dev;
	(void)off;
	/* Status 0: output buffer empty, input buffer empty (ready for a command). */
	memset(data, 0, len);
}

static void i8042_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	(void)len;
	if (off == 0 && data[0] == I8042_CMD_RESET)
		power_reset(dev);
}

static const struct bus_ops i8042_ops = {.read = i8042_read, .write = i8042_write};

int power_create(struct vm *vm)
{
	int ret = bus_register(&vm->pio, PORT_ACPI_SLEEP_CTL, 3, &acpi_ops, vm);

	if (!ret)
		ret = bus_register(&vm->pio, PORT_I8042_CMD, 1, &i8042_ops, vm);
	if (ret)
		log_err("power: cannot claim its I/O ports: %s", strerror(-ret));
	return ret;
}
