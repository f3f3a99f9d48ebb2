// SPDX-License-Identifier: MIT
/*
 * qcow2 metadata in memory: a small write-back LRU cache of L2 tables and
 * one of refcount blocks, the L1 table, and img_flush()'s ordering.
 *
 * The on-disk invariant after any crash: every table entry that reached the
 * disk points at data and at refcounts that reached it first. So refcount
 * blocks are written and synced before any L2 table or L1 entry naming
 * their clusters (which also syncs the data those entries point at), and a
 * refcount only drops once no table on disk names the cluster any more. A
 * crash can then leak clusters but never corrupt the image.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "img_priv.h"

int qcache_init(struct qcache *c, unsigned n, uint64_t cs)
{
	void *data;

	memset(c, 0, sizeof(*c));
	c->n = n;
	/*
	 * Mapped, not calloc'd: its pages come zeroed when first touched, so an
	 * open costs nothing for the tables it never reads. calloc gave that only
	 * at first: once such a block was freed, glibc's malloc raised its mmap
	 * threshold and zeroed the next 5 MiB itself at every open (huskd opens
	 * images at each create and start: 70 ms an open, nested).
	 */
	data = mmap(NULL, (size_t)n * cs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
	            0);
	if (data == MAP_FAILED)
		return -ENOMEM;
	/*
	 * Its slots are touched a table at a time: where the host backs
	 * anonymous memory with transparent huge pages ("always", Debian's
	 * default), each first touch took 2 MiB. A template child's three images
	 * held 10 MiB of such pages for a few tables (nested, smaps).
	 */
	madvise(data, (size_t)n * cs, MADV_NOHUGEPAGE);
	c->data = data;
	c->len = (size_t)n * cs;
	c->off = calloc(n, sizeof(*c->off));
	c->stamp = calloc(n, sizeof(*c->stamp));
	c->dirty = calloc(n, sizeof(*c->dirty));
	if (!c->off || !c->stamp || !c->dirty)
		return -ENOMEM;
	return 0;
}

void qcache_free(struct qcache *c)
{
	if (c->data)
		munmap(c->data, c->len);
	free(c->off);
	free(c->stamp);
	free(c->dirty);
	memset(c, 0, sizeof(*c));
}

static int qcache_write(struct img *img, struct qcache *c, unsigned i)
{
	struct qcow *q = img->q;
	int rc = img_pwrite_full(img->fd, c->data + (size_t)i * q->cs, q->cs, c->off[i]);

	if (rc)
		return img_seterr(img, rc, "%s: cannot write metadata: %s", img->path,
		                  strerror(-rc));
	c->dirty[i] = false;
	return 0;
}

static int qcache_write_dirty(struct img *img, struct qcache *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		if (c->dirty[i]) {
			int rc = qcache_write(img, c, i);

			if (rc)
				return rc;
		}
	}
	return 0;
}

int qcow_rb_write_dirty(struct img *img)
{
	return qcache_write_dirty(img, &img->q->rbc);
}

static bool qcache_any_dirty(const struct qcache *c)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->dirty[i])
			return true;
	return false;
}

/*
 * The slot holding the cluster at host offset off, loading it (or zeroing it
 * when fresh: a newly allocated cluster) into the least recently used slot.
 */
int qcache_get(struct img *img, struct qcache *c, uint64_t off, bool fresh, unsigned *slot)
{
	struct qcow *q = img->q;
	unsigned i, victim = 0;
	uint8_t *p;
	int rc;

	if (c->off[c->hint] == off && off) {
		i = c->hint;
		goto hit;
	}
	for (i = 0; i < c->n; i++)
		if (c->off[i] == off)
			goto hit;
	for (i = 0; i < c->n; i++) {
		if (!c->off[i]) {
			victim = i;
			break;
		}
		if (c->stamp[i] < c->stamp[victim])
			victim = i;
	}
	if (c->dirty[victim]) {
		/* An L2 table may name clusters whose refcounts are still only in memory. */
		if (c == &q->l2c) {
			rc = qcow_rb_write_dirty(img);
			if (!rc)
				rc = img_datasync(img);
			if (rc)
				return rc;
		}
		rc = qcache_write(img, c, victim);
		if (rc)
			return rc;
	}
	c->off[victim] = 0;
	p = c->data + (size_t)victim * q->cs;
	if (fresh) {
		memset(p, 0, q->cs);
	} else {
		rc = img_pread_full(img->fd, p, q->cs, off);
		if (rc)
			return img_seterr(img, rc, "%s: cannot read metadata: %s", img->path,
			                  strerror(-rc));
	}
	c->off[victim] = off;
	c->dirty[victim] = false;
	i = victim;
hit:
	if (fresh) {
		/* A cluster freed and allocated again: what was cached is stale. */
		memset(c->data + (size_t)i * q->cs, 0, q->cs);
		c->dirty[i] = false;
	}
	c->stamp[i] = ++c->clock;
	c->hint = i;
	*slot = i;
	return 0;
}

