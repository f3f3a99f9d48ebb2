// SPDX-License-Identifier: MIT
/*
 * img_check: recounts every cluster's references from the header, the
 * refcount table and blocks, and the L1 and L2 tables, and compares with the
 * stored refcounts, as `qemu-img check` does. A stored count below the
 * references is corruption (the cluster could be handed out again); above
 * is a leak (wasted space). Tables are read straight from the file, never
 * through the caches, and every offset is checked before it is followed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "img_priv.h"

/* Refcount arrays take 4 bytes per cluster: refuse files that would need over 1 GiB. */
#define CHECK_MAX_CLUSTERS (1ull << 28)

struct ck {
	struct img *img;
	struct qcow *q;
	struct img_check_result *res;
	img_check_fn report;
	void *opaque;
	uint64_t nclusters;
	uint16_t *refs;   /* references found, saturating */
	uint16_t *stored; /* refcounts on disk, saturating */
	uint8_t *buf;     /* one cluster */
};

static void __attribute__((format(printf, 3, 4))) say(struct ck *ck, int kind, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (kind == 0)
		ck->res->corruptions++;
	else
		ck->res->leaks++;
	if (!ck->report)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ck->report(ck->opaque, msg);
}

static uint16_t sat16(uint64_t v)
{
	return v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
}

/* Counts one reference to every cluster [off, off + len) touches. */
static void ref(struct ck *ck, uint64_t off, uint64_t len, const char *what)
{
	unsigned cb = ck->q->cluster_bits;

	if (!len)
		return;
	for (uint64_t c = off >> cb; c <= (off + len - 1) >> cb; c++) {
		if (c >= ck->nclusters) {
			say(ck, 0, "ERROR %s at offset %llu is past the end of the file", what,
			    (unsigned long long)off);
			return;
		}
		if (ck->refs[c] < UINT16_MAX)
			ck->refs[c]++;
	}
}

static int read_cluster(struct ck *ck, uint64_t off)
{
	int rc = img_pread_full(ck->img->fd, ck->buf, ck->q->cs, off);

	if (rc)
		img_seterr(ck->img, rc, "%s: read: %s", ck->img->path, strerror(-rc));
	return rc;
}

static int count_refcount_blocks(struct ck *ck)
{
	struct qcow *q = ck->q;
	uint64_t per = 1ull << q->rb_bits;

	for (uint64_t i = 0; i < q->rt_entries; i++) {
		uint64_t e = be64toh(q->rt[i]);
		int rc;

		if (!e)
			continue;
		if (e % q->cs) {
			say(ck, 0, "ERROR refcount block %llu is not cluster aligned",
			    (unsigned long long)i);
			continue;
		}
		if (e >> q->cluster_bits >= ck->nclusters) {
			say(ck, 0, "ERROR refcount block %llu is past the end of the file",
			    (unsigned long long)i);
			continue;
		}
		ref(ck, e, q->cs, "refcount block");
		rc = read_cluster(ck, e);
		if (rc)
			return rc;
		for (uint64_t j = 0; j < per; j++) {
			uint64_t c = i * per + j, v = qcow_rb_get(ck->buf, q->rc_order, j);

			/* Counts past the end of the file waste nothing; qemu-img ignores them too.
			 */
			if (c < ck->nclusters)
				ck->stored[c] = sat16(v);
		}
	}
	return 0;
}

static void count_l2_entry(struct ck *ck, uint64_t e, uint64_t guest)
{
	struct qcow *q = ck->q;
	uint64_t host = e & QCOW_OFFSET_MASK;

	if (e & QCOW_OFLAG_COMPRESSED) {
		unsigned x = 62 - (q->cluster_bits - 8);
		uint64_t start = e & ((1ull << x) - 1);
		uint64_t sectors = ((e >> x) & ((1ull << (q->cluster_bits - 8)) - 1)) + 1;

		ck->res->data_clusters++;
		ref(ck, start & ~511ull, sectors * 512, "compressed cluster");
		return;
	}
	if (e & QCOW_L2_RESERVED) {
		say(ck, 0, "ERROR L2 entry for guest offset %llu has reserved bits set",
		    (unsigned long long)guest);
		return;
	}
	if (!host) {
		if (e & QCOW_OFLAG_COPIED)
			say(ck, 0, "ERROR guest offset %llu maps to host offset 0",
			    (unsigned long long)guest);
		return;
	}
	if (host % q->cs) {
		say(ck, 0, "ERROR cluster for guest offset %llu at %llu is not cluster aligned",
		    (unsigned long long)guest, (unsigned long long)host);
		return;
	}
	if (!(e & QCOW_OFLAG_ZERO))
		ck->res->data_clusters++;
	ref(ck, host, q->cs, "data cluster");
}

/* A cluster named with the COPIED flag must have refcount 1, and the other way round. */
static void check_copied(struct ck *ck, uint64_t e, uint64_t host, const char *what, uint64_t at)
{
	uint64_t c = host >> ck->q->cluster_bits;

	if (c >= ck->nclusters || host % ck->q->cs)
		return;
	if ((ck->stored[c] == 1) != !!(e & QCOW_OFLAG_COPIED))
		say(ck, 0, "ERROR OFLAG_COPIED %s at %llu: refcount=%u but the flag is %s", what,
		    (unsigned long long)at, ck->stored[c], e & QCOW_OFLAG_COPIED ? "set" : "clear");
}

