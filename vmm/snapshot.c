// SPDX-License-Identifier: MIT
/*
 * Snapshots of a paused VM: what KVM holds (x86/state.h), what each device
 * holds (registered blobs), and guest RAM, through the snapshot file library
 * (snap/snapfile.h, its format in snap/FORMAT.md).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lazy_mem.h"
#include "log.h"
#include "memfile.h"
#include "snap/snapfile.h"
#include "vcpu.h"
#include "vm.h"
#include "x86/state.h"

int vm_snap_register(struct vm *vm, const char *name,
                     int (*save)(void *dev, void **blob, size_t *len),
                     int (*restore)(void *dev, const void *blob, size_t len), void *dev)
{
	struct vm_snap_dev *d;

	if (vm->nr_snap_devs == VM_MAX_SNAP_DEVS || strlen(name) >= sizeof(d->name))
		return -ENOSPC;
	for (unsigned i = 0; i < vm->nr_snap_devs; i++)
		if (!strcmp(vm->snap_devs[i].name, name))
			return -EEXIST;
	d = &vm->snap_devs[vm->nr_snap_devs++];
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->save = save;
	d->restore = restore;
	d->dev = dev;
	return 0;
}

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	n = strlen(err);
	if (ret && n < errlen)
		snprintf(err + n, errlen - n, ": %s", strerror(-ret));
	return ret ? ret : -EINVAL;
}

/* Adds one blob that save() made, then frees it. */
static int add_blob(struct snap_writer *w, uint32_t type, uint32_t id, const char *name, int ret,
                    void *blob, size_t len)
{
	if (!ret)
		ret = snap_writer_add(w, type, id, name, blob, len);
	free(blob);
	return ret;
}

int vm_snapshot_save(struct vm *vm, const char *path, int threads, bool diff, char *err,
                     size_t errlen)
{
	struct snap_writer *w;
	void *blob = NULL;
	size_t len = 0;
	int ret;

	ret = snap_writer_open(path, &w);
	if (ret == -EEXIST) {
		/* Left by a writer that crashed: we are the only writer of this VM. */
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		unlink(tmp);
		ret = snap_writer_open(path, &w);
	}
	if (ret)
		return fail(err, errlen, ret, "cannot write %s", path);
	ret = vm->has_key ? snap_writer_seal(w, &vm->key) : 0;
	/* Over the memory file it was restored from: only what differs from it is written. */
	if (!ret && diff)
		ret = snap_writer_set_base(w, vm->mem_base.snap_len, vm->mem_base.snap_sum);
	if (ret) {
		snap_writer_abort(w);
		return fail(err, errlen, ret, "cannot write %s", path);
	}
	ret = vm_state_save(vm, &blob, &len);
	ret = add_blob(w, SNAP_VM, 0, "vm", ret, blob, len);
	for (unsigned i = 0; i < vm->nr_vcpus && !ret; i++) {
		blob = NULL;
		ret = vcpu_state_save(&vm->vcpus[i], &blob, &len);
		ret = add_blob(w, SNAP_VCPU, i, "vcpu", ret, blob, len);
	}
	for (unsigned i = 0; i < vm->nr_snap_devs && !ret; i++) {
		struct vm_snap_dev *d = &vm->snap_devs[i];

		blob = NULL;
		len = 0;
		ret = d->save ? d->save(d->dev, &blob, &len) : 0;
		ret = add_blob(w, SNAP_DEVICE, 0, d->name, ret, blob, len);
		if (ret)
			log_err("snapshot: device %s: %s", d->name, strerror(-ret));
	}
	log_debug("snapshot: VM, vCPU and device states written");
	/* A lazily restored diff's pages are marked as they come: all of them, first. */
	if (!ret && diff && vm->lazy && lazy_mem_wait(vm->lazy)) {
		snap_writer_abort(w);
		return fail(err, errlen, -EIO, "the restore's guest memory never all came in");
	}
	/* Failing, it leaves the record marked lost, and every page is compared. */
	if (!ret && diff)
		vm_dirty_collect(vm);
	if (!ret)
		ret = diff ? snap_writer_add_memory_diff(w, &vm->mem, vm->mem_base.fd, threads)
		           : snap_writer_add_memory(w, &vm->mem, threads);
	if (ret) {
		snap_writer_abort(w);
		return fail(err, errlen, ret, "cannot write the snapshot %s", path);
	}
	log_debug("snapshot: guest memory written");
	ret = snap_writer_commit(w);
	if (ret)
		return fail(err, errlen, ret, "cannot finish the snapshot %s", path);
	return 0;
}