void qcache_drop(struct qcache *c, uint64_t off)
{
	for (unsigned i = 0; i < c->n; i++) {
		if (c->off[i] == off) {
			c->off[i] = 0;
			c->dirty[i] = false;
		}
	}
}

/* A table or block at host offset off must be a whole cluster inside the file. */
static int check_meta_off(struct img *img, uint64_t off, const char *what)
{
	struct qcow *q = img->q;

	if (!off || off % q->cs || off >= q->file_end)
		return img_seterr(
			img, -EINVAL,
			"%s: corrupt image: %s at offset %llu is %s; run 'husk-img check'",
			img->path, what, (unsigned long long)off,
			off % q->cs ? "not cluster aligned" : "outside the file");
	return 0;
}

/* The cached copy of the metadata cluster at off, checked to lie in the file first. */
static int meta_get(struct img *img, struct qcache *c, uint64_t off, bool fresh, const char *what,
                    void **p)
{
	unsigned i;
	int rc = check_meta_off(img, off, what);

	if (!rc)
		rc = qcache_get(img, c, off, fresh, &i);
	if (!rc)
		*p = c->data + (size_t)i * img->q->cs;
	return rc;
}

static void meta_dirty(struct qcache *c, uint64_t cs, const void *p)
{
	c->dirty[(size_t)((const uint8_t *)p - c->data) / cs] = true;
}

int qcow_l2_get(struct img *img, uint64_t l2_off, bool fresh, uint64_t **table)
{
	void *p;
	int rc = meta_get(img, &img->q->l2c, l2_off, fresh, "an L2 table", &p);

	if (!rc)
		*table = p;
	return rc;
}

void qcow_l2_dirty(struct img *img, const uint64_t *table)
{
	meta_dirty(&img->q->l2c, img->q->cs, table);
}

int qcow_rb_get_block(struct img *img, uint64_t off, bool fresh, uint8_t **block)
{
	void *p;
	int rc = meta_get(img, &img->q->rbc, off, fresh, "a refcount block", &p);

	if (!rc)
		*block = p;
	return rc;
}

void qcow_rb_dirty(struct img *img, const uint8_t *block)
{
	meta_dirty(&img->q->rbc, img->q->cs, block);
}

static void l1_set(struct qcow *q, uint32_t i, uint64_t v)
{
	q->l1[i] = htobe64(v);
	if (i < q->l1_dirty_lo)
		q->l1_dirty_lo = i;
	if (i + 1 > q->l1_dirty_hi)
		q->l1_dirty_hi = i + 1;
}

/*
 * The L2 table covering guest offset off, or NULL if there is none and
 * alloc is false. With alloc, a missing table is allocated and the table is
 * made writable in place.
 */
int qcow_l2_for(struct img *img, uint64_t off, bool alloc, uint64_t **table)
{
	struct qcow *q = img->q;
	uint64_t l1i = off >> (q->cluster_bits + q->l2_bits), l1e, l2_off, got, rc_val;
	int rc;

	*table = NULL;
	if (l1i >= q->l1_size)
		return img_seterr(img, -EINVAL, "%s: offset %llu is beyond the L1 table", img->path,
		                  (unsigned long long)off);
	l1e = be64toh(q->l1[l1i]);
	if (l1e & QCOW_L1_RESERVED)
		return img_seterr(img, -EINVAL,
		                  "%s: corrupt image: L1 entry %llu has reserved bits set (0x%llx)",
		                  img->path, (unsigned long long)l1i, (unsigned long long)l1e);
	l2_off = l1e & QCOW_OFFSET_MASK;
	if (!l2_off) {
		if (!alloc)
			return 0;
		rc = qcow_alloc(img, 1, &l2_off, &got);
		if (rc)
			return rc;
		/* Zeros on disk before any L1 entry can name the table: an empty table is valid. */
		rc = qcow_l2_get(img, l2_off, true, table);
		if (!rc)
			rc = img_pwrite_full(img->fd, *table, q->cs, l2_off);
		if (rc) {
			qcache_drop(&q->l2c, l2_off);
			qcow_unalloc(img, l2_off, 1);
			*table = NULL;
			return img_seterr(img, rc, "%s: cannot write an L2 table: %s", img->path,
			                  strerror(-rc));
		}
		l1_set(q, (uint32_t)l1i, l2_off | QCOW_OFLAG_COPIED);
		return 0;
	}
	if (alloc && !(l1e & QCOW_OFLAG_COPIED)) {
		/* Only internal snapshots share L2 tables; a stale flag with refcount 1 is fine. */
		rc = qcow_refcount(img, l2_off >> q->cluster_bits, &rc_val);
		if (rc)
			return rc;
		if (rc_val != 1)
			return img_seterr(
				img, -ENOTSUP,
				"%s: L2 table at %llu is shared (refcount %llu); images with "
				"internal snapshots are not supported",
				img->path, (unsigned long long)l2_off, (unsigned long long)rc_val);
		l1_set(q, (uint32_t)l1i, l2_off | QCOW_OFLAG_COPIED);
	}
	return qcow_l2_get(img, l2_off, false, table);
}

