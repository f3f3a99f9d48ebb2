/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SNAPFILE_H
#define HUSK_SNAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/*
 * The snapshot file of a paused sandbox: opaque state blobs (VM, vCPUs,
 * devices) and guest RAM, each section an LZ4 frame with block and content
 * checksums, found through a checksummed section table. The layout is in
 * vmm/snap/FORMAT.md. This library only stores and verifies bytes; what the
 * blobs mean belongs to the code that gathers and restores KVM state.
 */

/* Section types. Readers skip types they do not know (forward compatible). */
enum snap_type {
	SNAP_VM = 1,     /* VM-wide state (irqchip, PIT, clock, ...), id 0 */
	SNAP_VCPU = 2,   /* one vCPU's state, id = vCPU index */
	SNAP_DEVICE = 3, /* one device's state, by name (and id for several of a kind) */
	SNAP_RAM = 4,    /* guest RAM layout; written by snap_writer_add_memory() only */
	SNAP_MEMORY = 5, /* one chunk of guest RAM; written by snap_writer_add_memory() only */
	SNAP_BASE = 6,   /* a diff's base snapshot; written by snap_writer_set_base() only */
};

/* Longest section name, without its NUL. */
#define SNAP_NAME_MAX 39
/* Largest state blob snap_writer_add() takes and a reader accepts. */
#define SNAP_BLOB_MAX (256U << 20)
/* At most this many threads compress or decompress guest RAM. */
#define SNAP_MAX_THREADS 64

struct snap_writer;
struct snap_reader;

/*
 * A sealed snapshot's key (FORMAT.md, "Sealed snapshots"): 32 bytes for
 * AES-256-GCM. huskd makes one per snapshot file and keeps it wrapped by the
 * key of the org that owns it; the VMM holds it only in memory.
 */
#define SNAP_KEY_LEN 32
struct snap_key {
	uint8_t k[SNAP_KEY_LEN];
};

/*
 * OpenSSL set up without the host's config file; call before the process
 * confines itself and before anything else uses OpenSSL. 0 or -ENOTSUP.
 */
int snap_seal_noconfig(void) __attribute__((warn_unused_result));
/*
 * Readies the cipher (after snap_seal_noconfig, confined or not). Later
 * calls do nothing. 0 or -ENOTSUP.
 */
int snap_seal_init(void) __attribute__((warn_unused_result));
/* A key from 64 hex digits (a line end may follow): 0 or -EINVAL. */
int snap_key_parse(const char *hex, size_t len, struct snap_key *key)
	__attribute__((warn_unused_result));

/*
 * Starts a snapshot that will replace `path` at snap_writer_commit(): the
 * data goes to "path.tmp" (created O_EXCL, mode 0600), so a crash before
 * the commit leaves any previous file at `path` untouched. A "path.tmp" left
 * by a crashed writer makes this fail with -EEXIST; the caller, who knows no
 * other writer runs, may unlink it. Returns 0 and *w, or -errno.
 */
int snap_writer_open(const char *path, struct snap_writer **w) __attribute__((warn_unused_result));

/*
 * Seals the snapshot with key: every section and the table are encrypted
 * and authenticated. Call before anything is added (-EINVAL after), once.
 */
int snap_writer_seal(struct snap_writer *w, const struct snap_key *key)
	__attribute__((warn_unused_result));

/*
 * Adds a state blob (len bytes, at most SNAP_BLOB_MAX; len 0 is fine) as a
 * section of `type` (SNAP_VM, SNAP_VCPU, SNAP_DEVICE or a later type) with
 * an id and a name (NULL or up to SNAP_NAME_MAX bytes). The data is
 * compressed and written before this returns; the caller keeps ownership.
 * -EINVAL for a bad type, -ENAMETOOLONG, -EEXIST for a (type, id, name)
 * already added, -EFBIG, or an I/O error. Any error is also kept and
 * returned again by snap_writer_commit().
 */
int snap_writer_add(struct snap_writer *w, uint32_t type, uint32_t id, const char *name,
                    const void *data, size_t len) __attribute__((warn_unused_result));

/*
 * Adds all of guest RAM: its layout, then every 2 MiB chunk holding a
 * non-zero 4 KiB page, zero pages left out, compressed on `threads` threads
 * (1..SNAP_MAX_THREADS; the calling thread is one of them) and written in
 * order, so the file does not depend on the thread count. The guest must be
 * paused. Once per writer (-EEXIST after); -ENOMEM, or an I/O error.
 */
