// SPDX-License-Identifier: MIT
/*
 * Memory files (vmm/memfile.c): a snapshot's RAM extracted and mapped back
 * is byte for byte the guest's, across the MMIO gap too; zero pages are
 * holes; two guests mapping one file share its pages until one writes; a
 * file of another snapshot, a file of another size and a file that is none
 * are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest_mem.h"
#include "memfile.h"
#include "snap/snapfile.h"
#include "test_snap.h"
#include "unit.h"

/* A guest of size filled as how, its snapshot at snap and its memory file at mem. */
static int make(uint64_t size, enum fill how, uint64_t seed, const char *snap, const char *mem,
                struct guest_mem *m)
{
	char err[256];

	if (guest_mem_init(m, size))
		return -1;
	tsnap_fill_mem(m, how, seed);
	if (tsnap_write(snap, m, 2))
		return -1;
	return memfile_extract(snap, mem, 2, err, sizeof(err));
}

/* Maps the memory file over a fresh guest of m's size; 0 or -errno with err. */
static int map_back(const char *snap, const char *mem, uint64_t size, struct guest_mem *back,
                    char *err, size_t errlen)
{
	struct memfile_base base;
	struct snap_reader *r;
	int ret;

	if (guest_mem_init(back, size))
		return -ENOMEM;
	ret = snap_reader_open(snap, &r, err, errlen);
	if (ret)
		return ret;
	ret = memfile_map(back, r, mem, &base, err, errlen);
	snap_reader_close(r);
	if (!ret)
		close(base.fd);
	return ret;
}

UNIT_TEST(memfile_round_trip)
{
	static const uint64_t sizes[] = {2 * MiB, 34 * MiB, GUEST_MMIO_GAP_START + 4 * MiB};
	struct guest_mem m, back;
	char err[256];
	struct stat st;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		/* Past the gap a mostly empty guest: the file is sparse, the test fast. */
		enum fill how = sizes[s] > GiB ? FILL_ZERO : FILL_MIXED;

		CHECK(make(sizes[s], how, s, tsnap_path("mf.snap"), tsnap_path("mf.mem"), &m) == 0);
		if (sizes[s] > GiB)
			tsnap_fill_random(gpa_ptr(&m, GUEST_MMIO_GAP_END + MiB, PAGE), PAGE, 9);
		if (sizes[s] > GiB) {
			CHECK(tsnap_write(tsnap_path("mf.snap"), &m, 2) == 0);
			CHECK(memfile_extract(tsnap_path("mf.snap"), tsnap_path("mf.mem"), 2, err,
			                      sizeof(err)) == 0);
		}
		CHECK(map_back(tsnap_path("mf.snap"), tsnap_path("mf.mem"), sizes[s], &back, err,
		               sizeof(err)) == 0);
		CHECK(tsnap_mem_equal(&m, &back));
		CHECK(stat(tsnap_path("mf.mem"), &st) == 0);
		CHECK((uint64_t)st.st_size == sizes[s] + 4096);
		/* Zero pages are not written: the file takes what the data takes. */
		if (how == FILL_ZERO)
			CHECK((uint64_t)st.st_blocks * 512 < 4 * MiB);
		guest_mem_free(&back);
		guest_mem_free(&m);
	}
}

/* Two guests on one file: the same bytes, and a write in one is not seen by the other. */
UNIT_TEST(memfile_children_private)
{
	struct guest_mem m, a, b;
	char err[256];
	uint8_t *pa, *pb;

	CHECK(make(8 * MiB, FILL_RANDOM, 3, tsnap_path("mp.snap"), tsnap_path("mp.mem"), &m) == 0);
	CHECK(map_back(tsnap_path("mp.snap"), tsnap_path("mp.mem"), 8 * MiB, &a, err,
	               sizeof(err)) == 0);
	CHECK(map_back(tsnap_path("mp.snap"), tsnap_path("mp.mem"), 8 * MiB, &b, err,
	               sizeof(err)) == 0);
	pa = gpa_ptr(&a, 5 * MiB, PAGE);
	pb = gpa_ptr(&b, 5 * MiB, PAGE);
	CHECK(pa && pb && !memcmp(pa, pb, PAGE));
	memset(pa, 0xab, PAGE);
	CHECK(!memcmp(pb, gpa_ptr(&m, 5 * MiB, PAGE), PAGE));
	/* Nor does the file change. */
	guest_mem_free(&b);
	CHECK(map_back(tsnap_path("mp.snap"), tsnap_path("mp.mem"), 8 * MiB, &b, err,
	               sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&m, &b));
	guest_mem_free(&a);
	guest_mem_free(&b);
	guest_mem_free(&m);
}

