// SPDX-License-Identifier: MIT
/*
 * qcow2 guest reads and writes. A request is cut into runs of clusters that
 * map alike (and, for data, contiguously on the host), so sequential I/O
 * becomes one pread or pwrite per run. Writes to clusters this layer owns
 * go in place; others get new clusters at the end of the file, filled
 * around the written bytes from the backing chain (or zeros), then the L2
 * entries are switched in the cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "img_priv.h"

enum qkind { QK_UNALLOC, QK_ZERO, QK_DATA, QK_COMPRESSED };

struct qrun {
	enum qkind kind;
	bool copied;   /* QK_DATA: refcount 1, writable in place */
	uint64_t host; /* QK_DATA: host offset of the run's first byte */
	uint64_t len;
};

static int classify(struct img *img, uint64_t e, uint64_t guest, enum qkind *kind, uint64_t *host)
{
	struct qcow *q = img->q;

	*host = e & QCOW_OFFSET_MASK;
	if (e & QCOW_OFLAG_COMPRESSED) {
		*kind = QK_COMPRESSED;
		return 0;
	}
	if (e & QCOW_L2_RESERVED)
		return img_seterr(img, -EINVAL,
		                  "%s: corrupt image: L2 entry for guest offset %llu has reserved "
		                  "bits set; run 'husk-img check'",
		                  img->path, (unsigned long long)guest);
	if (*host % q->cs || *host >= q->file_end)
		return img_seterr(
			img, -EINVAL,
			"%s: corrupt image: cluster for guest offset %llu at %llu is %s; run "
			"'husk-img check'",
			img->path, (unsigned long long)guest, (unsigned long long)*host,
			*host % q->cs ? "not aligned" : "past the end of the file");
	if (e & QCOW_OFLAG_ZERO)
		*kind = QK_ZERO;
	else if (*host)
		*kind = QK_DATA;
	else if (e & QCOW_OFLAG_COPIED)
		return img_seterr(img, -EINVAL,
		                  "%s: corrupt image: guest offset %llu maps to host offset 0",
		                  img->path, (unsigned long long)guest);
	else
		*kind = QK_UNALLOC;
	return 0;
}

/* The run starting at guest offset off, at most max bytes and within one L2 table. */
static int lookup(struct img *img, uint64_t off, uint64_t max, struct qrun *r)
{
	struct qcow *q = img->q;
	uint64_t cs = q->cs, span = 1ull << (q->cluster_bits + q->l2_bits);
	uint64_t in = off & (cs - 1), base, e, i, j;
	uint64_t *t;
	int rc;

	if (max > span - (off & (span - 1)))
		max = span - (off & (span - 1));
	rc = qcow_l2_for(img, off, false, &t);
	if (rc)
		return rc;
	if (!t) {
		*r = (struct qrun){.kind = QK_UNALLOC, .len = max};
		return 0;
	}
	i = (off >> q->cluster_bits) & ((1ull << q->l2_bits) - 1);
	e = be64toh(t[i]);
	rc = classify(img, e, off, &r->kind, &base);
	if (rc)
		return rc;
	r->copied = e & QCOW_OFLAG_COPIED;
	r->host = base + in;
	for (j = 1; r->kind != QK_COMPRESSED && j * cs - in < max; j++) {
		uint64_t e2 = be64toh(t[i + j]), h2;
		enum qkind k2;

		/* A bad entry ends the run; the next lookup reports it. */
		if (classify(img, e2, off + j * cs - in, &k2, &h2) || k2 != r->kind)
			break;
		if (k2 == QK_DATA &&
		    (h2 != base + j * cs || (e2 & QCOW_OFLAG_COPIED) != (e & QCOW_OFLAG_COPIED)))
			break;
	}
	r->len = j * cs - in < max ? j * cs - in : max;
	return 0;
}

/*
 * This layer's data at host offset host, decrypted when the image is
 * encrypted (whole 512-byte sectors: an unaligned piece reads its sectors).
 */
