// SPDX-License-Identifier: MIT
/*
 * The image interface: opening an image and its backing chain, dispatch to
 * the qcow2 code, the raw backend, and the I/O helpers both use.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "img_priv.h"

int img_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int img_seterr(struct img *img, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(img->errbuf, sizeof(img->errbuf), fmt, ap);
	va_end(ap);
	return rc;
}

const char *img_error(const struct img *img)
{
	return img->errbuf;
}

const char *img_fmt_name(enum img_format fmt)
{
	switch (fmt) {
	case IMG_FMT_QCOW2:
		return "qcow2";
	case IMG_FMT_RAW:
		return "raw";
	default:
		return "auto";
	}
}

/* Past the end of the file reads as zeros: QEMU ends files mid-cluster after a short L1 table. */
int img_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int img_pwritev_full(int fd, struct iovec *iov, int iovcnt, uint64_t off)
{
	while (iovcnt) {
		ssize_t n = pwritev(fd, iov, iovcnt, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		off += (uint64_t)n;
		while (iovcnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int img_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = {(void *)buf, len};

	return img_pwritev_full(fd, &iov, 1, off);
}

int img_datasync(struct img *img)
{
	if (fdatasync(img->fd) < 0)
		return img_seterr(img, -errno, "%s: fdatasync: %s", img->path, strerror(errno));
	return 0;
}

int img_read_backing(struct img *img, void *buf, size_t len, uint64_t off)
{
	struct img *b = img->backing;
	size_t n = 0;
	int rc;

	if (!b && img->backing_name)
		return img_seterr(img, -EIO, "%s: opened without its backing file %s", img->path,
		                  img->backing_name);
	if (b && off < b->size) {
		n = b->size - off < len ? (size_t)(b->size - off) : len;
		rc = img_read(b, buf, n, off);
		if (rc)
			return img_seterr(img, rc, "%s", b->errbuf);
	}
	memset((uint8_t *)buf + n, 0, len - n);
	return 0;
}

char *img_resolve(const char *image_path, const char *name)
{
	const char *slash = strrchr(image_path, '/');
	char *s;

	if (name[0] == '/' || !slash)
		return strdup(name);
	if (asprintf(&s, "%.*s/%s", (int)(slash - image_path), image_path, name) < 0)
		return NULL;
	return s;
}

static int probe_fd(int fd, enum img_format *fmt)
{
	uint8_t m[4];
	int rc = img_pread_full(fd, m, sizeof(m), 0);

	if (rc)
		return rc;
	*fmt = get_be32(m) == QCOW_MAGIC ? IMG_FMT_QCOW2 : IMG_FMT_RAW;
	return 0;
}

int img_probe(const char *path, enum img_format *fmt, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return img_errf(err, errlen, -errno, "%s: cannot open: %s", path, strerror(errno));
	rc = probe_fd(fd, fmt);
	close(fd);
	if (rc)
		return img_errf(err, errlen, rc, "%s: cannot read: %s", path, strerror(-rc));
	return 0;
}

int img_open_backing(struct img *img, const struct img *const *chain, int depth, char *err,
                     size_t errlen)
{
	const struct img *up[IMG_MAX_DEPTH + 1];
	enum img_format fmt = img->backing_fmt;
	char inner[512] = "";
	char *path;
	int rc;

	if (depth >= IMG_MAX_DEPTH)
		return img_errf(err, errlen, -EINVAL,
		                "%s: backing chain is deeper than %d images (a loop?)", img->path,
		                IMG_MAX_DEPTH);
	path = img_resolve(img->path, img->backing_name);
	if (!path)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	if (fmt == IMG_FMT_AUTO) {
		/* No recorded format: only qcow2 is taken on its magic, never raw. */
		rc = img_probe(path, &fmt, inner, sizeof(inner));
		if (rc)
			goto err_inner;
		if (fmt != IMG_FMT_QCOW2) {
			rc = img_errf(
				err, errlen, -EINVAL,
				"%s: backing file %s has no recorded format and is not qcow2; "
				"if it is raw, record that with 'husk-img rebase -u -b %s -F raw "
				"%s'",
				img->path, path, img->backing_name, img->path);
			goto out;
		}
	}
	for (int i = 0; i < depth; i++)
		up[i] = chain[i];
	up[depth] = img;
	rc = img_open_depth(&img->backing, path, fmt, IMG_RDONLY, up, depth + 1, img->secrets,
	                    inner, sizeof(inner));
	if (!rc)
		goto out;
err_inner:
	/* Only the top names itself: the message already names the file at fault. */
	if (depth)
		img_errf(err, errlen, rc, "%s", inner);
	else
		img_errf(err, errlen, rc, "%s: backing file: %s%s", img->path, inner,
		         rc == -ENOENT ? "; if it moved, point the image at it with "
		                         "'husk-img rebase -u -b NEW_PATH'"
		                       : "");
out:
	free(path);
	return rc;
}

static int raw_size(struct img *img, const struct stat *st, char *err, size_t errlen)
{
	uint64_t size = (uint64_t)st->st_size;

	if (S_ISBLK(st->st_mode) && ioctl(img->fd, BLKGETSIZE64, &size) < 0)
		return img_errf(err, errlen, -errno, "%s: cannot get the device size: %s",
		                img->path, strerror(errno));
	if (size > IMG_MAX_SIZE)
		return img_errf(err, errlen, -ENOTSUP, "%s: larger than the 1 PiB we support",
		                img->path);
	img->size = size;
	return 0;
}

/* The passphrase secrets hold for the file open as img (same device and inode), or NULL. */
static const struct img_secret *secret_of(const struct img *img, const struct img_secrets *secrets)
{
	struct stat st;

	for (unsigned i = 0; secrets && i < secrets->n; i++)
		if (secrets->v[i].path && stat(secrets->v[i].path, &st) == 0 &&
		    st.st_dev == img->dev && st.st_ino == img->ino)
			return &secrets->v[i];
	return NULL;
}

int img_open_depth(struct img **out, const char *path, enum img_format fmt, unsigned flags,
                   const struct img *const *chain, int depth, const struct img_secrets *secrets,
                   char *err, size_t errlen)
{
	const struct img_secret *key;
	struct img *img;
	struct stat st;
	int rc;

	*out = NULL;
	if (fmt != IMG_FMT_AUTO && fmt != IMG_FMT_QCOW2 && fmt != IMG_FMT_RAW)
		return img_errf(err, errlen, -EINVAL, "%s: unknown image format %d", path, fmt);
	img = calloc(1, sizeof(*img));
	if (!img)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
	img->fd = -1;
	img->rdonly = flags & IMG_RDONLY;
	img->path = strdup(path);
	if (!img->path) {
		rc = img_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto err_free;
	}
	img->fd = open(path, (img->rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (img->fd < 0) {
		rc = img_errf(err, errlen, -errno, "%s: cannot open%s: %s", path,
		              img->rdonly ? "" : " for writing", strerror(errno));
		goto err_free;
	}
	if (fstat(img->fd, &st) < 0) {
		rc = img_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto err_free;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		rc = img_errf(err, errlen, -EINVAL, "%s: not a regular file or block device", path);
		goto err_free;
	}
	img->dev = st.st_dev;
	img->ino = st.st_ino;
	for (int i = 0; i < depth; i++) {
		if (chain[i]->dev == img->dev && chain[i]->ino == img->ino) {
			rc = img_errf(err, errlen, -EINVAL,
			              "%s: backing chain loops: this file is already in the chain "
			              "(as %s)",
			              path, chain[i]->path);
			goto err_free;
		}
	}
	/* Many readers or one writer, across processes: two writers would corrupt the image. */
	if (flock(img->fd, (img->rdonly ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0 &&
	    errno == EWOULDBLOCK) {
		rc = img_errf(err, errlen, -EBUSY,
		              "%s: in use by another process (a running sandbox?)%s", path,
		              img->rdonly ? "" : ", or opened read-only by one");
		goto err_free;
	}
	if (fmt == IMG_FMT_AUTO) {
		rc = probe_fd(img->fd, &fmt);
		if (!rc && fmt != IMG_FMT_QCOW2)
			rc = img_errf(err, errlen, -EINVAL,
			              "%s: not a qcow2 image; if it is a raw disk, say so "
			              "(husk-vmm --disk PATH,format=raw; husk-img -f raw)",
			              path);
		else if (rc)
			img_errf(err, errlen, rc, "%s: cannot read: %s", path, strerror(-rc));
		if (rc)
			goto err_free;
	}
	img->fmt = fmt;
	if (fmt == IMG_FMT_RAW)
		rc = raw_size(img, &st, err, errlen);
	else
		rc = qcow_open(img, err, errlen);
	if (!rc && img->q && img->q->crypt_method && (key = secret_of(img, secrets)))
		rc = qcow_luks_open(img, key->pass, key->len, key->master, err, errlen);
	if (rc)
		goto err_free;
	img->secrets = secrets; /* for its backing file, only while it opens */
	if (img->backing_name && !(flags & IMG_NOBACKING)) {
		rc = img_open_backing(img, chain, depth, err, errlen);
		if (rc)
			goto err_free;
	}
	img->secrets = NULL;
	*out = img;
	return 0;

err_free:
	qcow_free(img);
	if (img->fd >= 0)
		close(img->fd);
	free(img->backing_name);
	free(img->path);
	free(img);
	return rc;
}

int img_open(struct img **out, const char *path, enum img_format fmt, unsigned flags, char *err,
             size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	return img_open_depth(out, path, fmt, flags, NULL, 0, NULL, err, errlen);
}

int img_open_secrets(struct img **out, const char *path, enum img_format fmt, unsigned flags,
                     const struct img_secrets *secrets, char *err, size_t errlen)
{
	return img_open_depth(out, path, fmt, flags, NULL, 0, secrets, err, errlen);
}

int img_key_missing(const struct img *img)
{
	return img->q && img->q->crypt_method && !img->q->crypt;
}

int img_encrypted(const struct img *img)
{
	return img->q && img->q->crypt_method;
}

int img_close(struct img *img)
{
	int rc = 0, rc2;

	if (!img)
		return 0;
	if (!img->rdonly)
		rc = img_flush(img);
	qcow_free(img);
	if (close(img->fd) < 0 && !rc)
		rc = -errno;
	rc2 = img_close(img->backing);
	free(img->backing_name);
	free(img->path);
	free(img);
	return rc ? rc : rc2;
}

uint64_t img_size(const struct img *img)
{
	return img->size;
}

enum img_format img_format(const struct img *img)
{
	return img->fmt;
}

static int check_range(struct img *img, size_t len, uint64_t off)
{
	if (off > img->size || len > img->size - off)
		return img_seterr(
			img, -EINVAL, "%s: access of %zu bytes at %llu passes the end (%llu bytes)",
			img->path, len, (unsigned long long)off, (unsigned long long)img->size);
	return 0;
}

int img_read(struct img *img, void *buf, size_t len, uint64_t off)
{
	int rc = check_range(img, len, off);

	if (rc || !len)
		return rc;
	if (img->fmt == IMG_FMT_QCOW2)
		return qcow_read(img, buf, len, off);
	rc = img_pread_full(img->fd, buf, len, off);
	if (rc)
		return img_seterr(img, rc, "%s: read: %s", img->path, strerror(-rc));
	return 0;
}

int img_write(struct img *img, const void *buf, size_t len, uint64_t off)
{
	int rc;

	if (img->rdonly)
		return img_seterr(img, -EROFS, "%s: opened read-only", img->path);
	rc = check_range(img, len, off);
	if (rc || !len)
		return rc;
	if (img->fmt == IMG_FMT_QCOW2)
		return qcow_write(img, buf, len, off);
	rc = img_pwrite_full(img->fd, buf, len, off);
	if (rc)
		return img_seterr(img, rc, "%s: write: %s", img->path, strerror(-rc));
	return 0;
}

int img_flush(struct img *img)
{
	if (img->rdonly)
		return 0;
	if (img->fmt == IMG_FMT_QCOW2)
		return qcow_flush(img);
	return img_datasync(img);
}

uint64_t img_allocated(const struct img *img)
{
	struct stat st;

	if (fstat(img->fd, &st) < 0)
		return 0;
	return (uint64_t)st.st_blocks * 512;
}

struct img *img_backing(const struct img *img)
{
	return img->backing;
}

const char *img_path(const struct img *img)
{
	return img->path;
}

const char *img_backing_name(const struct img *img)
{
	return img->backing_name;
}

enum img_format img_backing_format(const struct img *img)
{
	return img->backing_fmt;
}

uint64_t img_cluster_size(const struct img *img)
{
	return img->q ? img->q->cs : 0;
}

int img_map(struct img *img, uint64_t off, uint64_t *run)
{
	if (off >= img->size)
		return img_seterr(img, -EINVAL, "%s: map at %llu passes the end", img->path,
		                  (unsigned long long)off);
	if (img->fmt == IMG_FMT_QCOW2)
		return qcow_map(img, off, run);
	*run = img->size - off;
	return 1;
}
