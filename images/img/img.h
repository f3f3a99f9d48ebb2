/* SPDX-License-Identifier: MIT */
#ifndef HUSK_IMG_H
#define HUSK_IMG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Disk images: husk's copy-on-write format (a subset of qcow2 version 3, so
 * `qemu-img check` can audit every file we write) and raw files, behind one
 * interface. An open image carries its whole backing chain, opened
 * read-only: a base is never written through a child.
 *
 * One opener per image and one thread at a time per open image; the caller
 * serializes. Every function returns 0 or a negative errno; the ones that
 * can fail for a reason a user should read also fill err (errlen bytes, NUL
 * terminated) with one line naming the problem and, where there is one, the
 * fix (e.g. "base.qcow2: compressed clusters are not supported; convert the
 * image with 'qemu-img convert -O qcow2' first").
 */

struct img;

enum img_format {
	IMG_FMT_AUTO = 0, /* qcow2 if the file starts with its magic, else refused */
	IMG_FMT_QCOW2,
	IMG_FMT_RAW, /* never guessed: a guest could write a qcow2 header into a raw disk */
};

#define IMG_RDONLY 0x1u
/*
 * Addition: open the image alone, without its backing chain (to inspect or
 * check it, or to point it at a moved backing file with img_rebase(unsafe)).
 * Reads of what it leaves to its backing fail with -EIO.
 */
#define IMG_NOBACKING 0x2u

/* Largest virtual size we create or open: 2^50 bytes (1 PiB). */
#define IMG_MAX_SIZE (1ull << 50)

/*
 * Opens path as fmt with its backing chain (at most 16 deep; a backing path
 * that is relative is taken relative to the directory of the image naming
 * it). Refuses what we do not support (compression, encryption, internal
 * snapshots, external data files, extended L2, an incompatible feature bit
 * we do not know, a set "corrupt" bit, a "dirty" bit) with -ENOTSUP or
 * -EINVAL and a message; never crashes on a corrupt file.
 */
int img_open(struct img **out, const char *path, enum img_format fmt, unsigned flags, char *err,
             size_t errlen) __attribute__((warn_unused_result));

/* Flushes (see img_flush) and closes the image and its backing chain. */
int img_close(struct img *img);

/* Virtual size in bytes. */
uint64_t img_size(const struct img *img);

enum img_format img_format(const struct img *img);

/*
 * Reads len bytes at off. Unallocated ranges read from the backing chain,
 * or as zeros past its end or where there is none. off + len must not pass
 * img_size() (-EINVAL). -EIO if the file cannot be read.
 */
int img_read(struct img *img, void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));

/*
 * Writes len bytes at off, allocating (copy-on-write from the backing chain
 * for partial clusters) as needed. -EROFS on a read-only image, -EINVAL past
 * the end, -ENOSPC/-EIO as the host file system reports.
 *
 * Ordering for crash safety: a data cluster is written before any L2 entry
 * pointing at it, and a refcount is raised on disk before any table entry
 * referring to the cluster reaches the disk; metadata may be cached in memory
 * and is written in that order by img_flush().
 */
int img_write(struct img *img, const void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));

/* Writes cached metadata in a crash-safe order and fdatasync()s: after it returns 0, every
 * completed write survives a crash of the process or the host. */
int img_flush(struct img *img) __attribute__((warn_unused_result));

/* Bytes the image file itself occupies (allocated clusters and metadata). */
uint64_t img_allocated(const struct img *img);

/* The backing image, or NULL. */
struct img *img_backing(const struct img *img);

/* The path the image was opened from. */
const char *img_path(const struct img *img);

/*
 * Whether the cluster-aligned range at off holds data in this layer (1), is
 * left to the backing chain (0), or reads as zeros here (2). *run is set to
 * how many bytes from off share that answer (at least 1 cluster unless at
 * the end). For raw images: always 1. Used by convert, commit and rebase.
 */
int img_map(struct img *img, uint64_t off, uint64_t *run) __attribute__((warn_unused_result));

/*
 * Keys of encrypted images (qcow2 with LUKS, as QEMU makes them): the
 * passphrase of the image at path (matched by device and inode, so any
 * name of it will do). An image of a chain opens with its own entry; one
 * with none opens too, but reading or writing its data fails (-ENOKEY).
 */
struct img_secret {
	const char *path;
	const void *pass;
	size_t len;
	/* pass is the image's master key itself (its len bytes, as img_create gave it): only
	 * checked against the header's digest, no key slot opened (PBKDF2, stripes) */
	bool master;
};
struct img_secrets {
	const struct img_secret *v;
	unsigned n;
};

