// SPDX-License-Identifier: MIT
/*
 * qcow2 refcounts and cluster allocation. Clusters are allocated at the end
 * of the file; refcount blocks are created there as the file grows (each
 * counting itself), and the refcount table is moved to a larger copy at the
 * end when it is full.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "img_priv.h"

#define DIV_ROUND_UP(x, d) (((x) + (d)-1) / (d))

/* Refcount widths below a byte pack from the least significant bit (order 0..2). */
uint64_t qcow_rb_get(const uint8_t *b, unsigned order, uint64_t i)
{
	uint64_t bit = i << order;

	switch (order) {
	case 0:
	case 1:
	case 2:
		return (b[bit >> 3] >> (bit & 7)) & ((1u << (1u << order)) - 1);
	case 3:
		return b[i];
	case 4:
		return get_be16(b + 2 * i);
	case 5:
		return get_be32(b + 4 * i);
	default:
		return get_be64(b + 8 * i);
	}
}

void qcow_rb_set(uint8_t *b, unsigned order, uint64_t i, uint64_t v)
{
	uint64_t bit = i << order;
	unsigned mask;

	switch (order) {
	case 0:
	case 1:
	case 2:
		mask = ((1u << (1u << order)) - 1) << (bit & 7);
		b[bit >> 3] = (uint8_t)((b[bit >> 3] & ~mask) | ((unsigned)v << (bit & 7)));
		break;
	case 3:
		b[i] = (uint8_t)v;
		break;
	case 4:
		put_be16(b + 2 * i, (uint16_t)v);
		break;
	case 5:
		put_be32(b + 4 * i, (uint32_t)v);
		break;
	default:
		put_be64(b + 8 * i, v);
	}
}

/* The refcount block for refcount table index idx, or NULL when it has none. */
static int rb_block(struct img *img, uint64_t idx, uint8_t **block)
{
	struct qcow *q = img->q;
	uint64_t e;

	*block = NULL;
	if (idx >= q->rt_entries)
		return 0;
	e = be64toh(q->rt[idx]);
	if (!e)
		return 0;
	if (e & QCOW_RT_RESERVED)
		return img_seterr(img, -EINVAL,
		                  "%s: corrupt image: refcount table entry %llu is not aligned",
		                  img->path, (unsigned long long)idx);
	return qcow_rb_get_block(img, e, false, block);
}

int qcow_refcount(struct img *img, uint64_t cluster, uint64_t *val)
{
	struct qcow *q = img->q;
	uint8_t *b;
	int rc = rb_block(img, cluster >> q->rb_bits, &b);

	if (rc)
		return rc;
	*val = b ? qcow_rb_get(b, q->rc_order, cluster & ((1ull << q->rb_bits) - 1)) : 0;
	return 0;
}

int qcow_refcount_add(struct img *img, uint64_t cluster, uint64_t n, int delta)
{
	struct qcow *q = img->q;
	uint64_t per = 1ull << q->rb_bits;

	while (n) {
		uint64_t first = cluster & (per - 1), k = per - first < n ? per - first : n, v;
		uint8_t *b;
		int rc = rb_block(img, cluster >> q->rb_bits, &b);

		if (rc)
			return rc;
		if (!b)
			return img_seterr(img, -EINVAL,
			                  "%s: corrupt image: cluster %llu has no refcount block",
			                  img->path, (unsigned long long)cluster);
		/* All or nothing within a block, so a failure leaves counts as they were. */
		for (uint64_t j = 0; j < k; j++) {
			v = qcow_rb_get(b, q->rc_order, first + j);
			if (delta > 0 ? v == q->rc_max : v == 0)
				return img_seterr(
					img, -EINVAL,
					"%s: corrupt image: refcount of cluster %llu would %s",
					img->path, (unsigned long long)(cluster + j),
					delta > 0 ? "overflow" : "drop below zero");
		}
		for (uint64_t j = 0; j < k; j++) {
			v = qcow_rb_get(b, q->rc_order, first + j);
			qcow_rb_set(b, q->rc_order, first + j, delta > 0 ? v + 1 : v - 1);
		}
		qcow_rb_dirty(img, b);
		cluster += k;
		n -= k;
	}
	return 0;
}

