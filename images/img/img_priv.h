/* SPDX-License-Identifier: MIT */
#ifndef HUSK_IMG_PRIV_H
#define HUSK_IMG_PRIV_H

/*
 * Internals shared by the image library's files: the open image, the qcow2
 * state, and the helpers every backend uses. Nothing here is exported.
 */
#include <endian.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "img.h"

#define IMG_MAX_DEPTH 16

/* qcow2 constants (docs/interop/qcow2.txt in QEMU). */
#define QCOW_MAGIC 0x514649fbu
#define QCOW_OFLAG_COPIED (1ull << 63)
#define QCOW_OFLAG_COMPRESSED (1ull << 62)
#define QCOW_OFLAG_ZERO 1ull
#define QCOW_OFFSET_MASK 0x00fffffffffffe00ull /* bits 9..55 of L1 and L2 entries */
#define QCOW_L1_RESERVED 0x7f000000000001ffull
#define QCOW_L2_RESERVED 0x3f000000000001feull
#define QCOW_RT_RESERVED 0x1ffull
#define QCOW_HDR_V3_LEN 104
#define QCOW_EXT_END 0u
#define QCOW_EXT_BACKING_FMT 0xe2792acau
#define QCOW_EXT_FEATURES 0x6803f857u
#define QCOW_EXT_CRYPTO 0x0537be77u /* full disk encryption header: offset, length */
#define QCOW_CRYPT_LUKS 2u
#define QCOW_BACKING_NAME_MAX 1023
/* QEMU's own limits: 32 MiB of L1 table, 8 MiB of refcount table. */
#define QCOW_MAX_L1_BYTES (32u << 20)
#define QCOW_MAX_RT_BYTES (8u << 20)
/* Host offsets L2 entries can hold. */
#define QCOW_MAX_HOST (1ull << 56)

/* Header field offsets we rewrite in place. */
#define QCOW_HDR_BACKING_OFF 8
#define QCOW_HDR_L1_SIZE 36
#define QCOW_HDR_RT_OFF 48
#define QCOW_HDR_AUTOCLEAR 88

/* A small write-back cache of one kind of metadata cluster (L2 tables or refcount blocks). */
struct qcache {
	unsigned n;
	uint8_t *data; /* n clusters, mapped (len bytes) */
	size_t len;
	uint64_t *off;   /* host offset each slot holds; 0 = empty */
	uint64_t *stamp; /* last use, for LRU eviction */
	bool *dirty;
	uint64_t clock;
	unsigned hint; /* slot of the last hit: sequential I/O stays in one table */
};

/* A cluster range whose refcount drops once the tables no longer naming it are on disk. */
struct qfree {
	uint64_t off, n;
};

struct qcow {
	unsigned cluster_bits;
	uint64_t cs;      /* cluster size */
	unsigned l2_bits; /* log2 of entries per L2 table */
	uint32_t l1_size;
	uint64_t l1_off;
	uint64_t *l1; /* big-endian, as on disk */
	uint32_t l1_dirty_lo, l1_dirty_hi;
	uint64_t rt_off;
	uint32_t rt_clusters;
	uint64_t rt_entries;
	uint64_t *rt; /* big-endian, as on disk */
	unsigned rc_order;
	uint64_t rc_max;
	unsigned rb_bits;  /* log2 of entries per refcount block */
	uint64_t file_end; /* where the next cluster is allocated */
	uint64_t file_size;
	uint32_t hdr_len;
	uint64_t incompat, compat, autoclear;
	struct qcache l2c, rbc;
	uint8_t *bounce; /* RW only: two clusters, head and tail of a copy-on-write */
	struct qfree *frees;
	size_t nr_frees, cap_frees;
	uint32_t crypt_method;     /* 0, or QCOW_CRYPT_LUKS */
	uint64_t fde_off, fde_len; /* the LUKS header's clusters */
	struct qcrypt *crypt;      /* the master key once opened (qcow_luks.c), else NULL */
};

struct img {
	enum img_format fmt;
	int fd;
	bool rdonly;
	char *path;
	uint64_t size;
	dev_t dev;
	ino_t ino;
	struct img *backing;
	char *backing_name;                /* as stored in the header */
	enum img_format backing_fmt;       /* as recorded; AUTO when not recorded */
	struct qcow *q;                    /* NULL for raw */
	const struct img_secrets *secrets; /* while it opens: the keys of encrypted images */
	char errbuf[256];
};

