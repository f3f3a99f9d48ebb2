/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SNAP_PRIV_H
#define HUSK_SNAP_PRIV_H

/* What snapfile.c (header, table, blobs) and snapmem.c (guest RAM) share. */

#include <lz4frame.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapfile.h"

#define SNAP_MAGIC "HUSKSNAP"
#define SNAP_VERSION 1
/* Header flags (FORMAT.md): what a reader must know to restore the file. */
#define SNAP_FLAG_DIFF 1U   /* pages not stored come from the base snapshot's memory */
#define SNAP_FLAG_SEALED 2U /* every frame encrypted (snapseal.c); the salt in the header */
#define SNAP_FLAGS_KNOWN (SNAP_FLAG_DIFF | SNAP_FLAG_SEALED)
/* A sealed file's salt (the header's last 8 bytes) and each frame's GCM tag. */
#define SNAP_SALT_LEN 8
#define SNAP_TAG_LEN 16
/* The table's place in a nonce: after every section's (at most 2^20). */
#define SNAP_TABLE_INDEX 0xffffffffU
/* The BASE section's content: base file length u64, table checksum u32, reserved u32. */
#define SNAP_BASE_LEN 16
#define SNAP_HDR_SIZE 64
#define SNAP_ENTRY_SIZE 80
#define SNAP_PAGE 4096U
#define SNAP_CHUNK (2U << 20)
/* 1 TiB of RAM in 2 MiB chunks, plus room for every blob a VM has. */
#define SNAP_MAX_SECTIONS (1U << 20)
#define SNAP_MAX_REGIONS 8
#define SNAP_MAX_RAM (1ULL << 40)
/* Chunks a reader accepts: a bitmap of whole bytes, at most 16 MiB. */
#define SNAP_MIN_CHUNK (8 * SNAP_PAGE)
#define SNAP_MAX_CHUNK (16U << 20)
/* An LZ4 frame with a content checksum: 7-byte header, end mark, checksum. */
#define SNAP_FRAME_MIN 15
/* LZ4 cannot expand more than 255 to 1: a bound for what a frame may claim. */
#define SNAP_MAX_RATIO 256

/* Header field offsets (FORMAT.md). */
enum {
	H_VERSION = 8,
	H_HDR_SIZE = 12,
	H_FLAGS = 16,
	H_ENTRY_SIZE = 20,
	H_FILE_LEN = 24,
	H_TABLE_OFF = 32,
	H_TABLE_LEN = 40,
	H_TABLE_COUNT = 48,
	H_TABLE_CSUM = 52,
	H_RESERVED = 56,
};

/* One row of the section table, in host order (on disk: FORMAT.md). */
struct snap_entry {
	uint32_t type;
	uint32_t id;
	uint64_t off;    /* of the LZ4 frame in the file */
	uint64_t stored; /* bytes of the frame */
	uint64_t raw;    /* bytes of its content */
	uint32_t csum;   /* the frame's content checksum (its last 4 bytes) */
	uint32_t flags;  /* 0 in version 1 */
	char name[SNAP_NAME_MAX + 1];
};

struct snap_writer {
	int fd;
	int err; /* first error; commit returns it */
	int has_memory;
	uint32_t flags;      /* header flags: SNAP_FLAG_DIFF once a base is set */
	struct snap_key key; /* with SNAP_FLAG_SEALED */
	uint8_t salt[SNAP_SALT_LEN];
	uint8_t *seal_buf; /* a frame and its tag, sealed */
	size_t seal_cap;
	char *path;
	char *tmp;
	uint64_t off; /* where the next section goes */
	struct snap_entry *ents;
	uint32_t nr, cap;
};

struct snap_ram {
	uint64_t ram_size;
	uint32_t chunk_size;
	uint32_t nr_chunks;
	uint32_t nr_regions;
	struct {
		uint64_t gpa, size;
	} regions[SNAP_MAX_REGIONS];
};

struct snap_reader {
	int fd;
	char *path;
	struct snap_entry *ents;
	uint32_t nr;
	int has_ram;
	struct snap_ram ram;
	uint32_t *mem_secs; /* table indices of the memory chunks, by chunk index */
	uint32_t nr_mem;
	uint64_t mem_max_stored; /* of any chunk: the size of a read buffer */
	uint64_t file_len;       /* from the header: with table_sum, what the file is */
	uint32_t table_sum;
	uint32_t flags;      /* header flags */
	struct snap_key key; /* with SNAP_FLAG_SEALED */
	uint8_t salt[SNAP_SALT_LEN];
	uint64_t base_len; /* with SNAP_FLAG_DIFF: the base snapshot's identity */
	uint32_t base_sum;
};

/* The RAM layout section: a fixed part, then nr_regions (gpa, size) pairs. */
#define SNAP_RAM_FIXED 24
#define SNAP_RAM_REGION 16

