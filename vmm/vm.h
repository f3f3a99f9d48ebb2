/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VM_H
#define HUSK_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus.h"
#include "evloop.h"
#include "guest_mem.h"
#include "memfile.h"
#include "snap/snapfile.h"

/* Exit statuses of husk-vmm, documented in --help. */
enum vm_exit_status {
	VM_EXIT_OK = 0,          /* guest powered off or rebooted */
	VM_EXIT_ERROR = 1,       /* the VMM failed at run time */
	VM_EXIT_USAGE = 2,       /* bad flags, bad input files, no usable KVM */
	VM_EXIT_GUEST_CRASH = 3, /* kernel panic, triple fault, KVM could not run the guest */
};

struct vcpu {
	struct vm *vm;
	unsigned index;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int started;
};

/* A device's part of a snapshot (vmm/snapshot.c): state in and out as blobs. */
struct vm_snap_dev {
	char name[32];
	int (*save)(void *dev, void **blob, size_t *len);
	int (*restore)(void *dev, const void *blob, size_t len);
	void *dev;
};
#define VM_MAX_SNAP_DEVS 16

/* A device that can log where it stands (the control socket's "dump"). */
struct vm_dump_dev {
	void (*dump)(void *dev);
	void *dev;
};

struct vm {
	int kvm_fd;
	int vm_fd;
	int vcpu_mmap_size;
	struct kvm_cpuid2 *supported_cpuid;
	int tsc_deadline; /* KVM_CAP_TSC_DEADLINE_TIMER */
	struct guest_mem mem;
	unsigned nr_vcpus;
	struct vcpu *vcpus;
	struct bus pio;
	struct bus mmio;
	struct evloop *loop; /* device work; runs on the thread in vm_run() */
	int stop_fd;         /* eventfd: readable once vm_stop() has been called */
	unsigned nr_device_slots;
	char *device_cmdline; /* what devices add to the guest command line */
	atomic_int stopping;
	/* Pausing (pause.c): vCPU threads park while pause_req is set. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	atomic_int pause_req;
	unsigned parked;
	/* The KVM clock's value when the vCPUs parked: it stands still until they run. */
	struct kvm_clock_data parked_clock;
	bool clock_parked;
	/*
	 * Called when a pause ends (resume, or a pause that failed): a device
	 * thread that left queue work while pause_req was set takes it up (the
	 * network backend; the guest may not kick again for it).
	 */
	void (*resumed)(void *ctx);
	void *resumed_ctx;
	struct vm_snap_dev snap_devs[VM_MAX_SNAP_DEVS];
	unsigned nr_snap_devs;
	struct vm_dump_dev dump_devs[VM_MAX_SNAP_DEVS];
	unsigned nr_dump_devs;
	struct lazy_mem *lazy; /* guest RAM still coming from a snapshot (lazy_mem.h) */
	bool sparse_loaded;    /* a diff's sparse chunks are in guest RAM already (vm_restore) */
	bool lazy_on_demand;   /* ... only as it is touched: nothing fills it in the background */
	bool held;             /* ... nor before vm_resume(): the guest waits for it (--held) */
	const char *mem_file;  /* a restore maps guest RAM from this memory file (memfile.h) */
	struct memfile_base mem_base; /* that file, once mapped: pauses write diffs over it */
	/* Sealed snapshots (--key-fd, the control socket's key): opens a restore, seals a save. */
	bool has_key;
	struct snap_key key;
	int exit_status;
	char exit_reason[256];
};

/*
 * Asks the VM to stop with an exit status and a one-line reason. The first
 * call wins; later calls are ignored. Safe from any thread.
 */
void vm_stop(struct vm *vm, enum vm_exit_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Creates the VM: in-kernel irqchip and PIT, the guest RAM mem (which the VM
 * owns from then on), nr_vcpus vCPUs (not yet started). Logs and returns
 * -errno on failure. Success or not, vm_destroy() releases it all, guest RAM
 * included; nothing is freed before that, so RAM stays mapped for a loader.
 */
int vm_create(struct vm *vm, int kvm_fd, const struct guest_mem *mem, unsigned nr_vcpus)
	__attribute__((warn_unused_result));

/*
 * Starts every vCPU thread and blocks until vm_stop(); then stops and joins
 * the vCPUs. Returns the exit status vm_stop() was given.
 */
int vm_run(struct vm *vm);

/* Frees everything vm_create() made; the kvm fd stays open. */
void vm_destroy(struct vm *vm);

/*
 * Hands a device its MMIO window (len bytes, in the MMIO gap) and an ISA
 * IRQ of its own. Returns 0 or -ENOSPC when the IRQs run out.
 */
int vm_claim_device_slot(struct vm *vm, uint64_t len, uint64_t *base, unsigned *irq)
	__attribute__((warn_unused_result));

/* Adds a device to what vm_dump() logs. 0 or -ENOSPC. */
int vm_dump_register(struct vm *vm, void (*dump)(void *dev), void *dev)
	__attribute__((warn_unused_result));
/*
 * Logs where the vCPUs, the IOAPIC and every registered device stand
 * (queues, connections): for a guest or host that waits on the other, the
 * facts to tell which. park: the VM runs, so the vCPUs are paused for
 * their registers and resumed after. Device thread.
 */
void vm_dump(struct vm *vm, bool park);

/* Appends a parameter to what the guest command line announces. 0 or -ENOMEM. */
int vm_cmdline_add(struct vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)))
__attribute__((warn_unused_result));