/* pass 0 counts references, pass 1 checks COPIED flags against the stored counts. */
static int walk_tables(struct ck *ck, int pass)
{
	struct qcow *q = ck->q;
	uint64_t n2 = 1ull << q->l2_bits;

	for (uint64_t i = 0; i < q->l1_size; i++) {
		uint64_t e = be64toh(q->l1[i]), l2 = e & QCOW_OFFSET_MASK;
		int rc;

		if (pass == 0 && (e & QCOW_L1_RESERVED))
			say(ck, 0, "ERROR L1 entry %llu has reserved bits set",
			    (unsigned long long)i);
		if (!l2)
			continue;
		if (l2 % q->cs) {
			if (pass == 0)
				say(ck, 0, "ERROR L2 table %llu is not cluster aligned",
				    (unsigned long long)i);
			continue;
		}
		if (pass == 0)
			ref(ck, l2, q->cs, "L2 table");
		else
			check_copied(ck, e, l2, "L2 table", l2);
		if (l2 >> q->cluster_bits >= ck->nclusters)
			continue;
		rc = read_cluster(ck, l2);
		if (rc)
			return rc;
		for (uint64_t j = 0; j < n2; j++) {
			uint64_t e2 = get_be64(ck->buf + 8 * j), guest = ((i << q->l2_bits) + j)
			                                                 << q->cluster_bits;

			if (pass == 0)
				count_l2_entry(ck, e2, guest);
			else if (e2 & QCOW_OFLAG_COMPRESSED && e2 & QCOW_OFLAG_COPIED)
				say(ck, 0,
				    "ERROR compressed cluster at guest offset %llu has COPIED set",
				    (unsigned long long)guest);
			else if (!(e2 & QCOW_OFLAG_COMPRESSED) && (e2 & QCOW_OFFSET_MASK))
				check_copied(ck, e2, e2 & QCOW_OFFSET_MASK, "data cluster", guest);
		}
	}
	return 0;
}

static void compare(struct ck *ck)
{
	uint64_t end = 0;

	for (uint64_t c = 0; c < ck->nclusters; c++) {
		unsigned s = ck->stored[c], r = ck->refs[c];

		if (s || r)
			end = c + 1;
		if (s < r)
			say(ck, 0, "ERROR cluster %llu refcount=%u reference=%u",
			    (unsigned long long)c, s, r);
		else if (s > r)
			say(ck, 1, "Leaked cluster %llu refcount=%u reference=%u",
			    (unsigned long long)c, s, r);
	}
	ck->res->end_offset = end << ck->q->cluster_bits;
}

int img_check(struct img *img, struct img_check_result *res, img_check_fn report, void *opaque,
              char *err, size_t errlen)
{
	struct ck ck = {.img = img, .q = img->q, .res = res, .report = report, .opaque = opaque};
	struct qcow *q = img->q;
	struct stat st;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!q)
		return img_errf(err, errlen, -ENOTSUP, "%s: raw images have no metadata to check",
		                img->path);
	rc = img_flush(img);
	if (rc)
		return img_errf(err, errlen, rc, "%s", img->errbuf);
	if (fstat(img->fd, &st) < 0)
		return img_errf(err, errlen, -errno, "%s: %s", img->path, strerror(errno));
	ck.nclusters = ((uint64_t)st.st_size + q->cs - 1) >> q->cluster_bits;
	if (ck.nclusters > CHECK_MAX_CLUSTERS)
		return img_errf(err, errlen, -EFBIG, "%s: too many clusters (%llu) to check",
		                img->path, (unsigned long long)ck.nclusters);
	ck.refs = calloc(ck.nclusters + 1, sizeof(*ck.refs));
	ck.stored = calloc(ck.nclusters + 1, sizeof(*ck.stored));
	ck.buf = malloc(q->cs);
	rc = -ENOMEM;
	if (!ck.refs || !ck.stored || !ck.buf) {
		img_errf(err, errlen, rc, "%s: out of memory", img->path);
		goto out;
	}
	ref(&ck, 0, q->cs, "header");
	ref(&ck, q->l1_off, (uint64_t)q->l1_size * 8, "L1 table");
	ref(&ck, q->rt_off, (uint64_t)q->rt_clusters * q->cs, "refcount table");
	if (q->fde_len)
		ref(&ck, q->fde_off, q->fde_len, "LUKS header");
	rc = count_refcount_blocks(&ck);
	if (!rc)
		rc = walk_tables(&ck, 0);
	if (!rc) {
		compare(&ck);
		rc = walk_tables(&ck, 1);
	}
	if (rc)
		img_errf(err, errlen, rc, "%s", img->errbuf);
out:
	free(ck.refs);
	free(ck.stored);
	free(ck.buf);
	return rc;
}