static inline uint16_t get_be16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t get_be32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t get_be64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void put_be16(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be32(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void put_be64(void *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

/* img.c */
int img_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int img_seterr(struct img *img, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int img_pread_full(int fd, void *buf, size_t len, uint64_t off) __attribute__((warn_unused_result));
int img_pwritev_full(int fd, struct iovec *iov, int iovcnt, uint64_t off)
	__attribute__((warn_unused_result));
int img_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
int img_datasync(struct img *img) __attribute__((warn_unused_result));
int img_read_backing(struct img *img, void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
int img_open_depth(struct img **out, const char *path, enum img_format fmt, unsigned flags,
                   const struct img *const *chain, int depth, const struct img_secrets *secrets,
                   char *err, size_t errlen) __attribute__((warn_unused_result));
int img_open_backing(struct img *img, const struct img *const *chain, int depth, char *err,
                     size_t errlen) __attribute__((warn_unused_result));
int img_probe(const char *path, enum img_format *fmt, char *err, size_t errlen)
	__attribute__((warn_unused_result));
const char *img_fmt_name(enum img_format fmt);

/* qcow_create.c: new files appear whole, under their name, or not at all */
int img_tmpfile(const char *path, char **tmp);
int img_publish(const char *tmp, const char *path, bool replace)
	__attribute__((warn_unused_result));

/* qcow.c: the header and the tables it points to */
int qcow_open(struct img *img, char *err, size_t errlen) __attribute__((warn_unused_result));
void qcow_free(struct img *img);
int qcow_header_exts(uint8_t *hdr, size_t cs, const uint8_t *old, const char *backing,
                     enum img_format fmt, bool features) __attribute__((warn_unused_result));

/* qcow_io.c: guest reads and writes */
int qcow_read(struct img *img, uint8_t *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
int qcow_write(struct img *img, const uint8_t *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));
int qcow_map(struct img *img, uint64_t off, uint64_t *run) __attribute__((warn_unused_result));
int qcow_set_backing(struct img *img, const char *name, enum img_format fmt)
	__attribute__((warn_unused_result));

/* qcow_luks.c: encrypted images (LUKS in qcow2, as QEMU) */
int qcow_luks_open(struct img *img, const void *pass, size_t plen, bool master, char *err,
                   size_t errlen) __attribute__((warn_unused_result));
void qcow_luks_free(struct qcow *q);
/* Bytes of the LUKS header and key slots QEMU's layout takes. */
uint64_t qcow_luks_len(void);
/* Writes a new LUKS header whose slot 0 pass opens, at fde_off of fd; its master key
 * (IMG_MASTER_KEY_LEN bytes) into mk_out if not NULL. 0 or -errno. */
int qcow_luks_format(int fd, uint64_t fde_off, const void *pass, size_t plen, uint8_t *mk_out)
	__attribute__((warn_unused_result));
/* Encrypts (enc) or decrypts len bytes (whole sectors) that live at host offset host. */
int qcow_crypt(struct img *img, uint8_t *buf, size_t len, uint64_t host, bool enc)
	__attribute__((warn_unused_result));

/* qcow_meta.c: the metadata caches, L2 tables, flush ordering */
int qcache_init(struct qcache *c, unsigned n, uint64_t cs) __attribute__((warn_unused_result));
void qcache_free(struct qcache *c);
int qcache_get(struct img *img, struct qcache *c, uint64_t off, bool fresh, unsigned *slot)
	__attribute__((warn_unused_result));
void qcache_drop(struct qcache *c, uint64_t off);
int qcow_rb_get_block(struct img *img, uint64_t off, bool fresh, uint8_t **block)
	__attribute__((warn_unused_result));
void qcow_rb_dirty(struct img *img, const uint8_t *block);
int qcow_l2_get(struct img *img, uint64_t l2_off, bool fresh, uint64_t **table)
	__attribute__((warn_unused_result));
void qcow_l2_dirty(struct img *img, const uint64_t *table);
int qcow_l2_for(struct img *img, uint64_t off, bool alloc, uint64_t **table)
	__attribute__((warn_unused_result));
int qcow_flush(struct img *img) __attribute__((warn_unused_result));
void qcow_free_later(struct img *img, uint64_t off, uint64_t n);
int qcow_check_host(struct img *img, uint64_t host, uint64_t len)
	__attribute__((warn_unused_result));

/* qcow_refcount.c: refcounts and cluster allocation */
uint64_t qcow_rb_get(const uint8_t *block, unsigned order, uint64_t i);
void qcow_rb_set(uint8_t *block, unsigned order, uint64_t i, uint64_t v);
int qcow_rb_write_dirty(struct img *img) __attribute__((warn_unused_result));
int qcow_refcount(struct img *img, uint64_t cluster, uint64_t *val)
	__attribute__((warn_unused_result));
int qcow_refcount_add(struct img *img, uint64_t cluster, uint64_t n, int delta)
	__attribute__((warn_unused_result));
int qcow_alloc(struct img *img, uint64_t want, uint64_t *host, uint64_t *got)
	__attribute__((warn_unused_result));
void qcow_unalloc(struct img *img, uint64_t host, uint64_t n);

#endif
