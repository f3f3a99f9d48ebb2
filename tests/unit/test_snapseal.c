// SPDX-License-Identifier: MIT
/*
 * Sealed snapshots (vmm/snap/snapseal.c): a sealed file round-trips with its
 * key, whole and chunk by chunk; without the key, or with another, it does
 * not open; its bytes hide what it holds; any byte changed is caught.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest_mem.h"
#include "snap/snapfile.h"
#include "test_snap.h"
#include "unit.h"

#define MARK "husk-sealed-marker-3e1f"

static const struct snap_key key_a = {{1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                       12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                       23, 24, 25, 26, 27, 28, 29, 30, 31, 32}};

/* A snapshot of a few blobs (one carries MARK among random bytes) and mem, sealed with key. */
static int write_sealed(const char *path, const struct snap_key *key, const struct guest_mem *mem)
{
	static uint8_t blob[200000];
	struct snap_writer *w;
	int ret;

	tsnap_fill_random(blob, sizeof(blob), 5);
	memcpy(blob + 1000, MARK, sizeof(MARK));
	ret = snap_writer_open(path, &w);
	if (ret)
		return ret;
	if ((key && snap_writer_seal(w, key)) || snap_writer_add(w, SNAP_VM, 0, NULL, "vm", 2) ||
	    snap_writer_add(w, SNAP_VCPU, 0, NULL, blob, sizeof(blob)) ||
	    snap_writer_add(w, SNAP_DEVICE, 0, "serial", "", 0) ||
	    (mem && snap_writer_add_memory(w, mem, 2)))
		ret = -EIO;
	return ret ? (snap_writer_abort(w), ret) : snap_writer_commit(w);
}

static int has_mark(const char *path)
{
	size_t len = 0;
	uint8_t *f = tsnap_slurp(path, &len);
	int found = f && memmem(f, len, MARK, strlen(MARK)) != NULL;

	free(f);
	return found;
}

