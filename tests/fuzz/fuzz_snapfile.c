// SPDX-License-Identifier: MIT
/*
 * Fuzzes the snapshot reader (vmm/snap): the input becomes a snapshot file,
 * which is opened, every section read, guest RAM loaded into a small
 * guest_mem and a few chunks decompressed on demand. Three ways to make
 * the file, chosen by the first byte, so that the fuzzer reaches past the
 * checksums:
 *   0: the input is the file;
 *   1: the input overwrites part of a valid snapshot (made once, at start);
 *   2: the input describes sections, which are compressed with valid
 *      checksums into a file with a valid table, and then has single table
 *      fields bent (offsets, lengths, ids, names), so that the checks behind
 *      the checksums are what stands between the input and a crash;
 *   3: the input overwrites part of a valid sealed snapshot (snapseal.c).
 * Every file is opened with the sealed seed's key, so that a sealed flag
 * anywhere takes the reader through the tag and salt checks.
 * Every result must be 0 or a negative errno; nothing may crash or allocate
 * more than the file could justify.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"
#include "snap/snap_priv.h"
#include "snap/snapfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MEM_SIZE (4U << 20)
#define MAX_SECS 16
#define MAX_FILE (8U << 20)

static struct guest_mem mem;
static int fd = -1;
static char path[64];
static uint8_t *seed, *sealed, *file;
static size_t seed_len, sealed_len;
static const struct snap_key key = {{7, 1, 7, 1}};

/* The valid snapshot that mode 1 (3: sealed) damages: blobs and a few pages of RAM. */
static uint8_t *make_seed(const struct snap_key *k, size_t *len)
{
	char tmp[64];
	struct snap_writer *w;
	uint8_t *out;

	snprintf(tmp, sizeof(tmp), "/tmp/fuzz_snapfile.%d", (int)getpid());
	for (int i = 0; i < 40; i++)
		*(uint8_t *)gpa_ptr(&mem, (uint64_t)i * 100003 % MEM_SIZE, 1) =
			(uint8_t)(i * 37 + 1);
	if (snap_writer_open(tmp, &w) || (k && snap_writer_seal(w, k)) ||
	    snap_writer_add(w, SNAP_VM, 0, NULL, "vm-state", 8) ||
	    snap_writer_add(w, SNAP_VCPU, 0, NULL, "vcpu-0", 6) ||
	    snap_writer_add(w, SNAP_DEVICE, 0, "serial", "uart", 4) ||
	    snap_writer_add_memory(w, &mem, 1) || snap_writer_commit(w))
		abort();
	int sfd = open(tmp, O_RDONLY);
	*len = (size_t)lseek(sfd, 0, SEEK_END);
	out = malloc(*len);
	if (sfd < 0 || !out || pread(sfd, out, *len, 0) != (ssize_t)*len)
		abort();
	close(sfd);
	unlink(tmp);
	return out;
}

static void setup(void)
{
	if (guest_mem_init(&mem, MEM_SIZE))
		abort();
	seed = make_seed(NULL, &seed_len);
	sealed = make_seed(&key, &sealed_len);
	/* A memfd reopened through /proc: no disk, and a real path for the reader. */
	fd = memfd_create("fuzz_snapfile", MFD_CLOEXEC);
	file = malloc(MAX_FILE);
	if (fd < 0 || !file)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
}

static void set_file(const uint8_t *buf, size_t len)
{
	if (ftruncate(fd, 0) || pwrite(fd, buf, len, 0) != (ssize_t)len)
		abort();
}

static void must_be_errno(int ret)
{
	if (ret > 0 || ret < -4095)
		__builtin_trap();
}