/*
 * Stops every vCPU outside KVM_RUN, with its pending I/O completed, and
 * returns once all are parked (0), or -ETIMEDOUT after timeout_ms (then
 * nothing is paused), or -ESHUTDOWN when the VM is stopping. Guest memory
 * and device state hold still for the vCPUs from then on; device threads
 * may still deliver host input. Called on the device thread.
 */
int vm_pause(struct vm *vm, int timeout_ms) __attribute__((warn_unused_result));
/* Lets parked vCPUs run again. */
void vm_resume(struct vm *vm);
/* A vCPU thread's side: parks while a pause is asked for; true if it did (pause.c). */
bool vm_pause_point(struct vm *vm, struct kvm_run *run);

/*
 * Registers a device for snapshots under a name unique in the VM (devices
 * made in the same order from the same flags get the same names on restore).
 * 0, -ENOSPC or -EEXIST.
 */
int vm_snap_register(struct vm *vm, const char *name,
                     int (*save)(void *dev, void **blob, size_t *len),
                     int (*restore)(void *dev, const void *blob, size_t len), void *dev)
	__attribute__((warn_unused_result));

/*
 * Writes a snapshot of the paused VM to path (through path.tmp and a rename:
 * a crash leaves any older file there intact): VM and vCPU state, every
 * registered device, guest RAM compressed on threads threads. With diff
 * (a VM restored over a memory file only: vm->mem_base), a diff snapshot:
 * only the pages that differ from that file's, the rest named as its base's.
 * 0 or -errno, with a sentence in err.
 */
int vm_snapshot_save(struct vm *vm, const char *path, int threads, bool diff, char *err,
                     size_t errlen) __attribute__((warn_unused_result));

/*
 * The part of a restore that needs no VM, begun on a thread of its own
 * before the VM is made (snapshot.c): the snapshot opened and its memory
 * checked against guest RAM; with a memory file, that file mapped and, for a
 * lazy restore of a diff, the diff's sparse chunks written over it (what
 * lazy_mem.h would write before the guest runs).
 */
struct vm_restore {
	const char *path, *mem_file;
	struct guest_mem *mem;
	const struct snap_key *key; /* NULL: not sealed */
	bool lazy;
	struct snap_reader *r;    /* vm_snapshot_restore() takes it */
	struct memfile_base base; /* the mapped memory file; taken too */
	bool sparse_loaded;
	int ret;
	char err[512];
	pthread_t thread;
	bool running;
};

/*
 * Starts it for the snapshot at path into mem (guest_mem_init()), before
 * vm_create() takes mem: with mem_file, mem's record of written pages is
 * made here, for the pages the thread writes. 0 or -errno (logged).
 */
int vm_restore_begin(struct vm_restore *rs, struct guest_mem *mem, const char *path,
                     const char *mem_file, const struct snap_key *key, bool lazy)
	__attribute__((warn_unused_result));
/* Waits for its thread and frees what no restore took; before guest RAM goes. */
void vm_restore_end(struct vm_restore *rs);

/*
 * Loads the snapshot rs began into a VM made (vm_create) over rs's memory,
 * with the same vCPU count and the same devices, before vm_run().
 * Everything is validated before the VM is touched where it can be. Guest
 * RAM is decompressed on threads threads before this returns, or, with
 * rs->lazy, filled on demand and in the background while the VM runs
 * (lazy_mem.h; eagerly after one warning where userfaultfd cannot be used);
 * with a memory file (vm->mem_file), mapped from it instead, a diff's own
 * pages over it (lazily too). 0 or -errno with err.
 */
int vm_snapshot_restore(struct vm *vm, struct vm_restore *rs, int threads, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Sets an interrupt line of the in-kernel irqchip (ISA IRQ / GSI). */
int vm_irq_line(struct vm *vm, unsigned gsi, int level) __attribute__((warn_unused_result));

/*
 * Diff snapshots of a VM restored over a memory file: track which pages may
 * differ from it (KVM's dirty log for the guest's and KVM's own writes,
 * guest_mem_mark() for the VMM's), so a pause reads those pages only.
 * Before the VM runs; 0 or -errno (then pauses compare every page).
 */
int vm_dirty_track(struct vm *vm) __attribute__((warn_unused_result));

/*
 * ORs KVM's dirty log into guest RAM's record; with the vCPUs stopped. 0, or
 * -errno with the record marked lost (pauses then compare every page).
 */
int vm_dirty_collect(struct vm *vm);

#endif
