// SPDX-License-Identifier: MIT
/*
 * Diff snapshots (vmm/snap/snapbase.c, snapmem_write.c): a guest restored
 * over a memory file and changed is written as the pages that differ from
 * the file (a page zeroed over data included), restores byte for byte over
 * that file, and a diff of a guest restored from a diff is again a diff over
 * the same file (chains never grow). A diff alone, over the wrong file, or
 * read by a husk that does not know diffs is refused. Where writes are
 * tracked, a diff reads the pages recorded as written and only those.
 */
#include <errno.h>
#include <stdbool.h>
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

#define SIZE (34 * MiB)

/*
 * A fresh guest of SIZE mapped over mem as the snapshot snap (full or diff)
 * says; with track, its writes recorded from the mapping on, as husk-vmm does.
 */
static int restore_tracked(const char *snap, const char *mem, struct guest_mem *g,
                           struct memfile_base *b, bool track, char *err, size_t errlen)
{
	struct snap_reader *r;
	uint64_t len;
	uint32_t sum;
	int ret;

	if (guest_mem_init(g, SIZE))
		return -ENOMEM;
	ret = snap_reader_open(snap, &r, err, errlen);
	if (ret)
		return ret;
	ret = memfile_map(g, r, mem, b, err, errlen);
	if (!ret && track)
		ret = guest_mem_track(g);
	if (!ret && snap_reader_base(r, &len, &sum) == 0)
		ret = snap_reader_load_memory(r, g, 2, err, errlen);
	snap_reader_close(r);
	return ret;
}

static int restore(const char *snap, const char *mem, struct guest_mem *g, struct memfile_base *b,
                   char *err, size_t errlen)
{
	return restore_tracked(snap, mem, g, b, false, err, errlen);
}

static uint64_t stored_pages(const char *path)
{
	struct snap_section_info si;
	struct snap_reader *r;
	uint64_t n = 0;
	char err[256];

	if (snap_reader_open(path, &r, err, sizeof(err)))
		return ~0ULL;
	for (unsigned i = 0; i < snap_reader_nr_sections(r); i++)
		if (snap_reader_section(r, i, &si) == 0 && si.type == SNAP_MEMORY)
			n += si.size / PAGE; /* the bitmap rounds down to nothing */
	snap_reader_close(r);
	return n;
}

static uint64_t pages_differing(const struct guest_mem *a, const struct guest_mem *b)
{
	uint64_t n = 0;

	for (uint64_t gpa = 0; gpa < SIZE; gpa += PAGE)
		n += memcmp(gpa_ptr(a, gpa, PAGE), gpa_ptr(b, gpa, PAGE), PAGE) != 0;
	return n;
}

/* A full snapshot of a mixed guest and its memory file: the base of the tests. */
static void base_make(struct guest_mem *m)
{
	char err[256];

	CHECK(guest_mem_init(m, SIZE) == 0);
	tsnap_fill_mem(m, FILL_MIXED, 7);
	memset(gpa_ptr(m, 20 * MiB, PAGE), 0, PAGE);           /* a hole in the file */
	tsnap_fill_random(gpa_ptr(m, 5 * MiB, PAGE), PAGE, 3); /* data, zeroed later */
	CHECK(tsnap_write(tsnap_path("d.snap"), m, 2) == 0);
	CHECK(memfile_extract(tsnap_path("d.snap"), tsnap_path("d.mem"), 2, err, sizeof(err)) == 0);
}

/* The three memory files and four guests of a chain test. */
static void chain_free(struct memfile_base *b[3], struct guest_mem *g[4])
{
	for (int i = 0; i < 3; i++)
		close(b[i]->fd);
	for (int i = 0; i < 4; i++)
		guest_mem_free(g[i]);
}

