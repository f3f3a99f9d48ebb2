// SPDX-License-Identifier: MIT
#include "vm.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "confine.h"
#include "kvm_stats.h"
#include "lazy_mem.h"
#include "log.h"
#include "vcpu.h"
#include "x86/layout.h"
#include "x86/state.h"

void vm_stop(struct vm *vm, enum vm_exit_status status, const char *fmt, ...)
{
	uint64_t one = 1;
	va_list ap;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&vm->stopping, &expected, 1))
		return;
	vm->exit_status = status;
	va_start(ap, fmt);
	vsnprintf(vm->exit_reason, sizeof(vm->exit_reason), fmt, ap);
	va_end(ap);
	if (write(vm->stop_fd, &one, sizeof(one)) < 0)
		log_err("cannot signal the VM to stop: %s", strerror(errno));
	/* Parked vCPUs must see it too. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

int vm_irq_line(struct vm *vm, unsigned gsi, int level)
{
	struct kvm_irq_level irq = {.irq = gsi, .level = (uint32_t)level};

	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq) < 0 ? -errno : 0;
}

/*
 * ISA IRQs nobody else uses: not 0-2 (timer, keyboard, cascade), 4 (COM1),
 * 8 (RTC), 9 (ACPI SCI) or 13 (FPU). Legacy IRQs because the guest maps
 * them at boot; a command-line virtio-mmio device cannot ask for more.
 */
static const unsigned device_irqs[] = {5, 6, 7, 10, 11, 12, 14, 15, 3};
#define DEVICE_MMIO_BASE 0xd0000000ULL

int vm_claim_device_slot(struct vm *vm, uint64_t len, uint64_t *base, unsigned *irq)
{
	unsigned i = vm->nr_device_slots;

	if (i >= sizeof(device_irqs) / sizeof(device_irqs[0]) || len > 0x10000)
		return -ENOSPC;
	*base = DEVICE_MMIO_BASE + (uint64_t)i * 0x10000;
	*irq = device_irqs[i];
	vm->nr_device_slots++;
	return 0;
}

/*
 * A vCPU's registers can be read only outside KVM_RUN; a guest that runs
 * parks at once, so a vCPU that does not within this is a finding itself.
 */
#define DUMP_PARK_MS 2000

int vm_dump_register(struct vm *vm, void (*dump)(void *dev), void *dev)
{
	if (vm->nr_dump_devs == VM_MAX_SNAP_DEVS)
		return -ENOSPC;
	vm->dump_devs[vm->nr_dump_devs++] = (struct vm_dump_dev){dump, dev};
	return 0;
}

void vm_dump(struct vm *vm, bool park)
{
	int ret = park ? vm_pause(vm, DUMP_PARK_MS) : 0;
	bool read_mem = true;
	unsigned parked;

	pthread_mutex_lock(&vm->pause_lock);
	parked = vm->parked;
	pthread_mutex_unlock(&vm->pause_lock);
	log_warn("state on request: %u vCPUs, %u parked, %s", vm->nr_vcpus, parked,
	         atomic_load(&vm->stopping) ? "stopping" : "running");
	for (unsigned i = 0; i < vm->nr_dump_devs; i++)
		vm->dump_devs[i].dump(vm->dump_devs[i].dev);
	vm_state_dump(vm);
	/* Last: what a reader of the log's tail (huskd, for a failed sandbox) sees first. */
	if (ret)
		log_warn("the vCPUs did not park for the dump within %d ms (%s): their state "
		         "is left out",
		         DUMP_PARK_MS, strerror(-ret));
	/* A lazy restore's handler may be what the guest waits for: no reads through it then. */
	if (vm->lazy)
		read_mem = !lazy_mem_dump(vm->lazy);
	for (unsigned i = 0; i < vm->nr_vcpus && !ret; i++)
		vcpu_state_dump(&vm->vcpus[i], read_mem);
	if (park && !ret)
		vm_resume(vm);
}

int vm_cmdline_add(struct vm *vm, const char *fmt, ...)
{
	char *param, *joined;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&param, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	n = asprintf(&joined, "%s%s%s", vm->device_cmdline ? vm->device_cmdline : "",
	             vm->device_cmdline ? " " : "", param);
	free(param);
	if (n < 0)
		return -ENOMEM;
	free(vm->device_cmdline);
	vm->device_cmdline = joined;
	return 0;
}