int snap_writer_add_memory(struct snap_writer *w, const struct guest_mem *mem, int threads)
	__attribute__((warn_unused_result));

/*
 * Makes this a diff snapshot over the base snapshot whose identity
 * (snap_reader_identity()) is file_len and table_sum: guest RAM not stored
 * in it is the base's. Call before snap_writer_add_memory_diff(), once.
 */
int snap_writer_set_base(struct snap_writer *w, uint64_t file_len, uint32_t table_sum)
	__attribute__((warn_unused_result));

/*
 * As snap_writer_add_memory(), for a diff: stores every page of mem that
 * differs from the base's RAM, which base_fd (a memory file of the base,
 * FORMAT.md) holds regions back to back from offset 0; a page written to
 * zero over a non-zero one is stored too. The writer needs a base first
 * (-EINVAL otherwise).
 */
int snap_writer_add_memory_diff(struct snap_writer *w, const struct guest_mem *mem, int base_fd,
                                int threads) __attribute__((warn_unused_result));

/*
 * Finishes the file: writes the section table and the header, fsyncs it,
 * renames it over `path` and fsyncs the directory. Frees w whatever happens;
 * on any error (this one or an earlier add's) the temporary file is removed
 * and `path` is left as it was. Returns 0 or -errno.
 */
int snap_writer_commit(struct snap_writer *w) __attribute__((warn_unused_result));

/* Drops an unfinished snapshot: removes "path.tmp" and frees w. NULL is fine. */
void snap_writer_abort(struct snap_writer *w);

/*
 * Opens a snapshot and validates its structure before anything is used:
 * magic, version (newer ones refused), header and table lengths against the
 * file, the table's checksum, every section inside the file without
 * overlaps, limits on counts and sizes, and the guest RAM layout. Section
 * contents are verified when they are read. Returns 0 and *r, or -EINVAL
 * (not a valid snapshot), -EIO (checksum mismatch), -ENOMEM or an open
 * error, with a sentence naming the problem in err.
 */