static int data_read(struct img *img, uint8_t *buf, uint64_t len, uint64_t host)
{
	uint64_t a = host & ~511ull, e = (host + len + 511) & ~511ull;
	uint8_t *tmp = buf;
	int rc;

	if (!img->q->crypt_method || (a == host && e == host + len)) {
		rc = img_pread_full(img->fd, buf, len, host);
	} else {
		tmp = malloc(e - a);
		rc = tmp ? img_pread_full(img->fd, tmp, e - a, a) : -ENOMEM;
	}
	if (rc)
		img_seterr(img, rc, "%s: read: %s", img->path, strerror(-rc));
	else if (img->q->crypt_method)
		rc = qcow_crypt(img, tmp, e - a, a, false);
	if (tmp != buf) {
		if (!rc)
			memcpy(buf, tmp + (host - a), len);
		free(tmp);
	}
	return rc;
}

/* Writes len bytes of data at host offset host, encrypted when the image is: whole sectors. */
static int data_write(struct img *img, const uint8_t *buf, uint64_t len, uint64_t host)
{
	uint64_t a = host & ~511ull, e = (host + len + 511) & ~511ull;
	uint8_t *tmp;
	int rc = 0;

	if (!img->q->crypt_method) {
		rc = img_pwrite_full(img->fd, buf, len, host);
		if (rc)
			img_seterr(img, rc, "%s: write: %s", img->path, strerror(-rc));
		return rc;
	}
	tmp = malloc(e - a);
	if (!tmp)
		return img_seterr(img, -ENOMEM, "%s: out of memory", img->path);
	/* A piece of a sector: the rest of it is read and written back with it. */
	if (a != host || e != host + len)
		rc = data_read(img, tmp, e - a, a);
	if (!rc) {
		memcpy(tmp + (host - a), buf, len);
		rc = qcow_crypt(img, tmp, e - a, a, true);
	}
	if (!rc && (rc = img_pwrite_full(img->fd, tmp, e - a, a)))
		img_seterr(img, rc, "%s: write: %s", img->path, strerror(-rc));
	free(tmp);
	return rc;
}

static int compressed(struct img *img, uint64_t off)
{
	return img_seterr(img, -ENOTSUP,
	                  "%s: compressed clusters are not supported (guest offset %llu); convert "
	                  "the image with 'qemu-img convert -O qcow2' first",
	                  img->path, (unsigned long long)off);
}

int qcow_read(struct img *img, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		struct qrun r;
		int rc = lookup(img, off, len, &r);

		if (rc)
			return rc;
		switch (r.kind) {
		case QK_UNALLOC:
			rc = img_read_backing(img, buf, r.len, off);
			break;
		case QK_ZERO:
			memset(buf, 0, r.len);
			break;
		case QK_DATA:
			rc = data_read(img, buf, r.len, r.host);
			break;
		case QK_COMPRESSED:
			rc = compressed(img, off);
			break;
		}
		if (rc)
			return rc;
		buf += r.len;
		off += r.len;
		len -= r.len;
	}
	return 0;
}

/* What guest bytes [goff, goff + n) of run r held before the write: the copy-on-write source. */
static int fill(struct img *img, const struct qrun *r, uint8_t *dst, uint64_t goff, uint64_t n,
                uint64_t off)
{
	if (!n)
		return 0;
	switch (r->kind) {
	case QK_UNALLOC:
		return img_read_backing(img, dst, n, goff);
	case QK_DATA:
		return data_read(img, dst, n, r->host - off + goff);
	default:
		memset(dst, 0, n);
		return 0;
	}
}

