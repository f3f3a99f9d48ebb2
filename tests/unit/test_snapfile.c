// SPDX-License-Identifier: MIT
/*
 * The snapshot file (vmm/snap): blobs and guest RAM round-trip, the file
 * does not depend on the thread count, damage of any kind is refused (or,
 * where the damage cannot change what is read, reads the same bytes), and a
 * writer that does not commit leaves the previous file in place.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lz4frame.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_mem.h"
#include "snap/snapfile.h"
#include "test_snap.h"
#include "unit.h"

static int get_equals(struct snap_reader *r, uint32_t type, uint32_t id, const char *name,
                      const void *want, size_t want_len)
{
	char err[256];
	void *data;
	size_t len;
	int ret = snap_reader_get(r, type, id, name, &data, &len, err, sizeof(err));

	if (ret)
		return ret;
	ret = len == want_len && (!len || !memcmp(data, want, len)) ? 0 : 1;
	free(data);
	return ret;
}

UNIT_TEST(snap_blobs_round_trip)
{
	uint8_t big[300000];
	struct snap_reader *r;
	struct snap_section_info info;
	char err[256];
	void *data;
	size_t len;

	CHECK(tsnap_write(tsnap_path("blobs"), NULL, 1) == 0);
	CHECK(snap_reader_open(tsnap_path("blobs"), &r, err, sizeof(err)) == 0);
	tsnap_fill_random(big, sizeof(big), 99);
	memset(big + 100000, 0, 100000);
	CHECK(get_equals(r, SNAP_VM, 0, NULL, "vm state", 8) == 0);
	CHECK(get_equals(r, SNAP_VCPU, 0, "", "vcpu0", 5) == 0);
	CHECK(get_equals(r, SNAP_VCPU, 1, NULL, big, sizeof(big)) == 0);
	CHECK(get_equals(r, SNAP_DEVICE, 0, "serial", "", 0) == 0);
	CHECK(get_equals(r, SNAP_DEVICE, 1, "virtio-blk", big, 1000) == 0);
	CHECK(snap_reader_get(r, SNAP_DEVICE, 0, "virtio-blk", &data, &len, err, sizeof(err)) ==
	      -ENOENT);
	CHECK(snap_reader_get(r, SNAP_VCPU, 2, NULL, &data, &len, err, sizeof(err)) == -ENOENT);
	CHECK(snap_reader_nr_sections(r) == 5);
	CHECK(snap_reader_section(r, 4, &info) == 0);
	CHECK(info.type == SNAP_DEVICE && info.id == 1 && !strcmp(info.name, "virtio-blk"));
	CHECK(info.size == 1000 && info.stored > 0);
	CHECK(snap_reader_section(r, 5, &info) == -ERANGE);
	CHECK(snap_reader_load_memory(r, NULL, 1, err, sizeof(err)) == -ENOENT);
	snap_reader_close(r);
}

UNIT_TEST(snap_writer_refuses_bad_sections)
{
	char name[64];
	struct snap_writer *w;
	struct snap_reader *r;
	char err[256];

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	CHECK(tsnap_write(tsnap_path("refuse"), NULL, 1) == 0);
	CHECK(snap_writer_open(tsnap_path("refuse"), &w) == 0);
	CHECK(snap_writer_add(w, 0, 0, NULL, "x", 1) == -EINVAL);
	snap_writer_abort(w);
	CHECK(snap_writer_open(tsnap_path("refuse"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_MEMORY, 0, NULL, "x", 1) == -EINVAL);
	snap_writer_abort(w);
	CHECK(snap_writer_open(tsnap_path("refuse"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_DEVICE, 0, name, "x", 1) == -ENAMETOOLONG);
	snap_writer_abort(w);
	CHECK(snap_writer_open(tsnap_path("refuse"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_DEVICE, 0, "rng", "x", 1) == 0);
	CHECK(snap_writer_add(w, SNAP_DEVICE, 0, "rng", "y", 1) == -EEXIST);
	/* An error sticks: the commit fails and the old file stays. */
	CHECK(snap_writer_commit(w) == -EEXIST);
	CHECK(access(tsnap_path("refuse.tmp"), F_OK) != 0);
	CHECK(snap_reader_open(tsnap_path("refuse"), &r, err, sizeof(err)) == 0);
	CHECK(snap_reader_nr_sections(r) == 5);
	snap_reader_close(r);
}

