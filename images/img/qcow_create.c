// SPDX-License-Identifier: MIT
/*
 * Creating a qcow2 image: header cluster, refcount table, the refcount
 * blocks counting the metadata, and the L1 table, written to a temporary
 * name in the target's directory and renamed into place without replacing
 * anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img_priv.h"

#define DIV_ROUND_UP(x, d) (((x) + (d)-1) / (d))

/* Opens a new file beside path, named so nobody else picks it: the caller renames it. */
int img_tmpfile(const char *path, char **tmp)
{
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path + 1) : 0;
	static unsigned counter;

	for (int tries = 0; tries < 100; tries++) {
		int fd;

		if (asprintf(tmp, "%.*s.%s.tmp-%d-%u", dlen, path, path + dlen, (int)getpid(),
		             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED)) < 0)
			return -ENOMEM;
		fd = open(*tmp, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0666);
		if (fd >= 0)
			return fd;
		free(*tmp);
		*tmp = NULL;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Makes the rename of a new file into dir durable. */
static void sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path + 1)) : strdup(".");
	int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

int img_publish(const char *tmp, const char *path, bool replace)
{
	if (replace) {
		if (rename(tmp, path) < 0)
			return -errno;
	} else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
		/* File systems without RENAME_NOREPLACE: link() refuses to replace too. */
		if (errno != EINVAL && errno != ENOSYS)
			return -errno;
		if (link(tmp, path) < 0)
			return -errno;
		unlink(tmp);
	}
	sync_dir(path);
	return 0;
}

/* Size and format of the backing file, which must open. */
static int probe_backing(const char *path, const struct img_create_opts *o, uint64_t *size,
                         enum img_format *fmt, char *err, size_t errlen)
{
	char *bpath = img_resolve(path, o->backing), inner[512] = "";
	struct img *b;
	int rc;

	if (!bpath)
		return img_errf(err, errlen, -ENOMEM, "out of memory");
	*fmt = o->backing_fmt;
	if (*fmt == IMG_FMT_AUTO) {
		rc = img_probe(bpath, fmt, inner, sizeof(inner));
		if (!rc && *fmt != IMG_FMT_QCOW2)
			rc = img_errf(inner, sizeof(inner), -EINVAL,
			              "%s is not qcow2; if it is raw, give its format (-F raw)",
			              bpath);
		if (rc)
			goto out;
	}
	rc = img_open(&b, bpath, *fmt, IMG_RDONLY, inner, sizeof(inner));
	if (rc)
		goto out;
	if (!*size)
		*size = img_size(b);
	rc = img_close(b);
out:
	if (rc)
		img_errf(err, errlen, rc, "%s: backing file: %s", path, inner);
	free(bpath);
	return rc;
}

/*
 * Clusters: the header, rt refcount table clusters, rb refcount blocks,
 * then l1c L1 clusters; the refcount blocks count all of them.
 */
static int write_image(int fd, uint64_t size, unsigned cb, const char *backing,
                       enum img_format bfmt, const struct img_create_opts *o)
{
	uint64_t cs = 1ull << cb, l1_size, l1c, rt = 1, rb = 1, total, *rtp, fdec = 0;
	uint8_t *buf, *exts = NULL;
	size_t meta;
	int rc;

