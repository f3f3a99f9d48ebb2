// SPDX-License-Identifier: MIT
/*
 * Lazy restore (vmm/lazy_mem.c) without KVM: guest RAM is plain memory
 * here, so the test's own threads take the faults a vCPU would. Every byte
 * must come back as saved whoever touches it first, a corrupt chunk must
 * stop the VM without leaving anyone waiting, and a stop in the middle must
 * not hang. Where userfaultfd is not allowed (an unprivileged host) the
 * tests say so and pass: the VMM falls back to an eager load there.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lazy_mem.h"
#include "test_snap.h"
#include "unit.h"
#include "vm.h"

#define RAM (34 * MiB)

/* The saved guest: mixed pages, all-zero chunks 0, 1 and 5 (never registered). */
static void saved_guest(struct guest_mem *m)
{
	tsnap_fill_mem(m, FILL_MIXED, 11);
	memset(gpa_ptr(m, 0, 4 * MiB), 0, 4 * MiB);
	memset(gpa_ptr(m, 10 * MiB, 2 * MiB), 0, 2 * MiB);
}

/* Saves that guest to tsnap_path(name); keeps it in *keep, if given. 0 or -1. */
static int save_guest(const char *name, struct guest_mem *keep)
{
	struct guest_mem m;
	int ret;

	if (guest_mem_init(&m, RAM))
		return -1;
	saved_guest(&m);
	ret = tsnap_write(tsnap_path(name), &m, 2);
	if (keep && !ret)
		*keep = m;
	else
		guest_mem_free(&m);
	return ret ? -1 : 0;
}

static int fake_vm(struct vm *vm)
{
	memset(vm, 0, sizeof(*vm));
	vm->vm_fd = -1;
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->stop_fd = eventfd(0, EFD_CLOEXEC);
	return vm->stop_fd >= 0 && guest_mem_init(&vm->mem, RAM) == 0 ? 0 : -1;
}

static void fake_vm_free(struct vm *vm)
{
	guest_mem_free(&vm->mem);
	close(vm->stop_fd);
}

/* Starts a lazy restore of path into vm; 1 when userfaultfd is not allowed here. */
static int start(struct vm *vm, const char *path, struct snap_reader **r, struct lazy_mem **l)
{
	char err[256];
	int ret;

	if (snap_reader_open(path, r, err, sizeof(err)))
		return -1;
	ret = lazy_mem_start(vm, *r, -1, true, l, err, sizeof(err));
	if (ret == -EPERM || ret == -ENOSYS) {
		printf("note: %s; lazy restore not tested\n", err);
		snap_reader_close(*r);
		return 1;
	}
	return ret ? -1 : 0;
}

UNIT_TEST(lazy_mem_round_trip)
{
	struct tsnap_toucher t[3];
	pthread_t tid[3];
	struct guest_mem saved;
	struct snap_reader *r;
	struct lazy_mem *l;
	struct vm vm;
	int ret;

	CHECK(save_guest("lazy", &saved) == 0);
	CHECK(fake_vm(&vm) == 0);
	ret = start(&vm, tsnap_path("lazy"), &r, &l);
	CHECK(ret >= 0);
	if (ret == 0) {
		for (int i = 0; i < 3; i++) {
			t[i] = (struct tsnap_toucher){
				.want = &saved, .mem = &vm.mem, .seed = 77 + i, .rounds = 200};
			CHECK(pthread_create(&tid[i], NULL, tsnap_touch_pages, &t[i]) == 0);
		}
		lazy_mem_release_reader(l);
		for (int i = 0; i < 3; i++) {
			pthread_join(tid[i], NULL);
			CHECK(t[i].bad == 0);
		}
		CHECK(tsnap_mem_equal(&saved, &vm.mem));
		CHECK(!atomic_load(&vm.stopping));
		lazy_mem_destroy(l);
	}
	fake_vm_free(&vm);
	guest_mem_free(&saved);
}

/* The offset of the first memory chunk's frame: sections lie back to back after the header. */
static size_t first_chunk_at(const char *path)
{
	struct snap_section_info si;
	struct snap_reader *r;
	char err[256];
	size_t at = 64;

	if (snap_reader_open(path, &r, err, sizeof(err)))
		return 0;
	for (unsigned i = 0; i < snap_reader_nr_sections(r); i++) {
		if (snap_reader_section(r, i, &si) || si.type == SNAP_MEMORY)
			break;
		at += si.stored;
	}
	snap_reader_close(r);
	return at;
}

UNIT_TEST(lazy_mem_corrupt_chunk_stops_the_vm)
{
	struct snap_reader *r;
	struct lazy_mem *l;
	size_t len = 0, at;
	uint8_t *file;
	struct vm vm;
	int ret;

	CHECK(save_guest("lazybad", NULL) == 0);
	at = first_chunk_at(tsnap_path("lazybad"));
	file = tsnap_slurp(tsnap_path("lazybad"), &len);
	CHECK(file && at > 64 && at + 5000 < len);
	file[at + 5000] ^= 0x10; /* inside chunk 2, the first one stored */
	CHECK(tsnap_spit(tsnap_path("lazybad"), file, len) == 0);
	free(file);
	CHECK(fake_vm(&vm) == 0);
	ret = start(&vm, tsnap_path("lazybad"), &r, &l);
	CHECK(ret >= 0);
	if (ret == 0) {
		volatile uint8_t *p = gpa_ptr(&vm.mem, 4 * MiB, PAGE);

		lazy_mem_release_reader(l);
		(void)*p; /* must not wait for ever: the loader gives up and lets go */
		/* The loader thread stops the VM right after; a minute bounds a hang, not a speed.
		 */
		for (int i = 0; i < 6000 && !atomic_load(&vm.stopping); i++)
			usleep(10000);
		CHECK(atomic_load(&vm.stopping));
		CHECK(vm.exit_status == VM_EXIT_ERROR);
		CHECK(strstr(vm.exit_reason, "lazy restore") != NULL);
		lazy_mem_destroy(l);
	}
	fake_vm_free(&vm);
}

UNIT_TEST(lazy_mem_stop_before_the_end)
{
	struct snap_reader *r;
	struct lazy_mem *l;
	struct vm vm;
	int ret;

	CHECK(save_guest("lazystop", NULL) == 0);
	CHECK(fake_vm(&vm) == 0);
	ret = start(&vm, tsnap_path("lazystop"), &r, &l);
	CHECK(ret >= 0);
	if (ret == 0) {
		/* Not released: the reader stays ours and must survive the destroy. */
		lazy_mem_destroy(l);
		CHECK(snap_reader_nr_sections(r) > 0);
		snap_reader_close(r);
		/* Whatever was not filled reads as zeros now, without waiting. */
		CHECK(gpa_ptr(&vm.mem, RAM - PAGE, PAGE) != NULL);
		(void)*(volatile uint8_t *)gpa_ptr(&vm.mem, RAM - PAGE, PAGE);
		CHECK(!atomic_load(&vm.stopping));
	}
	fake_vm_free(&vm);
}