/* Writes mem, loads it into a fresh guest_mem of the same size; 1 when equal. */
static int mem_round_trip(const struct guest_mem *mem, int wthreads, int rthreads)
{
	struct guest_mem back;
	struct snap_reader *r;
	char err[256];
	int ok;

	if (tsnap_write(tsnap_path("mem"), mem, wthreads) ||
	    snap_reader_open(tsnap_path("mem"), &r, err, sizeof(err)))
		return 0;
	if (guest_mem_init(&back, mem->ram_size)) {
		snap_reader_close(r);
		return 0;
	}
	ok = snap_reader_load_memory(r, &back, rthreads, err, sizeof(err)) == 0 &&
	     tsnap_mem_equal(mem, &back);
	guest_mem_free(&back);
	snap_reader_close(r);
	return ok;
}

UNIT_TEST(snap_memory_round_trip)
{
	static const uint64_t sizes[] = {2 * MiB, 6 * MiB, 34 * MiB};
	struct guest_mem m;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int how = FILL_ZERO; how <= FILL_MIXED; how++) {
			CHECK(guest_mem_init(&m, sizes[s]) == 0);
			tsnap_fill_mem(&m, how, s * 3 + (uint64_t)how);
			CHECK(mem_round_trip(&m, 1, 1));
			CHECK(mem_round_trip(&m, 3, 2));
			guest_mem_free(&m);
		}
	}
}