/* If this runs out of memory the clusters leak: wasted space, never damage. */
void qcow_free_later(struct img *img, uint64_t off, uint64_t n)
{
	struct qcow *q = img->q;
	struct qfree *last = q->nr_frees ? &q->frees[q->nr_frees - 1] : NULL;

	if (last && last->off + last->n * q->cs == off) {
		last->n += n;
		return;
	}
	if (q->nr_frees == q->cap_frees) {
		size_t cap = q->cap_frees ? 2 * q->cap_frees : 16;
		struct qfree *f = realloc(q->frees, cap * sizeof(*f));

		if (!f)
			return;
		q->frees = f;
		q->cap_frees = cap;
	}
	q->frees[q->nr_frees++] = (struct qfree){off, n};
}

static int write_l1(struct img *img)
{
	struct qcow *q = img->q;
	uint32_t lo = q->l1_dirty_lo, hi = q->l1_dirty_hi;
	int rc;

	if (lo >= hi)
		return 0;
	rc = img_pwrite_full(img->fd, q->l1 + lo, (size_t)(hi - lo) * 8, q->l1_off + lo * 8ull);
	if (rc)
		return img_seterr(img, rc, "%s: cannot write the L1 table: %s", img->path,
		                  strerror(-rc));
	q->l1_dirty_lo = UINT32_MAX;
	q->l1_dirty_hi = 0;
	return 0;
}

int qcow_flush(struct img *img)
{
	struct qcow *q = img->q;
	int rc = qcow_rb_write_dirty(img);

	if (rc)
		return rc;
	if (qcache_any_dirty(&q->l2c) || q->l1_dirty_lo < q->l1_dirty_hi) {
		rc = img_datasync(img);
		if (!rc)
			rc = qcache_write_dirty(img, &q->l2c);
		if (!rc)
			rc = write_l1(img);
		if (rc)
			return rc;
	}
	rc = img_datasync(img);
	if (rc || !q->nr_frees)
		return rc;
	/* No table on disk names these clusters any more. */
	for (size_t i = 0; i < q->nr_frees; i++) {
		rc = qcow_refcount_add(img, q->frees[i].off >> q->cluster_bits, q->frees[i].n, -1);
		if (rc) {
			/* Never drop a refcount twice: keep only what is still owed. */
			memmove(q->frees, q->frees + i, (q->nr_frees - i) * sizeof(*q->frees));
			q->nr_frees -= i;
			return rc;
		}
	}
	q->nr_frees = 0;
	rc = qcow_rb_write_dirty(img);
	if (!rc)
		rc = img_datasync(img);
	return rc;
}

/* Guest data must never land on the header or the tables the header points to. */
int qcow_check_host(struct img *img, uint64_t host, uint64_t len)
{
	struct qcow *q = img->q;
	uint64_t l1_end = q->l1_off + (uint64_t)q->l1_size * 8;
	uint64_t rt_end = q->rt_off + (uint64_t)q->rt_clusters * q->cs;

	if (host < q->cs || (q->l1_size && host < l1_end && host + len > q->l1_off) ||
	    (host < rt_end && host + len > q->rt_off))
		return img_seterr(
			img, -EINVAL,
			"%s: corrupt image: a data cluster at %llu overlaps the header or "
			"a table; run 'husk-img check'",
			img->path, (unsigned long long)host);
	return 0;
}
