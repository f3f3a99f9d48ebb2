// SPDX-License-Identifier: MIT
/*
 * Whole-image operations built on the interface: commit a layer into its
 * backing file, rebase a layer onto another backing file, convert between
 * formats. They walk the image with img_map() so unallocated space costs
 * nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img_priv.h"

#define CHUNK (1u << 20)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static int is_zero(const uint8_t *p, size_t n)
{
	return !n || (!p[0] && !memcmp(p, p + 1, n - 1));
}

static int raw_zero(struct img *img, uint64_t off, uint64_t *run)
{
	off_t d = lseek(img->fd, (off_t)off, SEEK_DATA), h;

	*run = img->size - off;
	if (d < 0)
		return errno == ENXIO; /* no data after off; other errors: assume data */
	if ((uint64_t)d > off) {
		*run = MIN((uint64_t)d - off, *run);
		return 1;
	}
	h = lseek(img->fd, (off_t)off, SEEK_HOLE);
	if (h > (off_t)off)
		*run = MIN((uint64_t)h - off, *run);
	return 0;
}

/* Whether [off, off + *run) surely reads as zeros through img's chain (1) or may not (0). */
static int chain_zero(struct img *img, uint64_t off, uint64_t *run)
{
	uint64_t r;
	int a;

	if (off >= img->size) {
		*run = UINT64_MAX;
		return 1;
	}
	if (img->fmt == IMG_FMT_RAW)
		return raw_zero(img, off, run);
	a = img_map(img, off, run);
	if (a < 0 || a == 1)
		return a < 0 ? a : 0;
	if (a == 2 || !img->backing)
		return 1;
	a = chain_zero(img->backing, off, &r);
	if (a >= 0 && r < *run)
		*run = r;
	return a;
}

/* Writes what img's own layer holds into dst. */
static int commit_copy(struct img *img, struct img *dst, uint8_t *buf, char *err, size_t errlen)
{
	uint64_t run;

	for (uint64_t off = 0; off < img->size; off += run) {
		int a = img_map(img, off, &run);

		if (a < 0)
			return img_errf(err, errlen, a, "%s", img->errbuf);
		for (uint64_t p = off; a && p < off + run; p += CHUNK) {
			size_t n = (size_t)MIN((uint64_t)CHUNK, off + run - p);
			int rc = 0;

			if (a == 2)
				memset(buf, 0, n);
			else
				rc = img_read(img, buf, n, p);
			if (rc)
				return img_errf(err, errlen, rc, "%s", img->errbuf);
			rc = img_write(dst, buf, n, p);
			if (rc)
				return img_errf(err, errlen, rc, "%s", dst->errbuf);
		}
	}
	return 0;
}