static inline void snap_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void snap_put64(uint8_t *p, uint64_t v)
{
	snap_put32(p, (uint32_t)v);
	snap_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t snap_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t snap_get64(const uint8_t *p)
{
	return snap_get32(p) | (uint64_t)snap_get32(p + 4) << 32;
}

/* "snapshot PATH: " followed by the message, into err. */
void snap_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "section 3 (memory chunk 17)" for messages. */
void snap_describe(const struct snap_reader *r, uint32_t i, char *buf, size_t len);

/* The largest frame snap_frame_compress() can make of len bytes. */
size_t snap_frame_bound(size_t len);
/* Decompresses one whole frame (stored bytes) into exactly raw bytes whose checksum is csum. */
int snap_frame_decompress(LZ4F_dctx *dctx, const uint8_t *src, size_t stored, void *dst, size_t raw,
                          uint32_t csum, char *why, size_t whylen);
/* The largest frame of len bytes any writer could make (a reader's bound; len <= stored). */
size_t snap_frame_limit(size_t len);

/*
 * Compresses src into one LZ4 frame (content size, block and content
 * checksums) in dst; cctx may be NULL for a one-off. 0 or -ENOMEM/-EIO.
 */
int snap_frame_compress(LZ4F_cctx *cctx, void *dst, size_t cap, const void *src, size_t len,
                        size_t *stored, uint32_t *csum);

/*
 * Reads section i of the table and decompresses it into dst (ents[i].raw
 * bytes), verifying every checksum; dctx may be NULL for a one-off, src is
 * a buffer of ents[i].stored bytes or NULL to allocate one. 0, -EIO, -ENOMEM.
 */
int snap_section_read(struct snap_reader *r, uint32_t i, LZ4F_dctx *dctx, void *src, void *dst,
                      char *err, size_t errlen);

/* Writes a finished frame as the next section. 0 or -errno (also kept in w->err). */
int snap_writer_put(struct snap_writer *w, uint32_t type, uint32_t id, const char *name,
                    const void *frame, size_t stored, size_t raw, uint32_t csum);

/* A section's place, claimed in file order; its frame is written later. */
struct snap_slot {
	uint32_t index; /* in the table, and a sealed frame's nonce */
	uint64_t off;
	size_t stored; /* the frame's bytes, before any tag */
};

/*
 * snap_writer_put() in two halves, for writers on several threads: claim
 * the next section's place (in file order, under the caller's lock), then
 * seal and write its frame there (on any thread, at the same time as
 * others). frame has cap bytes of room: stored plus snap_tag_len(). A
 * failed fill leaves a hole: the caller must fail the writer (w->err).
 * 0 or -errno.
 */
int snap_writer_claim(struct snap_writer *w, uint32_t type, uint32_t id, size_t stored, size_t raw,
                      uint32_t csum, struct snap_slot *slot) __attribute__((warn_unused_result));
int snap_writer_fill(const struct snap_writer *w, const struct snap_slot *slot, uint8_t *frame,
                     size_t cap) __attribute__((warn_unused_result));

/* Bytes of a stored frame that are its tag: SNAP_TAG_LEN in a sealed file, else 0. */
static inline uint64_t snap_tag_len(uint32_t flags)
{
	return flags & SNAP_FLAG_SEALED ? SNAP_TAG_LEN : 0;
}

/* A new random salt for a sealed file. 0 or -errno. */
int snap_salt_new(uint8_t salt[SNAP_SALT_LEN]);
/*
 * Encrypts len bytes of buf in place as frame `index` of the file with
 * this salt, and gives its tag; snap_unseal() decrypts and checks the tag
 * (-EBADMSG: a wrong key or an altered byte). 0 or -errno.
 */
int snap_seal(const struct snap_key *key, const uint8_t salt[SNAP_SALT_LEN], uint32_t index,
              uint8_t *buf, size_t len, uint8_t tag[SNAP_TAG_LEN]);
int snap_unseal(const struct snap_key *key, const uint8_t salt[SNAP_SALT_LEN], uint32_t index,
                uint8_t *buf, size_t len, const uint8_t tag[SNAP_TAG_LEN]);

/* Reads (write 0) or writes all len bytes at off: 0, -errno, or -EIO at the end of the file. */
int snap_pio_all(int fd, void *buf, size_t len, uint64_t off, int write);

static inline int snap_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return snap_pio_all(fd, (void *)buf, len, off, 1);
}

/* Called by snap_reader_open() once the table is sound: checks the RAM layout and chunks. */
int snap_mem_check(struct snap_reader *r, char *err, size_t errlen);

/*
 * A diff's base RAM as a writer compares against it: the memory file mapped
 * read-only, and which of its pages are holes (zero, and never touched here:
 * a read of a hole through a mapping would add a page to a tmpfs file).
 */
struct snap_base_view {
	const uint8_t *map;
	uint64_t size;
	uint8_t *holes; /* a bit per page, set for a hole */
};

/* populate: map the file's data pages up front (a diff about to compare them all). */
int snap_base_view_open(struct snap_base_view *v, int fd, uint64_t size, bool populate);
void snap_base_view_close(struct snap_base_view *v);

/* The base's page at offset off (page-aligned, below size), or NULL for a hole (zero). */
static inline const uint8_t *snap_base_page(const struct snap_base_view *v, uint64_t off)
{
	uint64_t pg = off / 4096;

	return v->holes[pg / 8] >> (pg % 8) & 1 ? NULL : v->map + off;
}

/* Called by snap_reader_open() last: a diff names its base, a full file names none. */
int snap_base_check(struct snap_reader *r, char *err, size_t errlen);

/* Bytes of the present-page bitmap at the start of a chunk's content. */
size_t snap_bitmap_bytes(uint32_t chunk_size);

/* Where chunk `index` (below ram->nr_chunks) of the layout starts in the guest. */
uint64_t snap_chunk_gpa(const struct snap_ram *ram, uint32_t index);

/* threads limited to 1..SNAP_MAX_THREADS and to the number of jobs. */
int snap_threads_clamp(int threads, uint32_t jobs);

/*
 * Runs fn on `threads` threads, the caller's among them, and waits for all.
 * A thread that cannot be started just leaves its share to the others.
 */
void snap_run_threads(void *(*fn)(void *), void *arg, int threads);

#endif