	l1_size = DIV_ROUND_UP(size, 1ull << (2 * cb - 3));
	l1c = DIV_ROUND_UP(l1_size * 8, cs);
	/* Encrypted: the LUKS header and its key slots follow the L1 table. */
	if (o->pass)
		fdec = DIV_ROUND_UP(qcow_luks_len(), cs);
	for (;;) {
		uint64_t nrb, nrt;

		total = 1 + rt + rb + l1c + fdec;
		nrb = DIV_ROUND_UP(total, cs / 2);
		nrt = DIV_ROUND_UP(nrb, cs / 8);
		if (nrb == rb && nrt == rt)
			break;
		rb = nrb;
		rt = nrt;
	}
	meta = (size_t)((1 + rt + rb) * cs);
	buf = calloc(1, meta);
	if (!buf)
		return -ENOMEM;
	put_be32(buf, QCOW_MAGIC);
	put_be32(buf + 4, 3);
	put_be32(buf + 20, cb);
	put_be64(buf + 24, size);
	put_be32(buf + QCOW_HDR_L1_SIZE, (uint32_t)l1_size);
	put_be64(buf + 40, (1 + rt + rb) * cs);
	put_be64(buf + QCOW_HDR_RT_OFF, cs);
	put_be32(buf + 56, (uint32_t)rt);
	put_be32(buf + 96, 4);
	put_be32(buf + 100, QCOW_HDR_V3_LEN);
	if (fdec) {
		/* The encryption header extension, kept by qcow_header_exts as an old one. */
		rc = -ENOMEM;
		if (!(exts = calloc(1, cs)))
			goto out;
		put_be32(buf + 32, QCOW_CRYPT_LUKS);
		put_be32(exts + 100, QCOW_HDR_V3_LEN);
		put_be32(exts + QCOW_HDR_V3_LEN, QCOW_EXT_CRYPTO);
		put_be32(exts + QCOW_HDR_V3_LEN + 4, 16);
		put_be64(exts + QCOW_HDR_V3_LEN + 8, (1 + rt + rb + l1c) * cs);
		put_be64(exts + QCOW_HDR_V3_LEN + 16, qcow_luks_len());
	}
	rc = qcow_header_exts(buf, cs, exts, backing, bfmt, true);
	if (rc)
		goto out;
	rtp = (uint64_t *)(buf + cs);
	for (uint64_t i = 0; i < rb; i++)
		rtp[i] = htobe64((1 + rt + i) * cs);
	for (uint64_t i = 0; i < total; i++)
		qcow_rb_set(buf + (1 + rt) * cs, 4, i, 1);
	rc = img_pwrite_full(fd, buf, meta, 0);
	/* The L1 table is all zeros: a hole. */
	if (!rc && ftruncate(fd, (off_t)(total * cs)) < 0)
		rc = -errno;
	if (!rc && fdec)
		rc = qcow_luks_format(fd, (1 + rt + rb + l1c) * cs, o->pass, o->pass_len,
		                      o->master_out);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
out:
	free(exts);
	free(buf);
	return rc;
}

int img_create(const char *path, const struct img_create_opts *o, char *err, size_t errlen)
{
	unsigned cb = o->cluster_bits ? o->cluster_bits : 16;
	enum img_format bfmt = IMG_FMT_AUTO;
	uint64_t size = o->size;
	struct stat st;
	char *tmp = NULL;
	int fd, rc;

	if (err && errlen)
		err[0] = '\0';
	if (cb < 9 || cb > 21)
		return img_errf(err, errlen, -EINVAL,
		                "%s: cluster size must be a power of two from 512 bytes to 2 MiB",
		                path);
	if (lstat(path, &st) == 0)
		return img_errf(err, errlen, -EEXIST,
		                "%s: already exists; remove it first or choose another name", path);
	if (o->backing && !o->backing[0])
		return img_errf(err, errlen, -EINVAL, "%s: empty backing file name", path);
	if (o->backing) {
		rc = probe_backing(path, o, &size, &bfmt, err, errlen);
		if (rc)
			return rc;
	}
	if (size % 512)
		return img_errf(err, errlen, -EINVAL,
		                "%s: size %llu is not a multiple of 512 bytes", path,
		                (unsigned long long)size);
	if (size > IMG_MAX_SIZE)
		return img_errf(err, errlen, -EINVAL, "%s: size %llu is over the 1 PiB limit", path,
		                (unsigned long long)size);
	if (DIV_ROUND_UP(size, 1ull << (2 * cb - 3)) * 8 > QCOW_MAX_L1_BYTES)
		return img_errf(err, errlen, -EINVAL,
		                "%s: %llu bytes is too large for %llu-byte clusters; use larger "
		                "clusters",
		                path, (unsigned long long)size, 1ull << cb);
	fd = img_tmpfile(path, &tmp);
	if (fd < 0)
		return img_errf(err, errlen, fd, "%s: cannot create a file beside it: %s", path,
		                strerror(-fd));
	rc = write_image(fd, size, cb, o->backing, bfmt, o);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc == -ENAMETOOLONG)
		img_errf(err, errlen, -EINVAL,
		         "%s: the backing file name does not fit in one %llu-byte cluster; use "
		         "larger clusters or a shorter name",
		         path, 1ull << cb);
	else if (rc)
		img_errf(err, errlen, rc, "%s: cannot write: %s", path, strerror(-rc));
	if (!rc) {
		rc = img_publish(tmp, path, false);
		if (rc)
			img_errf(err, errlen, rc, "%s: %s", path,
			         rc == -EEXIST
			                 ? "already exists; remove it first or choose another name"
			                 : strerror(-rc));
	}
	if (rc) {
		unlink(tmp);
		if (rc == -ENAMETOOLONG)
			rc = -EINVAL;
	}
	free(tmp);
	return rc;
}
