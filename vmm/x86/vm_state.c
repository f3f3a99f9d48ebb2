// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "log.h"
#include "vm.h"
#include "x86/state.h"

#define VM_STATE_MAGIC 0x4d565348u /* "HSVM" */
#define VM_STATE_VERSION 1

struct vm_state {
	uint32_t magic, version, size, pad;
	struct kvm_irqchip chips[3]; /* PIC master, PIC slave, IOAPIC */
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
};

static int vm_ioctl(struct vm *vm, unsigned long req, void *arg, const char *what)
{
	if (ioctl(vm->vm_fd, req, arg) < 0) {
		int e = errno;

		log_err("snapshot: %s failed: %s", what, strerror(e));
		return -e;
	}
	return 0;
}

int vm_state_save(struct vm *vm, void **blob, size_t *len)
{
	struct vm_state *s = calloc(1, sizeof(*s));
	int ret = 0;

	if (!s)
		return -ENOMEM;
	*s = (struct vm_state){
		.magic = VM_STATE_MAGIC, .version = VM_STATE_VERSION, .size = sizeof(*s)};
	for (unsigned i = 0; i < 3 && !ret; i++) {
		s->chips[i].chip_id = i;
		ret = vm_ioctl(vm, KVM_GET_IRQCHIP, &s->chips[i], "KVM_GET_IRQCHIP");
	}
	if (!ret)
		ret = vm_ioctl(vm, KVM_GET_PIT2, &s->pit, "KVM_GET_PIT2");
	/* Paused: the clock as it stood at the pause, not as it ran on while this was written. */
	if (!ret && vm->clock_parked)
		s->clock = vm->parked_clock;
	else if (!ret)
		ret = vm_ioctl(vm, KVM_GET_CLOCK, &s->clock, "KVM_GET_CLOCK");
	if (ret) {
		free(s);
		return ret;
	}
	*blob = s;
	*len = sizeof(*s);
	return 0;
}

int vm_state_restore(struct vm *vm, const void *blob, size_t len)
{
	struct vm_state s;
	int ret = 0;

	if (len != sizeof(s))
		return -EINVAL;
	memcpy(&s, blob, sizeof(s));
	if (s.magic != VM_STATE_MAGIC || s.version != VM_STATE_VERSION || s.size != sizeof(s))
		return -EINVAL;
	for (unsigned i = 0; i < 3 && !ret; i++) {
		if (s.chips[i].chip_id != i)
			return -EINVAL;
		ret = vm_ioctl(vm, KVM_SET_IRQCHIP, &s.chips[i], "KVM_SET_IRQCHIP");
	}
	if (!ret)
		ret = vm_ioctl(vm, KVM_SET_PIT2, &s.pit, "KVM_SET_PIT2");
	/* Only the clock value is ours to set; the flags describe the host it came from. */
	s.clock.flags = 0;
	if (!ret)
		ret = vm_ioctl(vm, KVM_SET_CLOCK, &s.clock, "KVM_SET_CLOCK");
	/* Set again when the vCPUs first run: it stands still while the rest is restored. */
	vm->parked_clock = s.clock;
	vm->clock_parked = !ret;
	return ret;
}

int vm_clock_parked(struct vm *vm)
{
	int ret = vm_ioctl(vm, KVM_GET_CLOCK, &vm->parked_clock, "KVM_GET_CLOCK");

	vm->clock_parked = !ret;
	return ret;
}

int vm_clock_running(struct vm *vm)
{
	if (!vm->clock_parked)
		return 0;
	vm->clock_parked = false;
	vm->parked_clock.flags = 0;
	return vm_ioctl(vm, KVM_SET_CLOCK, &vm->parked_clock, "KVM_SET_CLOCK");
}

/*
 * A guest whose devices' interrupts are raised and never taken shows here
 * whether the IOAPIC holds them: a level-triggered pin whose EOI never came
 * keeps remote IRR set and delivers nothing more. KVM_GET_IRQCHIP takes no
 * vCPU's lock: this part comes even when the vCPUs do not park.
 */
void vm_state_dump(struct vm *vm)
{
	struct kvm_irqchip c = {.chip_id = KVM_IRQCHIP_IOAPIC};

	if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &c) < 0) {
		log_warn("ioapic: KVM_GET_IRQCHIP failed: %s", strerror(errno));
		return;
	}
	log_warn("ioapic: irr %#x", c.chip.ioapic.irr);
	for (int i = 0; i < KVM_IOAPIC_NUM_PINS; i++) {
		const struct kvm_ioapic_state *io = &c.chip.ioapic;

		if (io->redirtbl[i].fields.mask)
			continue;
		log_warn("ioapic pin %d: vector %#x, %s, remote irr %u, delivery pending %u, "
		         "dest %u",
		         i, io->redirtbl[i].fields.vector,
		         io->redirtbl[i].fields.trig_mode ? "level" : "edge",
		         io->redirtbl[i].fields.remote_irr, io->redirtbl[i].fields.delivery_status,
		         io->redirtbl[i].fields.dest_id);
	}
}