UNIT_TEST(snap_memory_threads_make_the_same_file)
{
	struct guest_mem m;
	uint8_t *one, *four;
	size_t n1 = 0, n4 = 0;

	CHECK(guest_mem_init(&m, 40 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 5);
	CHECK(tsnap_write(tsnap_path("t1"), &m, 1) == 0);
	CHECK(tsnap_write(tsnap_path("t4"), &m, 4) == 0);
	guest_mem_free(&m);
	one = tsnap_slurp(tsnap_path("t1"), &n1);
	four = tsnap_slurp(tsnap_path("t4"), &n4);
	CHECK(one && four && n1 == n4 && !memcmp(one, four, n1));
	free(one);
	free(four);
}

/* RAM on both sides of the MMIO gap: the low region ends at 3 GiB. */
UNIT_TEST(snap_memory_across_the_mmio_gap)
{
	struct guest_mem m, back;
	struct snap_reader *r;
	char err[256];
	uint64_t gpas[] = {0, GUEST_MMIO_GAP_START - PAGE, GUEST_MMIO_GAP_END,
	                   GUEST_MMIO_GAP_END + 4 * MiB - PAGE};

	CHECK(guest_mem_init(&m, GUEST_MMIO_GAP_START + 4 * MiB) == 0);
	CHECK(m.nr_regions == 2);
	for (size_t i = 0; i < 4; i++)
		tsnap_fill_random(gpa_ptr(&m, gpas[i], PAGE), PAGE, i);
	CHECK(tsnap_write(tsnap_path("gap"), &m, 2) == 0);
	CHECK(snap_reader_open(tsnap_path("gap"), &r, err, sizeof(err)) == 0);
	CHECK(guest_mem_init(&back, m.ram_size) == 0);
	CHECK(snap_reader_load_memory(r, &back, 2, err, sizeof(err)) == 0);
	for (size_t i = 0; i < 4; i++)
		CHECK(!memcmp(gpa_ptr(&m, gpas[i], PAGE), gpa_ptr(&back, gpas[i], PAGE), PAGE));
	CHECK(*(uint8_t *)gpa_ptr(&back, GUEST_MMIO_GAP_START - 2 * PAGE, 1) == 0);
	snap_reader_close(r);
	guest_mem_free(&back);
	guest_mem_free(&m);
}

UNIT_TEST(snap_memory_size_mismatch_refused)
{
	struct guest_mem m, other;
	struct snap_reader *r;
	char err[256];

	CHECK(guest_mem_init(&m, 8 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 1);
	CHECK(tsnap_write(tsnap_path("size"), &m, 1) == 0);
	guest_mem_free(&m);
	CHECK(snap_reader_open(tsnap_path("size"), &r, err, sizeof(err)) == 0);
	CHECK(guest_mem_init(&other, 16 * MiB) == 0);
	CHECK(snap_reader_load_memory(r, &other, 1, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "8 MiB in the snapshot but 16 MiB here") != NULL);
	guest_mem_free(&other);
	snap_reader_close(r);
}

UNIT_TEST(snap_memory_chunks_on_demand)
{
	struct guest_mem m;
	struct snap_reader *r;
	struct snap_mem_info mi;
	uint8_t *buf = malloc(2 * MiB);
	unsigned present;
	uint64_t gpa;
	char err[256];

	CHECK(buf && guest_mem_init(&m, 10 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 11);
	memset(gpa_ptr(&m, 4 * MiB, 2 * MiB), 0, 2 * MiB); /* chunk 2: all zero */
	CHECK(tsnap_write(tsnap_path("lazy"), &m, 2) == 0);
	CHECK(snap_reader_open(tsnap_path("lazy"), &r, err, sizeof(err)) == 0);
	CHECK(snap_reader_memory_info(r, &mi) == 0);
	CHECK(mi.ram_size == 10 * MiB && mi.chunk_size == 2 * MiB && mi.nr_chunks == 5);
	for (uint32_t i = 0; i < mi.nr_chunks; i++) {
		memset(buf, 0xee, 2 * MiB);
		CHECK(snap_reader_memory_chunk(r, i, buf, 2 * MiB, &gpa, &present, err,
		                               sizeof(err)) == 0);
		CHECK(gpa == i * 2 * MiB);
		CHECK(!memcmp(buf, gpa_ptr(&m, gpa, 2 * MiB), 2 * MiB));
		CHECK((present == 0) == (i == 2));
		CHECK(snap_reader_memory_stored(r, i) == (i != 2));
	}
	CHECK(snap_reader_memory_stored(r, 5) == -ERANGE);
	CHECK(snap_reader_memory_fits(r, &m, err, sizeof(err)) == 0);
	CHECK(snap_reader_memory_chunk(r, 5, buf, 2 * MiB, &gpa, &present, err, sizeof(err)) ==
	      -ERANGE);
	CHECK(snap_reader_memory_chunk(r, 0, buf, MiB, &gpa, &present, err, sizeof(err)) ==
	      -EINVAL);
	snap_reader_close(r);
	guest_mem_free(&m);
	free(buf);
}

UNIT_TEST(snap_truncated_files_refused)
{
	struct snap_section_info info;
	struct snap_reader *r;
	struct guest_mem m;
	uint8_t *file;
	size_t len = 0, cuts[64];
	unsigned nr = 0;
	uint64_t x = 3;
	char err[256];

	CHECK(guest_mem_init(&m, 6 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 2);
	CHECK(tsnap_write(tsnap_path("whole"), &m, 1) == 0);
	guest_mem_free(&m);
	file = tsnap_slurp(tsnap_path("whole"), &len);
	CHECK(file != NULL);
	/* Every section boundary (as the sections lie back to back), and random points. */
	CHECK(snap_reader_open(tsnap_path("whole"), &r, err, sizeof(err)) == 0);
	cuts[nr++] = 0;
	cuts[nr++] = 64;
	for (unsigned i = 0, off = 64; i < snap_reader_nr_sections(r) && nr < 40; i++) {
		CHECK(snap_reader_section(r, i, &info) == 0);
		off += (unsigned)info.stored;
		cuts[nr++] = off;
		cuts[nr++] = off - 1;
	}
	snap_reader_close(r);
	while (nr < 64)
		cuts[nr++] = tsnap_xs(&x) % len;
	for (unsigned i = 0; i < nr; i++) {
		int ret;

		CHECK(tsnap_spit(tsnap_path("cut"), file, cuts[i]) == 0);
		ret = snap_reader_open(tsnap_path("cut"), &r, err, sizeof(err));
		CHECK(ret == -EINVAL);
		CHECK(strstr(err, "truncated?") || strstr(err, "too short"));
		CHECK(strstr(err, tsnap_path("cut")) != NULL);
	}
	free(file);
}

/* Flips one byte; reading must fail, or (where the byte cannot matter) give the same data. */
static int flip_is_caught(const uint8_t *file, size_t len, size_t at, uint8_t mask,
                          const struct guest_mem *orig)
{
	struct guest_mem back;
	uint8_t *copy = malloc(len);
	char err[256];
	int ret, ok;

	if (!copy || guest_mem_init(&back, orig->ram_size))
		return 0;
	memcpy(copy, file, len);
	copy[at] ^= mask;
	ret = tsnap_spit(tsnap_path("flip"), copy, len)
	              ? 0
	              : tsnap_read_all(tsnap_path("flip"), NULL, &back, err, sizeof(err));
	ok = ret ? (ret == -EINVAL || ret == -EIO) && strstr(err, "snapshot ") == err
	         : tsnap_mem_equal(orig, &back);
	guest_mem_free(&back);
	free(copy);
	return ok;
}

UNIT_TEST(snap_flipped_bytes_refused)
{
	struct snap_section_info info;
	struct snap_reader *r;
	struct guest_mem m;
	uint8_t *file;
	size_t len = 0, off = 64;
	uint64_t x = 77;
	char err[256];

	CHECK(guest_mem_init(&m, 4 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 3);
	CHECK(tsnap_write(tsnap_path("good"), &m, 1) == 0);
	file = tsnap_slurp(tsnap_path("good"), &len);
	CHECK(file != NULL);
	CHECK(tsnap_read_all(tsnap_path("good"), NULL, &m, err, sizeof(err)) == 0);
	/* Every byte of the header: each one is checked, none may pass. */
	for (size_t i = 0; i < 64; i++) {
		file[i] ^= 0x10;
		CHECK(tsnap_spit(tsnap_path("flip"), file, len) == 0);
		CHECK(snap_reader_open(tsnap_path("flip"), &r, err, sizeof(err)) < 0);
		file[i] ^= 0x10;
	}
	/* The start, middle and end of each section's frame, and of the table. */
	CHECK(snap_reader_open(tsnap_path("good"), &r, err, sizeof(err)) == 0);
	for (unsigned i = 0; i <= snap_reader_nr_sections(r); i++) {
		size_t n = len - off;

		if (i < snap_reader_nr_sections(r)) {
			CHECK(snap_reader_section(r, i, &info) == 0);
			n = info.stored;
		}
		for (size_t k = 0; k < 12; k++) {
			size_t at = off + (k < 8 ? k : k < 10 ? n / (k - 6) : n - 1 - (k - 10) * 4);

			CHECK(flip_is_caught(file, len, at, 0x01, &m));
		}
		for (size_t k = 0; k < 6; k++)
			CHECK(flip_is_caught(file, len, off + tsnap_xs(&x) % n,
			                     (uint8_t)(1 << (k % 8)), &m));
		off += n;
	}
	snap_reader_close(r);
	free(file);
	guest_mem_free(&m);
}

UNIT_TEST(snap_future_version_refused)
{
	struct snap_reader *r;
	uint8_t *file;
	size_t len = 0;
	char err[256];

	CHECK(tsnap_write(tsnap_path("future"), NULL, 1) == 0);
	file = tsnap_slurp(tsnap_path("future"), &len);
	CHECK(file != NULL);
	file[8] = 2;
	CHECK(tsnap_spit(tsnap_path("future"), file, len) == 0);
	CHECK(snap_reader_open(tsnap_path("future"), &r, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "format version 2, newer than this husk reads (1)") != NULL);
	file[8] = 1;
	file[16] = 4; /* an incompatible feature flag */
	CHECK(tsnap_spit(tsnap_path("future"), file, len) == 0);
	CHECK(snap_reader_open(tsnap_path("future"), &r, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "features") != NULL);
	memcpy(file, "HUSKSNAQ", 8);
	CHECK(tsnap_spit(tsnap_path("future"), file, len) == 0);
	CHECK(snap_reader_open(tsnap_path("future"), &r, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a husk snapshot") != NULL);
	free(file);
}

/*
 * Rewrites the section table of path through fn, with valid checksums, so
 * that the checks behind the checksum are reached.
 */
static int forge_table(const char *path, void (*fn)(uint8_t *table, size_t n))
{
	LZ4F_preferences_t prefs = {
		.frameInfo = {.contentChecksumFlag = LZ4F_contentChecksumEnabled,
	                      .blockChecksumFlag = LZ4F_blockChecksumEnabled}};
	LZ4F_dctx *d = NULL;
	size_t len = 0, in, out, stored;
	uint8_t *file = tsnap_slurp(path, &len), *table = NULL, *frame = NULL;
	uint64_t toff, tlen;
	uint32_t count;
	int ret = -1;

	if (!file || LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
		goto out;
	memcpy(&toff, file + 32, 8);
	memcpy(&tlen, file + 40, 8);
	memcpy(&count, file + 48, 4);
	out = 64 + (size_t)count * 80;
	in = tlen;
	table = malloc(out);
	if (!table || LZ4F_decompress(d, table, &out, file + toff, &in, NULL) != 0)
		goto out;
	fn(table, count);
	prefs.frameInfo.contentSize = out;
	frame = malloc(LZ4F_compressFrameBound(out, &prefs));
	stored =
		LZ4F_compressFrame(frame, LZ4F_compressFrameBound(out, &prefs), table, out, &prefs);
	if (LZ4F_isError(stored))
		goto out;
	tlen = stored;
	toff += tlen;
	memcpy(file + 24, &toff, 8); /* file length */
	memcpy(file + 40, &tlen, 8);
	memcpy(file + 52, frame + stored - 4, 4);
	toff -= tlen;
	/* Header and sections as they were, then the new table. */
	ret = tsnap_spit(path, file, toff);
	if (!ret) {
		int fd = open(path, O_WRONLY | O_APPEND);

		ret = fd >= 0 && write(fd, frame, stored) == (ssize_t)stored ? 0 : -1;
		if (fd >= 0)
			close(fd);
	}
out:
	LZ4F_freeDecompressionContext(d);
	free(file);
	free(table);
	free(frame);
	return ret;
}

static void sec_past_end(uint8_t *t, size_t n)
{
	uint64_t stored;

	/* The last section's stored length (host and file are little-endian). */
	memcpy(&stored, t + 64 + (n - 1) * 80 + 16, 8);
	stored += 200;
	memcpy(t + 64 + (n - 1) * 80 + 16, &stored, 8);
}

static void sec_overlap(uint8_t *t, size_t n)
{
	(void)n;
	memcpy(t + 64 + 80 + 8, t + 64 + 8, 8); /* section 1 starts where section 0 does */
}

static void sec_same_name(uint8_t *t, size_t n)
{
	(void)n;
	t[64 + 80 * 2 + 4] = 0; /* vcpu 1 becomes a second vcpu 0 */
}

static void sec_bad_name(uint8_t *t, size_t n)
{
	(void)n;
	t[64 + 80 * 3 + 40 + 30] = 'x'; /* a byte after the name's NUL */
}

static void sec_unterminated_name(uint8_t *t, size_t n)
{
	(void)n;
	memset(t + 64 + 80 * 3 + 40, 'x', 40); /* no NUL at all */
}

static void ram_oversized(uint8_t *t, size_t n)
{
	/* The memory chunks claim to be far bigger than a chunk. */
	for (size_t i = 0; i < n; i++)
		if (t[64 + i * 80] == SNAP_MEMORY)
			t[64 + i * 80 + 24 + 3] = 0x40;
}

UNIT_TEST(snap_forged_tables_refused)
{
	static const struct {
		void (*fn)(uint8_t *, size_t);
		const char *msg;
	} cases[] = {
		{sec_past_end, "(memory chunk 1) runs past the end of the file (truncated?)"},
		{sec_overlap, "overlaps"},
		{sec_same_name, "have the same name"},
		{sec_bad_name, "malformed name"},
		{sec_unterminated_name, "malformed name"},
		{ram_oversized, "stored bytes cannot hold"},
	};
	struct snap_reader *r;
	struct guest_mem m;
	char err[256];

	CHECK(guest_mem_init(&m, 4 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_RANDOM, 9);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(tsnap_write(tsnap_path("forged"), &m, 1) == 0);
		CHECK(forge_table(tsnap_path("forged"), cases[i].fn) == 0);
		CHECK(snap_reader_open(tsnap_path("forged"), &r, err, sizeof(err)) == -EINVAL);
		CHECK(strstr(err, cases[i].msg) != NULL);
	}
	guest_mem_free(&m);
}

UNIT_TEST(snap_uncommitted_writer_keeps_old_file)
{
	struct snap_writer *w;
	struct guest_mem m;
	uint8_t *before, *after;
	size_t n1 = 0, n2 = 0;
	char err[256];
	pid_t pid;
	int status;

	CHECK(tsnap_write(tsnap_path("keep"), NULL, 1) == 0);
	before = tsnap_slurp(tsnap_path("keep"), &n1);
	CHECK(before != NULL);
	/* Aborted. */
	CHECK(snap_writer_open(tsnap_path("keep"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_VM, 0, NULL, "new", 3) == 0);
	snap_writer_abort(w);
	CHECK(access(tsnap_path("keep.tmp"), F_OK) != 0);
	/* Killed before the commit, with RAM half written. */
	CHECK(guest_mem_init(&m, 4 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_RANDOM, 4);
	pid = fork();
	if (pid == 0) {
		if (snap_writer_open(tsnap_path("keep"), &w) == 0 &&
		    snap_writer_add(w, SNAP_VM, 0, NULL, "new", 3) == 0 &&
		    snap_writer_add_memory(w, &m, 2) == 0)
			raise(SIGKILL);
		_exit(1);
	}
	guest_mem_free(&m);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	after = tsnap_slurp(tsnap_path("keep"), &n2);
	CHECK(after && n1 == n2 && !memcmp(before, after, n1));
	CHECK(tsnap_read_all(tsnap_path("keep"), NULL, NULL, err, sizeof(err)) == 0);
	/* Its leftover is not taken over by the next writer. */
	CHECK(snap_writer_open(tsnap_path("keep"), &w) == -EEXIST);
	CHECK(unlink(tsnap_path("keep.tmp")) == 0);
	/* A commit does replace the file. */
	CHECK(snap_writer_open(tsnap_path("keep"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_VM, 0, NULL, "new", 3) == 0);
	CHECK(snap_writer_commit(w) == 0);
	CHECK(tsnap_read_all(tsnap_path("keep"), NULL, NULL, err, sizeof(err)) == 0);
	free(after);
	after = tsnap_slurp(tsnap_path("keep"), &n2);
	CHECK(after && (n1 != n2 || memcmp(before, after, n1)));
	free(before);
	free(after);
}