/* Writes the start of run r (len bytes at off) into newly allocated clusters. */
static int write_new(struct img *img, const uint8_t *buf, uint64_t len, uint64_t off,
                     const struct qrun *r, uint64_t *done)
{
	struct qcow *q = img->q;
	uint64_t cs = q->cs, c0 = off >> q->cluster_bits, host, got, start, wend, head, tail, i;
	struct iovec iov[3];
	uint64_t *t;
	int rc;

	rc = qcow_l2_for(img, off, true, &t);
	if (!rc)
		rc = qcow_alloc(img, ((off + len + cs - 1) >> q->cluster_bits) - c0, &host, &got);
	if (rc)
		return rc;
	start = c0 << q->cluster_bits;
	wend = (c0 + got) << q->cluster_bits;
	wend = off + len < wend ? off + len : wend;
	head = off - start;
	tail = ((wend + cs - 1) & ~(cs - 1)) - wend;
	rc = fill(img, r, q->bounce, start, head, off);
	if (!rc)
		rc = fill(img, r, q->bounce + cs, wend, tail, off);
	if (!rc && q->crypt_method) {
		/* Whole clusters, so whole sectors: one buffer, encrypted where it will lie. */
		uint8_t *all = malloc(head + (wend - off) + tail);

		rc = all ? 0 : img_seterr(img, -ENOMEM, "%s: out of memory", img->path);
		if (!rc) {
			memcpy(all, q->bounce, head);
			memcpy(all + head, buf, wend - off);
			memcpy(all + head + (wend - off), q->bounce + cs, tail);
			rc = data_write(img, all, head + (wend - off) + tail, host);
		}
		free(all);
	} else if (!rc) {
		iov[0] = (struct iovec){q->bounce, head};
		iov[1] = (struct iovec){(void *)buf, wend - off};
		iov[2] = (struct iovec){q->bounce + cs, tail};
		rc = img_pwritev_full(img->fd, iov, 3, host);
		if (rc)
			img_seterr(img, rc, "%s: write: %s", img->path, strerror(-rc));
	}
	/* The cache may have moved while the backing chain was read. */
	if (!rc)
		rc = qcow_l2_for(img, off, false, &t);
	if (rc) {
		qcow_unalloc(img, host, got);
		return rc;
	}
	i = c0 & ((1ull << q->l2_bits) - 1);
	for (uint64_t k = 0; k < got; k++) {
		uint64_t old = be64toh(t[i + k]);

		/* A copied-from or preallocated cluster is freed once the new entry is on disk. */
		if ((old & QCOW_OFFSET_MASK) && !(old & QCOW_OFLAG_COMPRESSED))
			qcow_free_later(img, old & QCOW_OFFSET_MASK, 1);
		t[i + k] = htobe64((host + k * cs) | QCOW_OFLAG_COPIED);
	}
	qcow_l2_dirty(img, t);
	*done = wend - off;
	return 0;
}

int qcow_write(struct img *img, const uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		struct qrun r;
		uint64_t done = 0;
		int rc = lookup(img, off, len, &r);

		if (rc)
			return rc;
		if (r.kind == QK_COMPRESSED)
			return compressed(img, off);
		if (r.kind == QK_DATA && r.copied) {
			rc = qcow_check_host(img, r.host, r.len);
			if (!rc)
				rc = data_write(img, buf, r.len, r.host);
			done = r.len;
		} else {
			rc = write_new(img, buf, r.len, off, &r, &done);
		}
		if (rc)
			return rc;
		buf += done;
		off += done;
		len -= done;
	}
	return 0;
}

int qcow_map(struct img *img, uint64_t off, uint64_t *run)
{
	uint64_t total = 0;
	int ans = -1;

	while (off < img->size) {
		struct qrun r;
		int a, rc = lookup(img, off, img->size - off, &r);

		if (rc && !total)
			return rc;
		if (rc)
			break;
		a = r.kind == QK_UNALLOC ? 0 : r.kind == QK_ZERO ? 2 : 1;
		if (ans >= 0 && a != ans)
			break;
		ans = a;
		total += r.len;
		off += r.len;
	}
	*run = total;
	return ans;
}

int qcow_set_backing(struct img *img, const char *name, enum img_format fmt)
{
	struct qcow *q = img->q;
	uint8_t *old = malloc(q->cs), *hdr = malloc(q->cs);
	char *copy = name ? strdup(name) : NULL;
	int rc = -ENOMEM;

	if (!old || !hdr || (name && !copy)) {
		img_seterr(img, rc, "%s: out of memory", img->path);
		goto out;
	}
	rc = img_pread_full(img->fd, old, q->cs, 0);
	if (rc) {
		img_seterr(img, rc, "%s: read: %s", img->path, strerror(-rc));
		goto out;
	}
	memcpy(hdr, old, q->cs);
	rc = qcow_header_exts(hdr, q->cs, old, name, fmt, false);
	if (rc) {
		img_seterr(img, rc, "%s: the backing file name does not fit in the header cluster",
		           img->path);
		goto out;
	}
	rc = img_pwrite_full(img->fd, hdr, q->cs, 0);
	if (!rc)
		rc = img_datasync(img);
	if (rc) {
		img_seterr(img, rc, "%s: cannot write the header: %s", img->path, strerror(-rc));
		goto out;
	}
	free(img->backing_name);
	img->backing_name = copy;
	img->backing_fmt = name ? fmt : IMG_FMT_AUTO;
	copy = NULL;
out:
	free(copy);
	free(old);
	free(hdr);
	return rc;
}