int img_commit(struct img *img, char *err, size_t errlen)
{
	struct img *rw = NULL;
	char inner[512] = "", *bpath;
	enum img_format bfmt;
	uint8_t *buf;
	int rc, rc2;

	if (!img->backing)
		return img_errf(err, errlen, -EINVAL, "%s: no backing file to commit into",
		                img->path);
	if (img->size > img->backing->size)
		return img_errf(
			err, errlen, -EINVAL,
			"%s is larger than its backing file %s; grow the backing file first",
			img->path, img->backing->path);
	buf = malloc(CHUNK);
	bpath = strdup(img->backing->path);
	bfmt = img->backing->fmt;
	if (!buf || !bpath) {
		rc = img_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	/* Our read-only view would block the write lock, and goes stale: reopened after. */
	img_close(img->backing);
	img->backing = NULL;
	rc = img_open(&rw, bpath, bfmt, 0, inner, sizeof(inner));
	if (rc)
		img_errf(err, errlen, rc, "%s: cannot open the backing file for writing: %s",
		         img->path, inner);
	else
		rc = commit_copy(img, rw, buf, err, errlen);
	if (rw) {
		rc2 = img_close(rw);
		if (rc2 && !rc)
			rc = img_errf(err, errlen, rc2, "%s: cannot flush: %s", bpath,
			              strerror(-rc2));
	}
	rc2 = img_open_backing(img, NULL, 0, rc ? inner : err, rc ? sizeof(inner) : errlen);
	if (!rc)
		rc = rc2;
out:
	free(bpath);
	free(buf);
	return rc;
}

/* Copies into img each cluster it leaves to its backing where old and new chains differ. */
static int rebase_copy(struct img *img, struct img *nb, char *err, size_t errlen)
{
	uint64_t cs = img->q->cs, chunk = cs > CHUNK ? cs : CHUNK, run;
	uint8_t *obuf = malloc(chunk), *nbuf = malloc(chunk);
	int rc = -ENOMEM;

	if (!obuf || !nbuf) {
		img_errf(err, errlen, rc, "out of memory");
		goto out;
	}
	for (uint64_t off = 0; off < img->size; off += run) {
		rc = img_map(img, off, &run);
		if (rc < 0)
			goto err_io;
		for (uint64_t p = off; rc == 0 && p < off + run;) {
			uint64_t n = MIN(chunk - p % chunk, off + run - p), nn = 0;

			rc = img_read_backing(img, obuf, n, p);
			if (!rc && nb && p < nb->size) {
				nn = MIN(n, nb->size - p);
				rc = img_read(nb, nbuf, nn, p);
				if (rc)
					img_seterr(img, rc, "%s", nb->errbuf);
			}
			memset(nbuf + nn, 0, n - nn);
			for (uint64_t i = 0; !rc && i < n;) {
				uint64_t g = MIN(cs - (p + i) % cs, n - i);

				if (memcmp(obuf + i, nbuf + i, g))
					rc = img_write(img, obuf + i, g, p + i);
				i += g;
			}
			if (rc)
				goto err_io;
			p += n;
		}
	}
	rc = img_flush(img);
	if (!rc)
		goto out;
err_io:
	img_errf(err, errlen, rc, "%s", img->errbuf);
out:
	free(obuf);
	free(nbuf);
	return rc < 0 ? rc : 0;
}

int img_rebase(struct img *img, const char *backing, enum img_format fmt, int unsafe, char *err,
               size_t errlen)
{
	return img_rebase_secrets(img, backing, fmt, unsafe, NULL, err, errlen);
}

int img_rebase_secrets(struct img *img, const char *backing, enum img_format fmt, int unsafe,
                       const struct img_secrets *secrets, char *err, size_t errlen)
{
	const struct img *chain[1] = {img};
	struct img *nb = NULL;
	char inner[512] = "", *path = NULL;
	int rc;

	if (img->rdonly)
		return img_errf(err, errlen, -EROFS, "%s: opened read-only", img->path);
	if (!img->q)
		return img_errf(err, errlen, -EINVAL, "%s: raw images have no backing file",
		                img->path);
	if (backing && !backing[0])
		backing = NULL;
	if (!unsafe && img->backing_name && !img->backing)
		return img_errf(
			err, errlen, -EINVAL,
			"%s: its backing file is not open, so nothing can be compared; only "
			"an unsafe rebase (-u) can change it",
			img->path);
	if (backing) {
		path = img_resolve(img->path, backing);
		if (!path)
			return img_errf(err, errlen, -ENOMEM, "out of memory");
		rc = 0;
		if (fmt == IMG_FMT_AUTO) {
			rc = img_probe(path, &fmt, inner, sizeof(inner));
			/* Never guess raw: a guest could have written a qcow2 header into it. */
			if (!rc && fmt != IMG_FMT_QCOW2)
				rc = img_errf(
					inner, sizeof(inner), -EINVAL,
					"%s is not qcow2; if it is raw, give its format (-F raw)",
					path);
		}
		if (!rc)
			rc = img_open_depth(&nb, path, fmt, IMG_RDONLY, chain, 1, secrets, inner,
			                    sizeof(inner));
		free(path);
		if (rc)
			return img_errf(err, errlen, rc, "%s: new backing file: %s", img->path,
			                inner);
	}
	if (!unsafe) {
		rc = rebase_copy(img, nb, err, errlen);
		if (rc)
			goto err_close;
	}
	rc = qcow_set_backing(img, backing, nb ? nb->fmt : IMG_FMT_AUTO);
	if (rc) {
		img_errf(err, errlen, rc, "%s", img->errbuf);
		goto err_close;
	}
	img_close(img->backing);
	img->backing = nb;
	return 0;
err_close:
	img_close(nb);
	return rc;
}

/* Writes the nonzero granules of buf (n bytes of guest data at off) to the output. */
static int convert_chunk(struct img *o, int fd, const uint8_t *buf, uint64_t n, uint64_t off,
                         uint64_t gran)
{
	for (uint64_t p = 0; p < n;) {
		uint64_t g = MIN(gran - (off + p) % gran, n - p), e;
		int rc;

		if (is_zero(buf + p, g)) {
			p += g;
			continue;
		}
		for (e = p + g; e < n && !is_zero(buf + e, MIN(gran, n - e)); e += MIN(gran, n - e))
			;
		rc = o ? img_write(o, buf + p, e - p, off + p)
		       : img_pwrite_full(fd, buf + p, e - p, off + p);
		if (rc)
			return rc;
		p = e;
	}
	return 0;
}

static int convert_copy(struct img *in, struct img *o, int fd, uint64_t gran, char *err,
                        size_t errlen)
{
	uint64_t chunk = gran > CHUNK ? gran : CHUNK, run;
	uint8_t *buf = malloc(chunk);
	int rc = 0;

	if (!buf)
		return img_errf(err, errlen, -ENOMEM, "out of memory");
	for (uint64_t off = 0; off < in->size;) {
		uint64_t end;
		int z = chain_zero(in, off, &run);

		if (z < 0) {
			rc = img_errf(err, errlen, z, "%s", in->errbuf);
			break;
		}
		end = MIN(MIN(off + run, in->size), off - off % chunk + chunk);
		if (!z) {
			rc = img_read(in, buf, end - off, off);
			if (rc) {
				img_errf(err, errlen, rc, "%s", in->errbuf);
				break;
			}
			rc = convert_chunk(o, fd, buf, end - off, off, gran);
			if (rc) {
				img_errf(err, errlen, rc, "%s", o ? o->errbuf : strerror(-rc));
				break;
			}
		}
		off = end;
	}
	free(buf);
	return rc;
}

int img_convert(struct img *in, const char *out, enum img_format fmt, unsigned cluster_bits,
                char *err, size_t errlen)
{
	struct img_create_opts co = {.size = (in->size + 511) & ~511ull,
	                             .cluster_bits = cluster_bits};
	struct img *o = NULL;
	char *tmp = NULL;
	int fd, rc;

	if (fmt != IMG_FMT_QCOW2 && fmt != IMG_FMT_RAW)
		return img_errf(err, errlen, -EINVAL, "%s: output format must be qcow2 or raw",
		                out);
	fd = img_tmpfile(out, &tmp);
	if (fd < 0)
		return img_errf(err, errlen, fd, "%s: cannot create a file beside it: %s", out,
		                strerror(-fd));
	if (fmt == IMG_FMT_QCOW2) {
		/* img_create makes its own file, under the name we reserved. */
		close(fd);
		fd = -1;
		unlink(tmp);
		rc = img_create(tmp, &co, err, errlen);
		if (!rc)
			rc = img_open(&o, tmp, IMG_FMT_QCOW2, 0, err, errlen);
	} else {
		rc = ftruncate(fd, (off_t)in->size) < 0 ? -errno : 0;
		if (rc)
			img_errf(err, errlen, rc, "%s: %s", out, strerror(-rc));
	}
	if (!rc)
		rc = convert_copy(in, o, fd, o ? o->q->cs : 4096, err, errlen);
	if (o) {
		int rc2 = img_close(o);

		if (rc2 && !rc)
			rc = img_errf(err, errlen, rc2, "%s: %s", out, strerror(-rc2));
	}
	if (fd >= 0) {
		if (!rc && fsync(fd) < 0)
			rc = img_errf(err, errlen, -errno, "%s: %s", out, strerror(errno));
		close(fd);
	}
	if (!rc) {
		rc = img_publish(tmp, out, true);
		if (rc)
			img_errf(err, errlen, rc, "%s: %s", out, strerror(-rc));
	}
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}
