// SPDX-License-Identifier: MIT
#include "devices/power.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "log.h"
#include "vm.h"
#include "x86/layout.h"

#define PM1_CNT_SCI_EN 0x0001
#define PM1_CNT_SLP_EN 0x2000
#define PM1_CNT_SLP_TYP(v) (((v) >> 10) & 7)
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

/*
 * PM1a event block: status (write 1 to clear) then enable. No event ever
 * fires, so status reads 0; enable keeps what the guest wrote, because ACPICA
 * reads it back to check that the hardware took it.
 */
struct power {
	struct vm *vm;
	_Atomic uint16_t pm1_enable;
};

static void acpi_evt_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	struct power *p = dev;
	uint8_t regs[PORT_ACPI_PM1A_EVT_LEN] = {0};
	uint16_t en = atomic_load(&p->pm1_enable);

	memcpy(&regs[2], &en, sizeof(en));
	memset(data, 0, len);
	if (off + len <= sizeof(regs))
		memcpy(data, &regs[off], len);
}

static void acpi_evt_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct power *p = dev;
	uint16_t v = 0;

	if (off == 2 && len <= 2) {
		memcpy(&v, data, len);
		atomic_store(&p->pm1_enable, v);
	}
}

static const struct bus_ops acpi_evt_ops = {.read = acpi_evt_read, .write = acpi_evt_write};

/* PM1a control: always in ACPI mode (SCI_EN), S5 on SLP_EN. */
static void acpi_cnt_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	uint16_t v = PM1_CNT_SCI_EN;

	(void)dev;
	memset(data, 0, len);
	if (off == 0)
		memcpy(data, &v, len < 2 ? len : 2);
}

static void acpi_cnt_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct vm *vm = ((struct power *)dev)->vm;
	uint16_t v = 0;

	if (off != 0 || len != 2)
		return;
	memcpy(&v, data, 2);
	if (!(v & PM1_CNT_SLP_EN))
		return;
	if (PM1_CNT_SLP_TYP(v) == SLP_TYP_S5)
		vm_stop(vm, VM_EXIT_OK, "guest powered off");
	else
		log_guest(LOG_WARN, "guest asked for unsupported sleep type %u",
		          PM1_CNT_SLP_TYP(v));
}

static const struct bus_ops acpi_cnt_ops = {.read = acpi_cnt_read, .write = acpi_cnt_write};

static void acpi_reset_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	(void)dev;
	(void)off;
	memset(data, 0, len);
}

static void acpi_reset_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	(void)off;
	(void)len;
	if (data[0] == ACPI_RESET_VALUE)
		power_reset(((struct power *)dev)->vm);
}

static const struct bus_ops acpi_reset_ops = {.read = acpi_reset_read, .write = acpi_reset_write};

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
		power_reset(((struct power *)dev)->vm);
}

static const struct bus_ops i8042_ops = {.read = i8042_read, .write = i8042_write};

static int power_save(void *dev, void **blob, size_t *len)
{
	struct power *p = dev;
	uint16_t *en = malloc(sizeof(*en));

	if (!en)
		return -ENOMEM;
	*en = atomic_load(&p->pm1_enable);
	*blob = en;
	*len = sizeof(*en);
	return 0;
}

static int power_restore(void *dev, const void *blob, size_t len)
{
	struct power *p = dev;
	uint16_t en;

	if (len != sizeof(en))
		return -EINVAL;
	memcpy(&en, blob, sizeof(en));
	atomic_store(&p->pm1_enable, en);
	return 0;
}

struct power *power_create(struct vm *vm)
{
	struct power *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return NULL;
	p->vm = vm;
	ret = bus_register(&vm->pio, PORT_ACPI_PM1A_EVT, PORT_ACPI_PM1A_EVT_LEN, &acpi_evt_ops, p);
	if (!ret)
		ret = bus_register(&vm->pio, PORT_ACPI_PM1A_CNT, PORT_ACPI_PM1A_CNT_LEN,
		                   &acpi_cnt_ops, p);
	if (!ret)
		ret = bus_register(&vm->pio, PORT_ACPI_RESET, 1, &acpi_reset_ops, p);
	if (!ret)
		ret = bus_register(&vm->pio, PORT_I8042_CMD, 1, &i8042_ops, p);
	if (!ret)
		ret = vm_snap_register(vm, "power", power_save, power_restore, p);
	if (ret) {
		/* Setup failed: the VM is destroyed before any vCPU runs. */
		log_err("power: cannot claim its I/O ports: %s", strerror(-ret));
		free(p);
		return NULL;
	}
	return p;
}

void power_destroy(struct power *p)
{
	free(p);
}