UNIT_TEST(snap_sealed_round_trip)
{
	struct guest_mem m, back;
	struct snap_reader *r;
	struct snap_mem_info mi;
	uint8_t *buf = malloc(2 * MiB);
	unsigned present;
	uint64_t gpa;
	char err[256];
	void *data;
	size_t len;

	CHECK(buf && guest_mem_init(&m, 10 * MiB) == 0 && guest_mem_init(&back, 10 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 21);
	CHECK(write_sealed(tsnap_path("sealed"), &key_a, &m) == 0);
	CHECK(tsnap_read_all(tsnap_path("sealed"), &key_a, &back, err, sizeof(err)) == 0);
	CHECK(tsnap_mem_equal(&m, &back));
	CHECK(snap_reader_open_key(tsnap_path("sealed"), &key_a, &r, err, sizeof(err)) == 0);
	CHECK(snap_reader_sealed(r) == 1);
	CHECK(snap_reader_get(r, SNAP_VM, 0, NULL, &data, &len, err, sizeof(err)) == 0);
	CHECK(len == 2 && !memcmp(data, "vm", 2));
	free(data);
	/* A lazy restore reads one chunk alone. */
	CHECK(snap_reader_memory_info(r, &mi) == 0 && mi.nr_chunks == 5);
	for (uint32_t i = mi.nr_chunks; i-- > 0;) {
		CHECK(snap_reader_memory_chunk(r, i, buf, 2 * MiB, &gpa, &present, err,
		                               sizeof(err)) == 0);
		CHECK(!memcmp(buf, gpa_ptr(&m, gpa, 2 * MiB), 2 * MiB));
	}
	snap_reader_close(r);
	/* An unsealed file still opens with or without a key. */
	CHECK(write_sealed(tsnap_path("plain"), NULL, &m) == 0);
	CHECK(tsnap_read_all(tsnap_path("plain"), NULL, &back, err, sizeof(err)) == 0);
	CHECK(tsnap_read_all(tsnap_path("plain"), &key_a, &back, err, sizeof(err)) == 0);
	CHECK(snap_reader_open(tsnap_path("plain"), &r, err, sizeof(err)) == 0);
	CHECK(snap_reader_sealed(r) == 0);
	snap_reader_close(r);
	guest_mem_free(&m);
	guest_mem_free(&back);
	free(buf);
}

UNIT_TEST(snap_sealed_opens_only_with_its_key)
{
	struct snap_key other = key_a;
	struct snap_reader *r;
	char err[256];

	CHECK(write_sealed(tsnap_path("locked"), &key_a, NULL) == 0);
	CHECK(snap_reader_open(tsnap_path("locked"), &r, err, sizeof(err)) == -EACCES);
	CHECK(strstr(err, "sealed") && strstr(err, "key"));
	other.k[31] ^= 1;
	CHECK(snap_reader_open_key(tsnap_path("locked"), &other, &r, err, sizeof(err)) == -EACCES);
	CHECK(strstr(err, "another key"));
	CHECK(tsnap_read_all(tsnap_path("locked"), &key_a, NULL, err, sizeof(err)) == 0);
}

UNIT_TEST(snap_sealed_hides_its_bytes)
{
	uint8_t *a, *b;
	size_t la = 0, lb = 0;

	CHECK(write_sealed(tsnap_path("shown"), NULL, NULL) == 0);
	CHECK(has_mark(tsnap_path("shown")));
	CHECK(write_sealed(tsnap_path("hidden"), &key_a, NULL) == 0);
	CHECK(!has_mark(tsnap_path("hidden")));
	/* Every file its own salt: one key never meets the same nonce twice. */
	CHECK(write_sealed(tsnap_path("hidden2"), &key_a, NULL) == 0);
	a = tsnap_slurp(tsnap_path("hidden"), &la);
	b = tsnap_slurp(tsnap_path("hidden2"), &lb);
	/* (Not equal lengths: how the writer's threads cut frames depends on timing.) */
	CHECK(a && b && la > 64 && lb > 64 && memcmp(a + 56, b + 56, 8) != 0 &&
	      memcmp(a, b, la < lb ? la : lb) != 0);
	free(a);
	free(b);
}

UNIT_TEST(snap_sealed_any_changed_byte_caught)
{
	struct guest_mem m;
	uint8_t *file;
	size_t len = 0, tried = 0;
	char err[256];

	CHECK(guest_mem_init(&m, 4 * MiB) == 0);
	tsnap_fill_mem(&m, FILL_MIXED, 8);
	CHECK(write_sealed(tsnap_path("whole"), &key_a, &m) == 0);
	file = tsnap_slurp(tsnap_path("whole"), &len);
	CHECK(file && len > 4096);
	/* Every byte of the header and the table's end, and a spread of bytes between. */
	for (size_t at = 0; at < len; at = at < 64 || at >= len - 64 ? at + 1 : at + 331) {
		file[at] ^= 0x20;
		CHECK(tsnap_spit(tsnap_path("changed"), file, len) == 0);
		CHECK(tsnap_read_all(tsnap_path("changed"), &key_a, &m, err, sizeof(err)) != 0);
		file[at] ^= 0x20;
		tried++;
	}
	CHECK(tried > 128);
	free(file);
	guest_mem_free(&m);
}

UNIT_TEST(snap_seal_key_parse_and_order)
{
	char hex[65];
	struct snap_key k;
	struct snap_writer *w;

	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", key_a.k[i]);
	CHECK(snap_key_parse(hex, 64, &k) == 0 && !memcmp(&k, &key_a, sizeof(k)));
	CHECK(snap_key_parse("ab\n", 3, &k) == -EINVAL);
	hex[10] = 'g';
	CHECK(snap_key_parse(hex, 64, &k) == -EINVAL);
	/* Sealing is decided before the first section: not half a file. */
	CHECK(snap_writer_open(tsnap_path("order"), &w) == 0);
	CHECK(snap_writer_add(w, SNAP_VM, 0, NULL, "x", 1) == 0);
	CHECK(snap_writer_seal(w, &key_a) == -EINVAL);
	snap_writer_abort(w);
}