/*
 * Replaces the full refcount table with a larger one at the end of the file,
 * followed by the refcount blocks needed to count the new clusters
 * themselves. The new table and blocks are on disk before the header points
 * at them; the old table is freed after.
 */
static int rt_grow(struct img *img, uint64_t need_idx)
{
	struct qcow *q = img->q;
	uint64_t per = q->cs / 8, e0 = q->file_end >> q->cluster_bits, t, nb = 0, end, first, last;
	uint64_t *ort = q->rt, ort_entries = q->rt_entries, ort_off = q->rt_off, *nrt, k = 0;
	uint32_t ort_clusters = q->rt_clusters;
	uint8_t hdr[12], *b;
	int rc, undo;

	t = DIV_ROUND_UP(need_idx + 1 > ort_entries * 3 / 2 ? need_idx + 1 : ort_entries * 3 / 2,
	                 per);
	/* Grows monotonically to a fixed point: the table and blocks must count themselves. */
	for (;;) {
		uint64_t missing = 0;

		end = e0 + t + nb;
		first = e0 >> q->rb_bits;
		last = (end - 1) >> q->rb_bits;
		if (last >= t * per) {
			t = DIV_ROUND_UP(last + 1, per);
			continue;
		}
		for (uint64_t i = first; i <= last; i++)
			missing += i >= ort_entries || !ort[i];
		if (missing == nb)
			break;
		nb = missing;
	}
	if (t * q->cs > QCOW_MAX_RT_BYTES || end << q->cluster_bits > QCOW_MAX_HOST)
		return img_seterr(img, -EFBIG,
		                  "%s: the image file is too large for its refcount table (8 MiB)",
		                  img->path);
	nrt = calloc(t, q->cs);
	if (!nrt)
		return img_seterr(img, -ENOMEM, "%s: out of memory", img->path);
	memcpy(nrt, ort, ort_entries * 8);
	for (uint64_t i = first; i <= last; i++)
		if (i >= ort_entries || !ort[i])
			nrt[i] = htobe64((e0 + t + k++) << q->cluster_bits);
	q->rt = nrt;
	q->rt_entries = t * per;
	q->file_end = end << q->cluster_bits;

	rc = 0;
	for (k = 0; k < nb && !rc; k++) {
		rc = qcow_rb_get_block(img, (e0 + t + k) << q->cluster_bits, true, &b);
		if (!rc)
			qcow_rb_dirty(img, b);
	}
	if (!rc)
		rc = qcow_refcount_add(img, e0, t + nb, 1);
	if (!rc)
		rc = qcow_rb_write_dirty(img);
	if (!rc)
		rc = img_pwrite_full(img->fd, nrt, t * q->cs, e0 << q->cluster_bits);
	if (!rc)
		rc = img_datasync(img);
	if (!rc) {
		put_be64(hdr, e0 << q->cluster_bits);
		put_be32(hdr + 8, (uint32_t)t);
		rc = img_pwrite_full(img->fd, hdr, sizeof(hdr), QCOW_HDR_RT_OFF);
	}
	if (rc)
		goto err_undo;
	/* The header may be on disk now: the new table is ours whatever happens next. */
	q->rt_off = e0 << q->cluster_bits;
	q->rt_clusters = (uint32_t)t;
	free(ort);
	rc = img_datasync(img);
	if (!rc)
		rc = qcow_refcount_add(img, ort_off >> q->cluster_bits, ort_clusters, -1);
	return rc;

err_undo:
	undo = qcow_refcount_add(img, e0, t + nb, -1);
	for (k = 0; k < nb; k++)
		qcache_drop(&q->rbc, (e0 + t + k) << q->cluster_bits);
	q->rt = ort;
	q->rt_entries = ort_entries;
	q->file_end = e0 << q->cluster_bits;
	free(nrt);
	return img_seterr(img, rc, "%s: cannot grow the refcount table: %s%s", img->path,
	                  strerror(-rc), undo ? " (some clusters leak)" : "");
}