UNIT_TEST(snapdiff_round_trip_and_depth_one)
{
	struct guest_mem m, c, g, g2;
	struct memfile_base b, b2, b3;
	uint64_t len, blen;
	uint32_t sum, bsum;
	struct snap_reader *r;
	char err[256];

	base_make(&m);
	CHECK(restore(tsnap_path("d.snap"), tsnap_path("d.mem"), &c, &b, err, sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&m, &c));
	/* Five pages change: data, data zeroed, the hole written, and one rewritten as it was. */
	tsnap_fill_random(gpa_ptr(&c, 1 * MiB, PAGE), PAGE, 11);
	tsnap_fill_random(gpa_ptr(&c, 33 * MiB, 3 * PAGE), 3 * PAGE, 12);
	memset(gpa_ptr(&c, 5 * MiB, PAGE), 0, PAGE);
	memset(gpa_ptr(&c, 20 * MiB, PAGE), 0x5a, PAGE);
	memcpy(gpa_ptr(&c, 9 * MiB, PAGE), gpa_ptr(&m, 9 * MiB, PAGE), PAGE);
	CHECK(tsnap_write_diff(tsnap_path("d1.snap"), &c, &b) == 0);
	/* Only the pages that differ: those six, the rewritten one not among them. */
	CHECK(pages_differing(&m, &c) == 6);
	CHECK(stored_pages(tsnap_path("d1.snap")) == 6);
	CHECK(snap_reader_open(tsnap_path("d1.snap"), &r, err, sizeof(err)) == 0);
	CHECK(snap_reader_base(r, &blen, &bsum) == 0);
	snap_reader_close(r);
	CHECK(snap_reader_open(tsnap_path("d.snap"), &r, err, sizeof(err)) == 0);
	snap_reader_identity(r, &len, &sum);
	CHECK(snap_reader_base(r, &blen, &bsum) == -ENOENT);
	snap_reader_close(r);
	CHECK(b.snap_len == len && b.snap_sum == sum);

	/* Restored over the base's file: byte for byte the changed guest. */
	CHECK(restore(tsnap_path("d1.snap"), tsnap_path("d.mem"), &g, &b2, err, sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&c, &g));
	/* Its own pause is again a diff over the same file, holding the old changes and the new. */
	CHECK(b2.snap_len == len && b2.snap_sum == sum);
	tsnap_fill_random(gpa_ptr(&g, 30 * MiB, PAGE), PAGE, 13);
	CHECK(tsnap_write_diff(tsnap_path("d2.snap"), &g, &b2) == 0);
	CHECK(restore(tsnap_path("d2.snap"), tsnap_path("d.mem"), &g2, &b3, err, sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&g, &g2));
	CHECK(!tsnap_mem_equal(&c, &g2));

	chain_free((struct memfile_base *[]){&b, &b2, &b3},
	           (struct guest_mem *[]){&g2, &g, &c, &m});
}

UNIT_TEST(snapdiff_refusals)
{
	struct guest_mem m, c, g, o;
	struct memfile_base b, b2;
	struct snap_writer *w;
	uint8_t *buf;
	size_t n;
	char err[256];

	base_make(&m);
	CHECK(restore(tsnap_path("d.snap"), tsnap_path("d.mem"), &c, &b, err, sizeof(err)) == 0);
	tsnap_fill_random(gpa_ptr(&c, 2 * MiB, PAGE), PAGE, 21);
	CHECK(tsnap_write_diff(tsnap_path("dr.snap"), &c, &b) == 0);

	/* Over another snapshot's memory file. */
	CHECK(guest_mem_init(&o, SIZE) == 0);
	tsnap_fill_mem(&o, FILL_RANDOM, 8);
	CHECK(tsnap_write(tsnap_path("o.snap"), &o, 2) == 0);
	CHECK(memfile_extract(tsnap_path("o.snap"), tsnap_path("o.mem"), 2, err, sizeof(err)) == 0);
	CHECK(restore(tsnap_path("dr.snap"), tsnap_path("o.mem"), &g, &b2, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "made from another snapshot") != NULL);
	guest_mem_free(&g);
	/* A memory file is made of a full snapshot only. */
	CHECK(memfile_extract(tsnap_path("dr.snap"), tsnap_path("dr.mem"), 2, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "is a diff") != NULL && access(tsnap_path("dr.mem"), F_OK) < 0);

	/* A writer mixes nothing up: a full RAM in a diff, a diff without a base. */
	CHECK(snap_writer_open(tsnap_path("dx.snap"), &w) == 0);
	CHECK(snap_writer_set_base(w, 1, 2) == 0);
	CHECK(snap_writer_set_base(w, 1, 2) == -EEXIST);
	CHECK(snap_writer_add_memory(w, &c, 1) == -EINVAL);
	CHECK(snap_writer_add(w, SNAP_BASE, 0, NULL, "x", 1) == -EINVAL);
	snap_writer_abort(w);
	CHECK(snap_writer_open(tsnap_path("dx.snap"), &w) == 0);
	CHECK(snap_writer_add_memory_diff(w, &c, b.fd, 1) == -EINVAL);
	snap_writer_abort(w);

	/* A husk that knew no diffs reads its flag as unknown: an unknown flag is refused. */
	buf = tsnap_slurp(tsnap_path("dr.snap"), &n);
	CHECK(buf && n > 64 && buf[16] == 1);
	buf[16] = 5;
	CHECK(tsnap_spit(tsnap_path("dflag.snap"), buf, n) == 0);
	CHECK(restore(tsnap_path("dflag.snap"), tsnap_path("d.mem"), &g, &b2, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "features this husk does not know (flags 0x4)") != NULL);
	guest_mem_free(&g);
	free(buf);

	close(b.fd);
	guest_mem_free(&o);
	guest_mem_free(&c);
	guest_mem_free(&m);
}