int snap_reader_open(const char *path, struct snap_reader **r, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * As snap_reader_open(), for a file that may be sealed: key opens it (NULL:
 * none given). A sealed file without a key, or with a key that does not
 * open its table, is -EACCES with a message saying which.
 */
int snap_reader_open_key(const char *path, const struct snap_key *key, struct snap_reader **r,
                         char *err, size_t errlen) __attribute__((warn_unused_result));

/* 1 when the file is sealed (encrypted), 0 when it is not. */
int snap_reader_sealed(const struct snap_reader *r);

void snap_reader_close(struct snap_reader *r);

/*
 * What tells this file from any other snapshot: its length and its section
 * table's checksum (which covers every section's checksum), as the header has them.
 */
void snap_reader_identity(const struct snap_reader *r, uint64_t *file_len, uint32_t *table_sum);

/*
 * A diff snapshot's base (its identity as snap_reader_identity() gives it):
 * 0, or -ENOENT for a full snapshot. A diff's RAM is restored over its
 * base's (a memory file of the base mapped first); alone it is incomplete.
 */
int snap_reader_base(const struct snap_reader *r, uint64_t *file_len, uint32_t *table_sum);

/* What the table says about one section, for listing a snapshot. */
struct snap_section_info {
	uint32_t type;
	uint32_t id;
	char name[SNAP_NAME_MAX + 1];
	uint64_t size;   /* uncompressed bytes */
	uint64_t stored; /* bytes in the file */
};

unsigned snap_reader_nr_sections(const struct snap_reader *r);

/* Section i (0 .. snap_reader_nr_sections() - 1) in file order; 0 or -ERANGE. */
int snap_reader_section(const struct snap_reader *r, unsigned i, struct snap_section_info *info)
	__attribute__((warn_unused_result));

/*
 * Reads the section (type, id, name; NULL name = "") into a new buffer that
 * the caller frees with free(); its checksums are verified first. Returns 0,
 * -ENOENT when there is no such section, -EIO for a corrupt one (message in
 * err), -ENOMEM. Safe to call from several threads at once.
 */
int snap_reader_get(struct snap_reader *r, uint32_t type, uint32_t id, const char *name,
                    void **data, size_t *len, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Guest RAM as the snapshot stores it. */
struct snap_mem_info {
	uint64_t ram_size;   /* bytes */
	uint32_t chunk_size; /* bytes per chunk */
	uint32_t nr_chunks;  /* ram_size / chunk_size; chunk i is the i-th in guest order */
};

/* 0 and *info, or -ENOENT when the snapshot holds no guest RAM. */
int snap_reader_memory_info(const struct snap_reader *r, struct snap_mem_info *info)
	__attribute__((warn_unused_result));

/*
 * 0 when mem (made by guest_mem_init()) has the snapshot's RAM layout: the
 * same regions, so that chunk i of the snapshot is the i-th 2 MiB of mem in
 * region order; else -EINVAL, or -ENOENT when there is no RAM, with err.
 */
int snap_reader_memory_fits(const struct snap_reader *r, const struct guest_mem *mem, char *err,
                            size_t errlen) __attribute__((warn_unused_result));

/*
 * 1 when chunk `index` has pages stored in the snapshot, 0 when it is all
 * zeros (no section), -ERANGE for an index at or past nr_chunks. Reads
 * nothing from the file: the table says it.
 */
int snap_reader_memory_stored(const struct snap_reader *r, uint32_t index)
	__attribute__((warn_unused_result));

/* How many pages chunk index holds, as its section's size says: 0 for one not stored. */
uint32_t snap_reader_memory_pages(const struct snap_reader *r, uint32_t index);

/*
 * Loads guest RAM into mem, which guest_mem_init() made with the snapshot's
 * size (else -EINVAL); pages the snapshot left out as zero are not touched.
 * Decompresses on `threads` threads (1..SNAP_MAX_THREADS). Every write goes
 * through gpa_ptr(). On error (-EIO corrupt, -EINVAL, -ENOMEM, -ENOENT when
 * there is no RAM) the contents of mem are unspecified.
 */
int snap_reader_load_memory(struct snap_reader *r, const struct guest_mem *mem, int threads,
                            char *err, size_t errlen) __attribute__((warn_unused_result));

/* The same for the chunks that hold fewer than below pages only. */
int snap_reader_load_memory_below(struct snap_reader *r, const struct guest_mem *mem, int threads,
                                  uint32_t below, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * The building block of a lazy restore: chunk `index` (< nr_chunks),
 * verified and decompressed into buf (len == chunk_size), zero pages as
 * zeros; *gpa is where it belongs. *present counts its non-zero pages (0:
 * the chunk is all zeros, as a userfaultfd handler may want to know).
 * Thread-safe. 0, -ERANGE, -EINVAL for a wrong len, -EIO, -ENOMEM.
 */
int snap_reader_memory_chunk(struct snap_reader *r, uint32_t index, void *buf, size_t len,
                             uint64_t *gpa, unsigned *present, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Chunks read one at a time again and again (a lazy restore), each into
 * the same buffers with the same decompression context. One per thread;
 * the reader must outlive it. 0 and *out, -ENOENT (no RAM) or -ENOMEM.
 */
struct snap_chunk_reader;
int snap_chunk_reader_new(struct snap_reader *r, struct snap_chunk_reader **out)
	__attribute__((warn_unused_result));
void snap_chunk_reader_free(struct snap_chunk_reader *cr); /* NULL is fine */

/* One chunk as stored: where it goes, which pages it has, and those pages. */
struct snap_chunk {
	uint64_t gpa;
	const uint8_t *bitmap; /* chunk_size / 4096 / 8 bytes: bit j % 8 of byte j / 8 for page j */
	const uint8_t *pages;  /* the pages whose bits are set, in order, 4096 bytes each */
	unsigned nr_pages;     /* as many as bits are set; 0 for a chunk of zeros */
};

/*
 * Reads chunk index (< nr_chunks), verified (checksums, and a bitmap that
 * counts exactly its pages), into c, whose pointers stay valid until the
 * next call on cr. 0, -ERANGE, -EIO with err, -ENOMEM.
 */
int snap_chunk_read(struct snap_chunk_reader *cr, uint32_t index, struct snap_chunk *c, char *err,
                    size_t errlen) __attribute__((warn_unused_result));

#endif