/*
 * Makes sure a refcount block counts cluster c, the first free one at the
 * end of the file. Returns 1 if that took clusters at the end (so c is no
 * longer free), 0 if the block was there.
 */
static int rb_ensure(struct img *img, uint64_t c)
{
	struct qcow *q = img->q;
	uint64_t idx = c >> q->rb_bits, off = c << q->cluster_bits, e;
	uint8_t *b, ent[8];
	int rc;

	if (idx >= q->rt_entries) {
		rc = rt_grow(img, idx);
		return rc ? rc : 1;
	}
	e = be64toh(q->rt[idx]);
	if (e)
		return 0;
	/* A new block at c counts itself. */
	q->file_end = off + q->cs;
	rc = qcow_rb_get_block(img, off, true, &b);
	if (rc)
		goto err;
	qcow_rb_set(b, q->rc_order, c & ((1ull << q->rb_bits) - 1), 1);
	rc = img_pwrite_full(img->fd, b, q->cs, off);
	if (!rc)
		rc = img_datasync(img);
	if (!rc) {
		put_be64(ent, off);
		rc = img_pwrite_full(img->fd, ent, 8, q->rt_off + idx * 8);
	}
	if (rc) {
		qcache_drop(&q->rbc, off);
		img_seterr(img, rc, "%s: cannot write a refcount block: %s", img->path,
		           strerror(-rc));
		goto err;
	}
	q->rt[idx] = htobe64(off);
	return 1;
err:
	q->file_end = off;
	return rc;
}

int qcow_alloc(struct img *img, uint64_t want, uint64_t *host, uint64_t *got)
{
	struct qcow *q = img->q;
	uint64_t per = 1ull << q->rb_bits;
	unsigned skips = 0;

	for (;;) {
		uint64_t c = q->file_end >> q->cluster_bits, first = c & (per - 1), n, k;
		uint8_t *b;
		int rc = rb_ensure(img, c);

		if (rc < 0)
			return rc;
		if (rc)
			continue;
		rc = rb_block(img, c >> q->rb_bits, &b);
		if (rc)
			return rc;
		n = per - first < want ? per - first : want;
		/* Only a damaged image counts clusters past its end; step over them. */
		for (k = 0; k < n && !qcow_rb_get(b, q->rc_order, first + k); k++)
			;
		if (!k) {
			if (++skips > (1u << 20))
				return img_seterr(
					img, -EINVAL,
					"%s: corrupt image: refcounts claim clusters past the "
					"end of the file; run 'qemu-img check -r leaks'",
					img->path);
			q->file_end += q->cs;
			continue;
		}
		if ((c + k) << q->cluster_bits > QCOW_MAX_HOST)
			return img_seterr(img, -EFBIG, "%s: the image file reached 64 PiB",
			                  img->path);
		for (uint64_t j = 0; j < k; j++)
			qcow_rb_set(b, q->rc_order, first + j, 1);
		qcow_rb_dirty(img, b);
		*host = c << q->cluster_bits;
		*got = k;
		q->file_end += k << q->cluster_bits;
		return 0;
	}
}

/* Gives back clusters qcow_alloc() returned that no table names (a failed write). */
void qcow_unalloc(struct img *img, uint64_t host, uint64_t n)
{
	struct qcow *q = img->q;

	if (qcow_refcount_add(img, host >> q->cluster_bits, n, -1))
		return;
	if (host + (n << q->cluster_bits) == q->file_end)
		q->file_end = host;
}