/* Writing a diff reads the base's data, never its holes: a tmpfs base file does not grow. */
UNIT_TEST(snapdiff_base_holes_untouched)
{
	char snap[] = "/dev/shm/husk-sdh-XXXXXX", mem[64], dpath[64], err[256];
	struct guest_mem m, c;
	struct memfile_base b;
	struct stat before, after;
	struct snap_reader *r;
	int fd = mkstemp(snap);

	CHECK(fd >= 0);
	close(fd);
	snprintf(mem, sizeof(mem), "%s.mem", snap);
	snprintf(dpath, sizeof(dpath), "%s.diff", snap);
	CHECK(guest_mem_init(&m, SIZE) == 0);
	tsnap_fill_random(gpa_ptr(&m, 8 * MiB, PAGE), PAGE, 5); /* one page of data, holes around */
	CHECK(tsnap_write(snap, &m, 2) == 0);
	CHECK(memfile_extract(snap, mem, 2, err, sizeof(err)) == 0);
	CHECK(stat(mem, &before) == 0);
	CHECK(guest_mem_init(&c, SIZE) == 0);
	CHECK(snap_reader_open(snap, &r, err, sizeof(err)) == 0);
	CHECK(memfile_map(&c, r, mem, &b, err, sizeof(err)) == 0);
	snap_reader_close(r);
	memset(gpa_ptr(&c, 3 * MiB, PAGE), 7, PAGE);
	CHECK(tsnap_write_diff(dpath, &c, &b) == 0);
	CHECK(stat(mem, &after) == 0);
	CHECK(after.st_blocks == before.st_blocks);
	CHECK(stored_pages(dpath) == 1);
	close(b.fd);
	guest_mem_free(&c);
	guest_mem_free(&m);
	unlink(dpath);
	unlink(mem);
	unlink(snap);
}

/*
 * Tracked: the diff holds what was recorded (guest_mem_write, a diff's pages
 * loaded at restore) and skips the rest unread - so a write nobody recorded
 * is lost, which dirty_verify catches and refuses.
 */
UNIT_TEST(snapdiff_tracked_reads_recorded_pages)
{
	struct guest_mem m, c, g, g2;
	struct memfile_base b, b2, b3;
	uint8_t page[PAGE];
	char err[256];

	base_make(&m);
	CHECK(restore_tracked(tsnap_path("d.snap"), tsnap_path("d.mem"), &c, &b, true, err,
	                      sizeof(err)) == 0);
	tsnap_fill_random(page, PAGE, 31);
	CHECK(guest_mem_write(&c, 3 * MiB, page, PAGE) == 0);
	CHECK(guest_mem_write(&c, 20 * MiB, page, PAGE) == 0); /* over the file's hole */
	guest_mem_mark(&c, 7 * MiB, 1);                        /* marked, left as it was */
	/* Unrecorded: a verifying diff is refused, a trusting one leaves it out. */
	memset(gpa_ptr(&c, 11 * MiB, PAGE), 0x33, PAGE);
	c.dirty_verify = true;
	CHECK(tsnap_write_diff(tsnap_path("dt0.snap"), &c, &b) == -EIO);
	c.dirty_verify = false;
	CHECK(tsnap_write_diff(tsnap_path("dt1.snap"), &c, &b) == 0);
	CHECK(stored_pages(tsnap_path("dt1.snap")) == 2);
	memcpy(gpa_ptr(&c, 11 * MiB, PAGE), gpa_ptr(&m, 11 * MiB, PAGE), PAGE);
	CHECK(restore_tracked(tsnap_path("dt1.snap"), tsnap_path("d.mem"), &g, &b2, true, err,
	                      sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&c, &g));

	/* The pages loaded from the first diff are recorded: the next diff keeps them. */
	tsnap_fill_random(page, PAGE, 32);
	CHECK(guest_mem_write(&g, 30 * MiB, page, PAGE) == 0);
	g.dirty_verify = true;
	CHECK(tsnap_write_diff(tsnap_path("dt2.snap"), &g, &b2) == 0);
	CHECK(stored_pages(tsnap_path("dt2.snap")) == 3);
	CHECK(restore(tsnap_path("dt2.snap"), tsnap_path("d.mem"), &g2, &b3, err, sizeof(err)) ==
	      0);
	CHECK(tsnap_mem_equal(&g, &g2));

	chain_free((struct memfile_base *[]){&b, &b2, &b3},
	           (struct guest_mem *[]){&g2, &g, &c, &m});
}