static void stop_event(void *ctx, uint32_t events)
{
	struct vm *vm = ctx;
	uint64_t v;

	(void)events;
	if (read(vm->stop_fd, &v, sizeof(v)) >= 0)
		evloop_stop(vm->loop);
}

static int vm_get_supported_cpuid(struct vm *vm)
{
	for (unsigned n = 128; n <= 4096; n *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

		if (!c)
			return -ENOMEM;
		c->nent = n;
		if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			vm->supported_cpuid = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG)
			return -errno;
	}
	return -E2BIG;
}

#define VM_IOCTL(fd, req, arg, what)                                     \
	do {                                                             \
		if (ioctl(fd, req, arg) < 0) {                           \
			ret = -errno;                                    \
			log_err("%s failed: %s", what, strerror(errno)); \
			goto err;                                        \
		}                                                        \
	} while (0)

/* Guest RAM's regions as KVM memory slots, one each, with flags. */
static int set_slots(struct vm *vm, uint32_t flags)
{
	for (int i = 0; i < vm->mem.nr_regions; i++) {
		struct kvm_userspace_memory_region r = {
			.slot = (uint32_t)i,
			.flags = flags,
			.guest_phys_addr = vm->mem.regions[i].gpa,
			.memory_size = vm->mem.regions[i].size,
			.userspace_addr = (uint64_t)(uintptr_t)vm->mem.regions[i].host,
		};

		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			int ret = -errno;

			log_err("KVM_SET_USER_MEMORY_REGION (slot %d, flags %#x) failed: %s", i,
			        flags, strerror(errno));
			return ret;
		}
	}
	return 0;
}

int vm_dirty_track(struct vm *vm)
{
	/* The record may be there already: made before the VM (vm_restore_begin()). */
	int ret = vm->mem.dirty ? 0 : guest_mem_track(&vm->mem);

	if (!ret)
		ret = set_slots(vm, KVM_MEM_LOG_DIRTY_PAGES);
	if (ret) {
		free(vm->mem.dirty);
		vm->mem.dirty = NULL;
	}
	return ret;
}

