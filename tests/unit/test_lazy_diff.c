// SPDX-License-Identifier: MIT
/*
 * Lazy restore of a diff over a memory file (vmm/lazy_mem.c, lazy_diff.c)
 * without KVM: the test's threads take the faults a vCPU would. Every byte
 * comes back as the diff's guest had it, whoever touches it first; sparse
 * chunks are in before anything runs, over the file's mapping; the pages
 * of a dense chunk the diff does not hold are the memory file's mapping
 * again once the chunk is in (shared, not copied); every page the diff
 * placed is marked as written, so the next diff, which reads only marked
 * pages, holds them; and a pause (lazy_mem_wait) with nothing filling in
 * the background fills the rest itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lazy_mem.h"
#include "memfile.h"
#include "test_snap.h"
#include "unit.h"
#include "vm.h"

#define RAM (34 * MiB)
/* Two pages of the base in a chunk the diff otherwise rewrites. */
#define KEPT (24 * MiB + 100 * PAGE)

/* The base guest, its full snapshot and memory file ("ld.mem", holes where it is zero). */
static void base_make(struct guest_mem *m)
{
	char err[256];

	CHECK(guest_mem_init(m, RAM) == 0);
	tsnap_fill_mem(m, FILL_MIXED, 5);
	memset(gpa_ptr(m, 0, 2 * MiB), 0, 2 * MiB); /* a chunk of holes */
	tsnap_fill_random(gpa_ptr(m, KEPT, 2 * PAGE), 2 * PAGE, 36);
	CHECK(tsnap_write(tsnap_path("ld.snap"), m, 2) == 0);
	CHECK(memfile_extract(tsnap_path("ld.snap"), tsnap_path("ld.mem"), 2, err, sizeof(err)) ==
	      0);
}

/*
 * The changed guest: a copy of the base with runs of pages rewritten (a
 * sparse chunk: page 8 MiB + 4 KiB stays the base's between two changed
 * pages), one chunk whole, one but for two pages (KEPT: dense, with two of
 * the file's pages to map back), one page in a chunk of holes, a data page
 * zeroed.
 */
static void changed_make(const struct guest_mem *m, struct guest_mem *c)
{
	CHECK(guest_mem_init(c, RAM) == 0);
	memcpy(gpa_ptr(c, 0, RAM), gpa_ptr(m, 0, RAM), RAM);
	tsnap_fill_random(gpa_ptr(c, 8 * MiB, PAGE), PAGE, 31);
	tsnap_fill_random(gpa_ptr(c, 8 * MiB + 2 * PAGE, 5 * PAGE), 5 * PAGE, 32);
	tsnap_fill_random(gpa_ptr(c, 12 * MiB, 2 * MiB), 2 * MiB, 33);
	tsnap_fill_random(gpa_ptr(c, 24 * MiB, KEPT - 24 * MiB), KEPT - 24 * MiB, 37);
	tsnap_fill_random(gpa_ptr(c, KEPT + 2 * PAGE, 26 * MiB - KEPT - 2 * PAGE),
	                  26 * MiB - KEPT - 2 * PAGE, 38);
	tsnap_fill_random(gpa_ptr(c, 1 * MiB, PAGE), PAGE, 34);
	memset(gpa_ptr(c, 20 * MiB + 7 * PAGE, PAGE), 0, PAGE);
	tsnap_fill_random(gpa_ptr(c, RAM - PAGE, PAGE), PAGE, 35);
}

/* The diff "ld1.snap" of the changed guest over the base's file. */
static void diff_make(const struct guest_mem *c)
{
	struct guest_mem g;
	struct memfile_base b;
	struct snap_reader *r;
	char err[256];

	CHECK(guest_mem_init(&g, RAM) == 0);
	CHECK(snap_reader_open(tsnap_path("ld.snap"), &r, err, sizeof(err)) == 0);
	CHECK(memfile_map(&g, r, tsnap_path("ld.mem"), &b, err, sizeof(err)) == 0);
	snap_reader_close(r);
	memcpy(gpa_ptr(&g, 0, RAM), gpa_ptr(c, 0, RAM), RAM);
	CHECK(tsnap_write_diff(tsnap_path("ld1.snap"), &g, &b) == 0);
	close(b.fd);
	guest_mem_free(&g);
}

/* The base (m), the changed guest (c) and the diff between them, over the base's file. */
static void guests_make(struct guest_mem *m, struct guest_mem *c)
{
	base_make(m);
	changed_make(m, c);
	diff_make(c);
}

/* A VM over the base's file, its writes tracked; the diff lazily over it. 1: no userfaultfd. */
static int lazy_start(struct vm *vm, bool background, struct snap_reader **r, struct lazy_mem **l)
{
	char err[256];
	int ret;

	memset(vm, 0, sizeof(*vm));
	vm->vm_fd = -1;
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->stop_fd < 0 || guest_mem_init(&vm->mem, RAM) ||
	    snap_reader_open(tsnap_path("ld1.snap"), r, err, sizeof(err)))
		return -1;
	if (memfile_map(&vm->mem, *r, tsnap_path("ld.mem"), &vm->mem_base, err, sizeof(err)) ||
	    guest_mem_track(&vm->mem))
		return -1;
	ret = lazy_mem_start(vm, *r, vm->mem_base.fd, background, l, err, sizeof(err));
	if (ret == -EPERM || ret == -ENOSYS) {
		printf("note: %s; lazy restore not tested\n", err);
		snap_reader_close(*r);
		return 1;
	}
	if (ret)
		return -1;
	lazy_mem_release_reader(*l);
	return 0;
}