/* Mode 2: sections from the input, each "kind id tweak value size(3) plen payload". */
static size_t build(const uint8_t *in, size_t n)
{
	static const char *const names[] = {"", "serial", "virtio-blk", "rng"};
	static uint8_t content[SNAP_RAM_FIXED + SNAP_RAM_REGION + (2U << 20) + 64];
	struct snap_entry ents[MAX_SECS];
	uint8_t tweak[MAX_SECS][2], *table;
	size_t off = SNAP_HDR_SIZE, nr = 0, stored, raw;
	uint32_t csum;

	while (n >= 7 && nr < MAX_SECS) {
		uint32_t kind = in[0] % 7, id = in[1],
			 len = in[4] | in[5] << 8 | (uint32_t)in[6] << 16;
		size_t plen = n > 7 ? in[7] : 0;
		struct snap_entry *e = &ents[nr];
		/* What a memory chunk of 32 KiB holds: easier to hit than any size. */
		uint32_t chunk_len = 1 + in[4] % 9 * SNAP_PAGE;

		tweak[nr][0] = in[2];
		tweak[nr][1] = in[3];
		in += 8;
		n = n > 8 ? n - 8 : 0;
		plen = plen < n ? plen : n;
		if (kind == 4 && !(in[-3] & 0x80)) /* whole pages behind a 1-byte bitmap */
			len = chunk_len;
		len = len < sizeof(content) ? len : sizeof(content);
		len = len > plen ? len : (uint32_t)plen;
		memset(content, 0, len);
		memcpy(content, in, plen);
		in += plen;
		n -= plen;
		*e = (struct snap_entry){.type = kind == 5   ? 9
		                                 : kind == 6 ? SNAP_RAM
		                                             : kind + 1,
		                         .id = kind == 6 ? 0 : id};
		if (kind ==
		    6) { /* the RAM layout of this guest_mem (or half), to reach the loads */
			uint32_t ram = id & 1 ? MEM_SIZE / 2 : MEM_SIZE;

			len = SNAP_RAM_FIXED + SNAP_RAM_REGION;
			memset(content, 0, len);
			snap_put64(content, ram);
			/* Small chunks: a whole one is within the fuzzer's reach. */
			snap_put32(content + 8, SNAP_MIN_CHUNK);
			snap_put32(content + 12, SNAP_PAGE);
			snap_put32(content + 16, 1);
			snap_put64(content + SNAP_RAM_FIXED + 8, ram);
		}
		if (kind == 2)
			strcpy(e->name, names[id % 4]);
		raw = len;
		if (off + snap_frame_bound(raw) > MAX_FILE / 2 ||
		    snap_frame_compress(NULL, file + off, MAX_FILE - off, content, raw, &stored,
		                        &csum))
			break;
		e->off = off;
		e->stored = stored;
		e->raw = raw;
		e->csum = csum;
		off += stored;
		nr++;
	}
	/* Bend one field of some entries: the table's checksum will still be right. */
	for (size_t i = 0; i < nr; i++) {
		int8_t v = (int8_t)tweak[i][1];

		switch (tweak[i][0] % 12) {
		case 1:
			ents[i].off += (uint64_t)(int64_t)v;
			break;
		case 2:
			ents[i].stored += (uint64_t)(int64_t)v;
			break;
		case 3:
			ents[i].raw += (uint64_t)(int64_t)v * 4096;
			break;
		case 4:
			ents[i].csum ^= (uint32_t)v;
			break;
		case 5:
			ents[i].id ^= (uint32_t)(uint8_t)v;
			break;
		case 6:
			ents[i].off = (uint64_t)v << 56;
			break;
		case 7:
			ents[i].raw = UINT64_MAX - (uint8_t)v;
			break;
		case 8:
			ents[i].name[SNAP_NAME_MAX - (uint8_t)v % 8] = 'x';
			break;
		case 9:
			ents[i].flags = (uint8_t)v;
			break;
		default:
			break;
		}
	}
	table = malloc(SNAP_HDR_SIZE + nr * SNAP_ENTRY_SIZE);
	if (!table)
		abort();
	memset(table, 0, SNAP_HDR_SIZE + nr * SNAP_ENTRY_SIZE);
	memcpy(table, SNAP_MAGIC, 8);
	snap_put32(table + H_VERSION, SNAP_VERSION);
	snap_put32(table + H_HDR_SIZE, SNAP_HDR_SIZE);
	snap_put32(table + H_ENTRY_SIZE, SNAP_ENTRY_SIZE);
	snap_put64(table + H_TABLE_OFF, off);
	snap_put32(table + H_TABLE_COUNT, (uint32_t)nr);
	memcpy(file, table, SNAP_HDR_SIZE);
	for (size_t i = 0; i < nr; i++) {
		uint8_t *p = table + SNAP_HDR_SIZE + i * SNAP_ENTRY_SIZE;

		snap_put32(p, ents[i].type);
		snap_put32(p + 4, ents[i].id);
		snap_put64(p + 8, ents[i].off);
		snap_put64(p + 16, ents[i].stored);
		snap_put64(p + 24, ents[i].raw);
		snap_put32(p + 32, ents[i].csum);
		snap_put32(p + 36, ents[i].flags);
		memcpy(p + 40, ents[i].name, sizeof(ents[i].name));
	}
	if (snap_frame_compress(NULL, file + off, MAX_FILE - off, table,
	                        SNAP_HDR_SIZE + nr * SNAP_ENTRY_SIZE, &stored, &csum))
		abort();
	free(table);
	snap_put64(file + H_FILE_LEN, off + stored);
	snap_put64(file + H_TABLE_LEN, stored);
	snap_put32(file + H_TABLE_CSUM, csum);
	return off + stored;
}

static void exercise(int threads)
{
	struct snap_section_info info;
	struct snap_mem_info mi;
	struct snap_reader *r;
	char err[256];
	int ret = snap_reader_open_key(path, &key, &r, err, sizeof(err));

	must_be_errno(ret);
	if (ret)
		return;
	for (unsigned i = 0; i < snap_reader_nr_sections(r); i++) {
		void *d;
		size_t len;

		if (snap_reader_section(r, i, &info))
			__builtin_trap();
		ret = snap_reader_get(r, info.type, info.id, info.name, &d, &len, err, sizeof(err));
		must_be_errno(ret);
		if (!ret) {
			if (len != info.size)
				__builtin_trap();
			free(d);
		}
	}
	if (snap_reader_memory_info(r, &mi) == 0) {
		/* Reused: a fresh buffer a run costs more in page faults than the rest. */
		static uint8_t buf[SNAP_MAX_CHUNK];
		unsigned present;
		uint64_t gpa;

		must_be_errno(snap_reader_load_memory(r, &mem, threads, err, sizeof(err)));
		for (uint32_t i = 0; i < mi.nr_chunks && i < 3; i++)
			must_be_errno(snap_reader_memory_chunk(r, i, buf, mi.chunk_size, &gpa,
			                                       &present, err, sizeof(err)));
	}
	snap_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t at, n;

	if (fd < 0)
		setup();
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		set_file(data + 1, size - 1);
		break;
	case 1:
	case 3: {
		/* Two bytes choose where the rest lands in the valid file. */
		const uint8_t *base = data[0] % 4 == 1 ? seed : sealed;
		size_t len = data[0] % 4 == 1 ? seed_len : sealed_len;

		at = size >= 3 ? ((size_t)data[1] << 8 | data[2]) % len : 0;
		n = size > 3 ? size - 3 : 0;
		n = n < MAX_FILE - at ? n : MAX_FILE - at;
		memcpy(file, base, len);
		memcpy(file + at, data + 3, n);
		set_file(file, at + n > len ? at + n : len);
		break;
	}
	default:
		set_file(file, build(data + 1, size - 1));
	}
	exercise(data[0] & 0x80 ? 2 : 1);
	return 0;
}