/* img_open(), with the keys of the encrypted images in the chain (NULL: none). */
int img_open_secrets(struct img **out, const char *path, enum img_format fmt, unsigned flags,
                     const struct img_secrets *secrets, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Whether the image is encrypted (its own data; its backing files may differ). */
int img_encrypted(const struct img *img);
/* Whether it is encrypted and was opened without its key: its data cannot be read. */
int img_key_missing(const struct img *img);

struct img_create_opts {
	uint64_t size;               /* virtual size; 0 with a backing file: the backing's size */
	unsigned cluster_bits;       /* 9..21; 0 means 16 (64 KiB) */
	const char *backing;         /* NULL for none; stored as given */
	enum img_format backing_fmt; /* recorded in the header; AUTO probes qcow2 */
	/* Encrypted (LUKS, aes-xts-plain64) with this passphrase, or NULL; the backing's key in
	 * secrets when it is encrypted too. */
	const void *pass;
	size_t pass_len;
	const struct img_secrets *secrets;
	/* Encrypted: its master key (IMG_MASTER_KEY_LEN bytes) is put here if not NULL. */
	uint8_t *master_out;
};
#define IMG_MASTER_KEY_LEN 64

/*
 * Creates a new qcow2 (version 3, refcount_order 4) image at path, failing
 * with -EEXIST if it exists. The file is written to a temporary name and
 * renamed into place, so a crash never leaves a half-made image.
 */
int img_create(const char *path, const struct img_create_opts *o, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Additions to the interface above. */

/*
 * One line saying why the last failed call on img failed ("" if none did):
 * for logging an I/O error (a corrupt table, ENOSPC) where it happened.
 */
const char *img_error(const struct img *img);

/* For the image tools (husk-img; huskd importing images) from here on. */

/* The backing file name as the header stores it (NULL if none) and its recorded format
 * (IMG_FMT_AUTO when the header does not say). */
const char *img_backing_name(const struct img *img);
enum img_format img_backing_format(const struct img *img);
/* The path a backing name means: as it is if absolute, else beside image_path (malloc'd). */
char *img_resolve(const char *image_path, const char *name);

/* Cluster size of a qcow2 image; 0 for raw. */
uint64_t img_cluster_size(const struct img *img);

struct img_check_result {
	uint64_t corruptions;   /* refcounts below the references, bad offsets, wrong flags */
	uint64_t leaks;         /* clusters counted but unused: wasted space, not damage */
	uint64_t data_clusters; /* guest clusters allocated in this layer */
	uint64_t end_offset;    /* where the used part of the file ends */
};

typedef void (*img_check_fn)(void *opaque, const char *msg);

/*
 * Recounts the references to every cluster of a qcow2 image from its tables
 * and compares them with the stored refcounts, as `qemu-img check` does;
 * report (may be NULL) gets one line per problem. Returns 0 when the check
 * ran (the verdict is in res), -ENOTSUP for raw images, or another negative
 * errno (with err filled) when it could not run. Flushes a writable image
 * first.
 */
int img_check(struct img *img, struct img_check_result *res, img_check_fn report, void *opaque,
              char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Writes the data of img's own layer into its backing file, opened
 * read-write for the purpose (it must be writable, and at least as large).
 * img keeps its data and stays usable, with its backing reopened read-only.
 */
int img_commit(struct img *img, char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Changes the backing file of writable qcow2 image img to backing (as
 * stored: a relative name is relative to img's directory; NULL or "" for
 * none) of format fmt (AUTO: qcow2, which must then be what it is). Unless
 * unsafe, first copies into img every cluster it leaves to its backing
 * where the old and the new chain read differently, so the guest sees the
 * same disk; unsafe only rewrites the header.
 */
int img_rebase(struct img *img, const char *backing, enum img_format fmt, int unsafe, char *err,
               size_t errlen) __attribute__((warn_unused_result));
/* img_rebase(), the new backing chain opened with the keys of its encrypted images. */
int img_rebase_secrets(struct img *img, const char *backing, enum img_format fmt, int unsafe,
                       const struct img_secrets *secrets, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Writes what in reads (through its whole chain) to a new image out of
 * format fmt (qcow2 with clusters of 1 << cluster_bits, 0 for the default;
 * or raw), skipping all-zero clusters (left unallocated, or holes). The file
 * is written under a temporary name and renamed over out when complete.
 */
int img_convert(struct img *in, const char *out, enum img_format fmt, unsigned cluster_bits,
                char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