UNIT_TEST(memfile_that_does_not_belong_refused)
{
	struct guest_mem m, back;
	char err[256];

	CHECK(make(4 * MiB, FILL_MIXED, 1, tsnap_path("mr1.snap"), tsnap_path("mr1.mem"), &m) == 0);
	guest_mem_free(&m);
	CHECK(make(4 * MiB, FILL_MIXED, 2, tsnap_path("mr2.snap"), tsnap_path("mr2.mem"), &m) == 0);
	guest_mem_free(&m);
	/* Another snapshot's file. */
	CHECK(map_back(tsnap_path("mr2.snap"), tsnap_path("mr1.mem"), 4 * MiB, &back, err,
	               sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "made from another snapshot") != NULL);
	guest_mem_free(&back);
	/* A file that is none. */
	CHECK(tsnap_spit(tsnap_path("mr.junk"), "not a memory file", 17) == 0);
	CHECK(map_back(tsnap_path("mr1.snap"), tsnap_path("mr.junk"), 4 * MiB, &back, err,
	               sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "is not a memory file of a 4 MiB guest") != NULL);
	guest_mem_free(&back);
	/* A missing one. */
	CHECK(map_back(tsnap_path("mr1.snap"), tsnap_path("nothing"), 4 * MiB, &back, err,
	               sizeof(err)) == -ENOENT);
	guest_mem_free(&back);
	/* No snapshot: nothing written. */
	CHECK(memfile_extract(tsnap_path("nothing"), tsnap_path("mr3.mem"), 1, err, sizeof(err)) <
	      0);
	CHECK(access(tsnap_path("mr3.mem"), F_OK) < 0 &&
	      access(tsnap_path("mr3.mem.tmp"), F_OK) < 0);
}

/*
 * A hole of the file stays anonymous memory: a guest reading and writing
 * there adds nothing to the file, which matters where it lies on tmpfs (a
 * fault on a hole of a tmpfs mapping would add a page to the file).
 */
UNIT_TEST(memfile_holes_stay_out_of_the_file)
{
	struct guest_mem m, back;
	char err[256], snap[] = "/dev/shm/husk-mfh-XXXXXX", mem[64];
	struct stat before, after;
	uint8_t *p;
	int fd = mkstemp(snap);

	CHECK(fd >= 0);
	close(fd);
	snprintf(mem, sizeof(mem), "%s.mem", snap);
	CHECK(make(16 * MiB, FILL_ZERO, 0, snap, mem, &m) == 0);
	/* One page of data in the middle; the rest holes. */
	tsnap_fill_random(gpa_ptr(&m, 8 * MiB, PAGE), PAGE, 5);
	CHECK(tsnap_write(snap, &m, 2) == 0);
	CHECK(memfile_extract(snap, mem, 2, err, sizeof(err)) == 0);
	CHECK(stat(mem, &before) == 0);
	CHECK(map_back(snap, mem, 16 * MiB, &back, err, sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&m, &back));
	for (uint64_t a = 0; a < 16 * MiB; a += PAGE) {
		p = gpa_ptr(&back, a, PAGE);
		p[1] = (uint8_t)(p[1] + 1);
	}
	CHECK(stat(mem, &after) == 0);
	CHECK(after.st_blocks == before.st_blocks);
	/* The data page still comes from the file. */
	CHECK(!memcmp((uint8_t *)gpa_ptr(&back, 8 * MiB, PAGE) + 2,
	              (uint8_t *)gpa_ptr(&m, 8 * MiB, PAGE) + 2, PAGE - 2));
	guest_mem_free(&back);
	guest_mem_free(&m);
	unlink(mem);
	unlink(snap);
}