static void lazy_end(struct vm *vm, struct lazy_mem *l)
{
	lazy_mem_destroy(l);
	guest_mem_free(&vm->mem);
	close(vm->mem_base.fd);
	close(vm->stop_fd);
}

/* Whether the mapping at p is a file's whose name ends with name (/proc/self/maps). */
static bool mapped_from(const void *p, const char *name)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4400];
	bool found = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		size_t n = strcspn(line, "\n");

		line[n] = 0;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo &&
		    (uintptr_t)p < hi)
			found = n >= strlen(name) && !strcmp(line + n - strlen(name), name);
	}
	if (f)
		fclose(f);
	return found;
}

/* Every page that differs from the base is marked as written. */
static bool all_marked(const struct guest_mem *mem, const struct guest_mem *base)
{
	for (uint64_t gpa = 0; gpa < RAM; gpa += PAGE)
		if (memcmp(gpa_ptr(mem, gpa, PAGE), gpa_ptr(base, gpa, PAGE), PAGE) &&
		    !guest_mem_page_dirty(mem, gpa))
			return false;
	return true;
}

UNIT_TEST(lazy_diff_round_trip)
{
	struct guest_mem m, c, back;
	struct memfile_base b2;
	struct tsnap_toucher t[3];
	struct snap_reader *r;
	struct lazy_mem *l;
	pthread_t tid[3];
	struct vm vm;
	char err[256];
	int ret;

	guests_make(&m, &c);
	ret = lazy_start(&vm, true, &r, &l);
	CHECK(ret >= 0);
	if (ret == 0) {
		/* A sparse chunk is in before anything runs, over the file's mapping. */
		CHECK(mapped_from(gpa_ptr(&vm.mem, 8 * MiB + PAGE, PAGE), "/ld.mem"));
		for (int i = 0; i < 3; i++) {
			t[i] = (struct tsnap_toucher){
				.want = &c, .mem = &vm.mem, .seed = 91 + i, .rounds = 300};
			CHECK(pthread_create(&tid[i], NULL, tsnap_touch_pages, &t[i]) == 0);
		}
		for (int i = 0; i < 3; i++) {
			pthread_join(tid[i], NULL);
			CHECK(t[i].bad == 0);
		}
		CHECK(tsnap_mem_equal(&c, &vm.mem));
		/*
		 * The touchers see a chunk's pages once they are copied in, before its
		 * thread has unregistered it: mappings still change until the load ends,
		 * and /proc/self/maps read meanwhile can skip the one looked for (CI14).
		 */
		CHECK(lazy_mem_wait(l) == 0);
		CHECK(mapped_from(gpa_ptr(&vm.mem, 8 * MiB + PAGE, PAGE), "/ld.mem"));
		CHECK(mapped_from(gpa_ptr(&vm.mem, KEPT, PAGE), "/ld.mem"));
		CHECK(mapped_from(gpa_ptr(&vm.mem, 20 * MiB, PAGE), "/ld.mem"));
		CHECK(all_marked(&vm.mem, &m));
		CHECK(!atomic_load(&vm.stopping));
		/* The next diff reads marked pages only: it holds every page the first one placed.
		 */
		CHECK(tsnap_write_diff(tsnap_path("ld2.snap"), &vm.mem, &vm.mem_base) == 0);
		lazy_end(&vm, l);
		CHECK(guest_mem_init(&back, RAM) == 0);
		CHECK(snap_reader_open(tsnap_path("ld2.snap"), &r, err, sizeof(err)) == 0);
		CHECK(memfile_map(&back, r, tsnap_path("ld.mem"), &b2, err, sizeof(err)) == 0);
		CHECK(snap_reader_load_memory(r, &back, 2, err, sizeof(err)) == 0);
		snap_reader_close(r);
		CHECK(tsnap_mem_equal(&c, &back));
		close(b2.fd);
		guest_mem_free(&back);
	}
	guest_mem_free(&c);
	guest_mem_free(&m);
}

UNIT_TEST(lazy_diff_wait_fills_what_nobody_touched)
{
	struct guest_mem m, c;
	struct snap_reader *r;
	struct lazy_mem *l;
	struct vm vm;
	int ret;

	guests_make(&m, &c);
	ret = lazy_start(&vm, false, &r, &l);
	CHECK(ret >= 0);
	if (ret == 0) {
		/* Nothing touched, nothing in the background: the wait places every chunk. */
		CHECK(!mapped_from(gpa_ptr(&vm.mem, KEPT, PAGE), "/ld.mem"));
		CHECK(lazy_mem_wait(l) == 0);
		CHECK(all_marked(&vm.mem, &m));
		CHECK(tsnap_mem_equal(&c, &vm.mem));
		CHECK(mapped_from(gpa_ptr(&vm.mem, 8 * MiB + PAGE, PAGE), "/ld.mem"));
		CHECK(lazy_mem_wait(l) == 0);
		lazy_end(&vm, l);
	}
	guest_mem_free(&c);
	guest_mem_free(&m);
}