int vm_dirty_collect(struct vm *vm)
{
	if (!guest_mem_tracked(&vm->mem))
		return 0;
	for (int i = 0; i < vm->mem.nr_regions; i++) {
		uint64_t *bits = calloc(vm->mem.regions[i].size / 4096 / 64 + 1, sizeof(*bits));
		struct kvm_dirty_log log = {.slot = (uint32_t)i, .dirty_bitmap = bits};
		int ret = 0;

		if (!bits)
			ret = -ENOMEM;
		else if (ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0)
			ret = -errno;
		else
			guest_mem_mark_region(&vm->mem, i, bits);
		free(bits);
		if (ret) {
			/* Else pages the guest wrote would be missed: every page is compared. */
			vm->mem.dirty_lost = true;
			log_warn("no dirty log of slot %d (%s): pauses compare all guest memory", i,
			         strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int vm_create(struct vm *vm, int kvm_fd, const struct guest_mem *mem, unsigned nr_vcpus)
{
	struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
	uint64_t ident = KVM_IDENTITY_MAP_ADDR;
	int ret;

	memset(vm, 0, sizeof(*vm));
	vm->mem = *mem; /* from here on the VM owns guest RAM */
	vm->kvm_fd = kvm_fd;
	vm->vm_fd = -1;
	vm->mem_base.fd = -1;
	vm->pio.name = "port I/O";
	vm->mmio.name = "MMIO";
	vm->nr_vcpus = nr_vcpus;
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->stop_fd < 0) {
		ret = -errno;
		goto err;
	}
	vm->loop = evloop_create();
	if (!vm->loop) {
		ret = -ENOMEM;
		goto err;
	}
	ret = evloop_add(vm->loop, vm->stop_fd, EPOLLIN, stop_event, vm);
	if (ret)
		goto err;
	vm->vcpus = calloc(nr_vcpus, sizeof(*vm->vcpus));
	if (!vm->vcpus) {
		ret = -ENOMEM;
		goto err;
	}
	vm->vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		ret = -errno;
		log_err("KVM_CREATE_VM failed: %s", strerror(errno));
		goto err;
	}
	VM_IOCTL(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_ADDR, "KVM_SET_TSS_ADDR");
	VM_IOCTL(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &ident, "KVM_SET_IDENTITY_MAP_ADDR");
	VM_IOCTL(vm->vm_fd, KVM_CREATE_IRQCHIP, 0, "KVM_CREATE_IRQCHIP");
	/* The dummy speaker port lets KVM answer port 0x61 without exiting. */
	VM_IOCTL(vm->vm_fd, KVM_CREATE_PIT2, &pit, "KVM_CREATE_PIT2");

	ret = set_slots(vm, 0);
	if (ret)
		goto err;

	vm->vcpu_mmap_size = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->vcpu_mmap_size < (int)sizeof(struct kvm_run)) {
		ret = -EINVAL;
		log_err("KVM_GET_VCPU_MMAP_SIZE returned %d", vm->vcpu_mmap_size);
		goto err;
	}
	vm->tsc_deadline = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	ret = vm_get_supported_cpuid(vm);
	if (ret) {
		log_err("KVM_GET_SUPPORTED_CPUID failed: %s", strerror(-ret));
		goto err;
	}
	for (unsigned i = 0; i < nr_vcpus; i++) {
		ret = vcpu_create(vm, i, &vm->vcpus[i]);
		if (ret)
			goto err;
	}
	return 0;
err:
	return ret;
}

void vm_destroy(struct vm *vm)
{
	/* Nothing runs the guest any more; its RAM must outlive the lazy loader. */
	lazy_mem_destroy(vm->lazy);
	vm->lazy = NULL;
	for (unsigned i = 0; vm->vcpus && i < vm->nr_vcpus; i++)
		vcpu_destroy(&vm->vcpus[i]);
	free(vm->vcpus);
	vm->vcpus = NULL;
	free(vm->supported_cpuid);
	vm->supported_cpuid = NULL;
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	vm->vm_fd = -1;
	guest_mem_free(&vm->mem);
	if (vm->mem_base.fd >= 0)
		close(vm->mem_base.fd);
	vm->mem_base.fd = -1;
	if (vm->loop && vm->stop_fd >= 0)
		evloop_del(vm->loop, vm->stop_fd);
	evloop_destroy(vm->loop);
	vm->loop = NULL;
	if (vm->stop_fd >= 0)
		close(vm->stop_fd);
	vm->stop_fd = -1;
	free(vm->device_cmdline);
	vm->device_cmdline = NULL;
}

static void kick_handler(int sig)
{
	(void)sig;
}

int vm_run(struct vm *vm)
{
	struct sigaction sa = {.sa_handler = kick_handler};
	int ret;

	/* No SA_RESTART: the kick must make KVM_RUN return EINTR. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(VCPU_KICK_SIGNAL, &sa, NULL) < 0)
		return -errno;
	/* Before the first guest instruction; the vCPUs inherit it under their own. */
	ret = confine_enter(ROLE_MAIN);
	if (ret)
		vm_stop(vm, VM_EXIT_ERROR, "cannot load the seccomp filter: %s", strerror(-ret));
	/* A restored guest's clock starts with its vCPUs (a held guest's at its resume). */
	if (!ret && !atomic_load(&vm->pause_req) && vm_clock_running(vm))
		log_warn("the restored guest's clock jumps by the time its restore took");
	for (unsigned i = 0; i < vm->nr_vcpus && !ret; i++) {
		ret = vcpu_start(&vm->vcpus[i]);
		if (ret) {
			vm_stop(vm, VM_EXIT_ERROR, "cannot start vCPU %u: %s", i, strerror(-ret));
			break;
		}
	}
	/* Device work runs here until vm_stop(). */
	ret = evloop_run(vm->loop);
	if (ret)
		vm_stop(vm, VM_EXIT_ERROR, "device event loop failed: %s", strerror(-ret));
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_join(&vm->vcpus[i]);
	if (log_max_level >= LOG_DEBUG) {
		/* What the guest cost KVM: nested-paging faults weigh most under emulation. */
		uint64_t exits = 0, faults = 0;

		for (unsigned i = 0; i < vm->nr_vcpus; i++)
			if (kvm_stats_add(vm->vcpus[i].fd, "exits", &exits) ||
			    kvm_stats_add(vm->vcpus[i].fd, "pf_taken", &faults))
				break;
		log_debug("KVM: %llu exits, %llu guest-memory faults taken",
		          (unsigned long long)exits, (unsigned long long)faults);
	}
	return vm->exit_status;
}