/* Checks that the snapshot fits this VM before anything is loaded. */
static int check_shape(struct vm *vm, struct snap_reader *r, char *err, size_t errlen)
{
	struct snap_section_info si;
	struct snap_mem_info mi;
	unsigned vcpus = 0;

	if (snap_reader_memory_info(r, &mi))
		return fail(err, errlen, 0, "the snapshot holds no guest memory");
	if (mi.ram_size != vm->mem.ram_size)
		return fail(err, errlen, 0,
		            "the snapshot's guest has %llu MiB of memory, this VM %llu MiB: give "
		            "--mem %lluM",
		            (unsigned long long)(mi.ram_size >> 20),
		            (unsigned long long)(vm->mem.ram_size >> 20),
		            (unsigned long long)(mi.ram_size >> 20));
	for (unsigned i = 0; i < snap_reader_nr_sections(r); i++)
		if (snap_reader_section(r, i, &si) == 0 && si.type == SNAP_VCPU)
			vcpus++;
	if (vcpus != vm->nr_vcpus)
		return fail(err, errlen, 0,
		            "the snapshot's guest has %u vCPUs, this VM %u: give --vcpus %u", vcpus,
		            vm->nr_vcpus, vcpus);
	for (unsigned i = 0; i < vm->nr_snap_devs; i++) {
		void *blob;
		size_t len;
		int ret = snap_reader_get(r, SNAP_DEVICE, 0, vm->snap_devs[i].name, &blob, &len,
		                          err, errlen);

		if (ret == -ENOENT)
			return fail(err, errlen, 0,
			            "the snapshot has no device %s: start the VMM with the same "
			            "devices (--disk, --vsock) as the one that saved it",
			            vm->snap_devs[i].name);
		if (ret)
			return ret;
		free(blob);
	}
	return 0;
}

static int restore_states(struct vm *vm, struct snap_reader *r, char *err, size_t errlen)
{
	void *blob;
	size_t len;
	int ret;

	ret = snap_reader_get(r, SNAP_VM, 0, "vm", &blob, &len, err, errlen);
	if (ret)
		return ret;
	ret = vm_state_restore(vm, blob, len);
	free(blob);
	if (ret)
		return fail(err, errlen, ret,
		            "cannot load the VM's interrupt controllers and clock");
	log_debug("restore: VM state loaded");
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		ret = snap_reader_get(r, SNAP_VCPU, i, "vcpu", &blob, &len, err, errlen);
		if (ret)
			return ret;
		ret = vcpu_setup_cpuid(&vm->vcpus[i]);
		if (!ret)
			ret = vcpu_state_restore(&vm->vcpus[i], blob, len);
		free(blob);
		if (ret)
			return fail(err, errlen, ret, "cannot load vCPU %u", i);
		log_debug("restore: vCPU %u loaded", i);
	}
	for (unsigned i = 0; i < vm->nr_snap_devs; i++) {
		struct vm_snap_dev *d = &vm->snap_devs[i];

		ret = snap_reader_get(r, SNAP_DEVICE, 0, d->name, &blob, &len, err, errlen);
		if (ret)
			return ret;
		ret = d->restore ? d->restore(d->dev, blob, len) : 0;
		free(blob);
		if (ret)
			return fail(err, errlen, ret, "cannot load device %s", d->name);
	}
	log_debug("restore: %u devices loaded", vm->nr_snap_devs);
	return 0;
}

int vm_snapshot_restore(struct vm *vm, const char *path, int threads, bool lazy, char *err,
                        size_t errlen)
{
	struct snap_reader *r;
	uint64_t base_len;
	uint32_t base_sum;
	char why[320];
	bool load;
	int ret;

	ret = snap_reader_open_key(path, vm->has_key ? &vm->key : NULL, &r, err, errlen);
	if (ret)
		return ret;
	ret = check_shape(vm, r, err, errlen);
	if (!ret)
		ret = snap_reader_memory_fits(r, &vm->mem, err, errlen);
	if (!ret && !vm->mem_file && snap_reader_base(r, &base_len, &base_sum) == 0)
		ret = fail(err, errlen, 0,
		           "%s is a diff over another snapshot's memory: give that snapshot's "
		           "memory file with --mem-file",
		           path);
	log_debug("restore: %s checked", path);
	if (!ret && vm->mem_file) {
		ret = memfile_map(&vm->mem, r, vm->mem_file, &vm->mem_base, err, errlen);
		/* From here on every write to guest RAM is recorded, a diff's pages too. */
		if (!ret && vm_dirty_track(vm))
			log_warn("restore: no dirty-page tracking: a pause compares all guest "
			         "memory");
	}
	/* Over a memory file only a diff has pages to load: a full snapshot's are the file's. */
	load = !vm->mem_file || snap_reader_base(r, &base_len, &base_sum) == 0;
	if (!ret && load && lazy &&
	    lazy_mem_start(vm, r, vm->mem_file ? vm->mem_base.fd : -1, !vm->lazy_on_demand,
	                   &vm->lazy, why, sizeof(why)))
		log_warn("lazy restore is not possible (%s): loading all guest memory first", why);
	if (!ret && load && !vm->lazy)
		ret = snap_reader_load_memory(r, &vm->mem, threads, err, errlen);
	log_debug("restore: guest memory %s", vm->lazy ? "registered for a lazy load" : "loaded");
	/* Devices last: their queues point into guest memory (faulted in if lazy). */
	if (!ret)
		ret = restore_states(vm, r, err, errlen);
	if (vm->lazy)
		lazy_mem_release_reader(vm->lazy);
	else
		snap_reader_close(r);
	return ret;
}
