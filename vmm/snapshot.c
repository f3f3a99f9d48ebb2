// SPDX-License-Identifier: MIT
/*
 * Snapshots of a paused VM: what KVM holds (x86/state.h), what each device
 * holds (registered blobs), and guest RAM, through the snapshot file library
 * (snap/snapfile.h, its format in snap/FORMAT.md).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lazy_diff.h"
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

/* The snapshot's guest RAM against this VM's: the message names the fix. */
static int check_ram(struct snap_reader *r, uint64_t ram_size, char *err, size_t errlen)
{
	struct snap_mem_info mi;

	if (snap_reader_memory_info(r, &mi))
		return fail(err, errlen, 0, "the snapshot holds no guest memory");
	if (mi.ram_size != ram_size)
		return fail(err, errlen, 0,
		            "the snapshot's guest has %llu MiB of memory, this VM %llu MiB: give "
		            "--mem %lluM",
		            (unsigned long long)(mi.ram_size >> 20),
		            (unsigned long long)(ram_size >> 20),
		            (unsigned long long)(mi.ram_size >> 20));
	return 0;
}

/* Checks that the snapshot fits this VM's vCPUs and devices before their state is loaded. */
static int check_shape(struct vm *vm, struct snap_reader *r, char *err, size_t errlen)
{
	struct snap_section_info si;
	unsigned vcpus = 0;

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

/*
 * While KVM makes the VM (nested, 35-45 ms of a start): opening and checking
 * the snapshot, mapping the memory file, and a diff's sparse chunks (60-70
 * ms of a resume's start after 64 MiB were written) need guest RAM only.
 */
static void *restore_thread(void *arg)
{
	struct vm_restore *rs = arg;
	struct snap_mem_info mi;
	uint64_t base_len;
	uint32_t base_sum;
	int ret;

	pthread_setname_np(pthread_self(), "restore");
	ret = snap_reader_open_key(rs->path, rs->key, &rs->r, rs->err, sizeof(rs->err));
	if (!ret)
		ret = check_ram(rs->r, rs->mem->ram_size, rs->err, sizeof(rs->err));
	if (!ret)
		ret = snap_reader_memory_fits(rs->r, rs->mem, rs->err, sizeof(rs->err));
	if (!ret && !rs->mem_file && snap_reader_base(rs->r, &base_len, &base_sum) == 0)
		ret = fail(rs->err, sizeof(rs->err), 0,
		           "%s is a diff over another snapshot's memory: give that snapshot's "
		           "memory file with --mem-file",
		           rs->path);
	if (!ret && rs->mem_file)
		ret = memfile_map(rs->mem, rs->r, rs->mem_file, &rs->base, rs->err,
		                  sizeof(rs->err));
	/*
	 * What a lazy restore writes before the guest runs (lazy_mem_start()),
	 * only where those pages are recorded: a diff pause must find them.
	 */
	if (!ret && rs->mem_file && rs->lazy && rs->mem->dirty &&
	    snap_reader_base(rs->r, &base_len, &base_sum) == 0 &&
	    snap_reader_memory_info(rs->r, &mi) == 0) {
		ret = snap_reader_load_memory_below(rs->r, rs->mem, 2,
		                                    LAZY_DIFF_DENSE(mi.chunk_size / 4096), rs->err,
		                                    sizeof(rs->err));
		rs->sparse_loaded = !ret;
	}
	rs->ret = ret;
	return NULL;
}

int vm_restore_begin(struct vm_restore *rs, struct guest_mem *mem, const char *path,
                     const char *mem_file, const struct snap_key *key, bool lazy)
{
	int ret;

	*rs = (struct vm_restore){
		.path = path, .mem_file = mem_file, .mem = mem, .key = key, .lazy = lazy};
	rs->base.fd = -1;
	/*
	 * Before the VM copies mem: the record of the pages written over a
	 * memory file, which the thread's writes go into (without one, they are
	 * left to lazy_mem_start(), after vm_dirty_track()).
	 */
	if (mem_file && !mem->dirty && guest_mem_track(mem))
		log_debug("restore: no memory for the record of written pages yet");
	ret = pthread_create(&rs->thread, NULL, restore_thread, rs);
	if (ret) {
		log_err("cannot start restoring %s: %s", path, strerror(ret));
		return -ret;
	}
	rs->running = true;
	return 0;
}

static void restore_join(struct vm_restore *rs)
{
	if (rs->running)
		pthread_join(rs->thread, NULL);
	rs->running = false;
}

void vm_restore_end(struct vm_restore *rs)
{
	restore_join(rs);
	snap_reader_close(rs->r);
	rs->r = NULL;
	if (rs->base.fd >= 0)
		close(rs->base.fd);
	rs->base.fd = -1;
}

int vm_snapshot_restore(struct vm *vm, struct vm_restore *rs, int threads, char *err, size_t errlen)
{
	struct snap_reader *r;
	char why[320];
	bool load;
	int ret;

	restore_join(rs);
	if (rs->ret) {
		snprintf(err, errlen, "%s", rs->err);
		return rs->ret;
	}
	r = rs->r;
	ret = check_shape(vm, r, err, errlen);
	log_debug("restore: %s checked", rs->path);
	if (!ret && rs->mem_file) {
		vm->mem_base = rs->base;
		rs->base.fd = -1;
		vm->sparse_loaded = rs->sparse_loaded;
		/* From here on every write to guest RAM is recorded, a diff's pages too. */
		if (vm_dirty_track(vm))
			log_warn("restore: no dirty-page tracking: a pause compares all guest "
			         "memory");
	}
	/* Over a memory file only a diff has pages to load: a full snapshot's are the file's. */
	load = !rs->mem_file || snap_reader_base(r, &(uint64_t){0}, &(uint32_t){0}) == 0;
	if (!ret && load && rs->lazy &&
	    lazy_mem_start(vm, r, rs->mem_file ? vm->mem_base.fd : -1, !vm->lazy_on_demand,
	                   &vm->lazy, why, sizeof(why)))
		log_warn("lazy restore is not possible (%s): loading all guest memory first", why);
	if (!ret && load && !vm->lazy)
		ret = snap_reader_load_memory(r, &vm->mem, threads, err, errlen);
	log_debug("restore: guest memory %s", vm->lazy ? "registered for a lazy load" : "loaded");
	/* Devices last: their queues point into guest memory (faulted in if lazy). */
	if (!ret)
		ret = restore_states(vm, r, err, errlen);
	rs->r = NULL;
	if (vm->lazy)
		lazy_mem_release_reader(vm->lazy);
	else
		snap_reader_close(r);
	return ret;
}
