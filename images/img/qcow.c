// SPDX-License-Identifier: MIT
/*
 * qcow2 header: parsing and validating it on open (every offset and size is
 * checked against the file before anything is allocated for it), and laying
 * out its extension area when an image is created or rebased.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img_priv.h"

#define ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* Offsets of the fields of a version 3 header. */
enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_BACKING_OFF = 8,
	H_BACKING_SIZE = 16,
	H_CLUSTER_BITS = 20,
	H_SIZE = 24,
	H_CRYPT = 32,
	H_L1_SIZE = 36,
	H_L1_OFF = 40,
	H_RT_OFF = 48,
	H_RT_CLUSTERS = 56,
	H_NB_SNAPSHOTS = 60,
	H_INCOMPAT = 72,
	H_COMPAT = 80,
	H_AUTOCLEAR = 88,
	H_RC_ORDER = 96,
	H_HDR_LEN = 100,
};

static const struct {
	uint64_t bit;
	int rc;
	const char *why;
} incompat_msgs[] = {
	{1ull << 0, -EINVAL,
         "is marked dirty (it was not closed cleanly); repair it with 'qemu-img check -r all'"},
	{1ull << 1, -EINVAL,
         "is marked corrupt; check and repair it with 'qemu-img check -r all' before use"},
	{1ull << 2, -ENOTSUP,
         "uses an external data file, which is not supported; convert it with "
         "'qemu-img convert -O qcow2'"},
	{1ull << 3, -ENOTSUP,
         "uses a compression type other than zlib, which is not supported; convert it with "
         "'qemu-img convert -O qcow2'"},
	{1ull << 4, -ENOTSUP,
         "uses extended L2 entries (subclusters), which are not supported; convert it with "
         "'qemu-img convert -O qcow2 -o extended_l2=off'"},
};

static int check_features(const char *path, const uint8_t *h, char *err, size_t errlen)
{
	uint64_t incompat = get_be64(h + H_INCOMPAT), known = 0;

	for (size_t i = 0; i < sizeof(incompat_msgs) / sizeof(incompat_msgs[0]); i++) {
		known |= incompat_msgs[i].bit;
		if (incompat & incompat_msgs[i].bit)
			return img_errf(err, errlen, incompat_msgs[i].rc, "%s: the image %s", path,
			                incompat_msgs[i].why);
	}
	if (incompat & ~known)
		return img_errf(
			err, errlen, -ENOTSUP,
			"%s: unknown incompatible feature bits 0x%llx; a newer tool wrote it", path,
			(unsigned long long)(incompat & ~known));
	if (get_be32(h + H_CRYPT) && get_be32(h + H_CRYPT) != QCOW_CRYPT_LUKS)
		return img_errf(
			err, errlen, -ENOTSUP,
			"%s: encrypted with qcow2's old AES method, which is not supported; "
			"convert it with 'qemu-img convert -O qcow2 -o encrypt.format=luks'",
			path);
	if (get_be32(h + H_NB_SNAPSHOTS))
		return img_errf(err, errlen, -ENOTSUP,
		                "%s: the image has %u internal snapshots, which are not supported; "
		                "delete them with 'qemu-img snapshot -d' or convert the image",
		                path, get_be32(h + H_NB_SNAPSHOTS));
	return 0;
}

/* Geometry: cluster size, virtual size, and where the L1 and refcount tables lie. */
static int check_geometry(struct img *img, struct qcow *q, const uint8_t *h, char *err,
                          size_t errlen)
{
	const char *path = img->path;
	uint64_t fend, l1_cover, need;

	q->cluster_bits = get_be32(h + H_CLUSTER_BITS);
	if (q->cluster_bits < 9 || q->cluster_bits > 21)
		return img_errf(err, errlen, -EINVAL,
		                "%s: cluster_bits %u is outside 9..21 (512 bytes to 2 MiB)", path,
		                q->cluster_bits);
	q->cs = 1ull << q->cluster_bits;
	q->l2_bits = q->cluster_bits - 3;
	q->hdr_len = get_be32(h + H_HDR_LEN);
	if (q->hdr_len < QCOW_HDR_V3_LEN || q->hdr_len % 8 || q->hdr_len > q->cs)
		return img_errf(err, errlen, -EINVAL, "%s: bad header length %u", path, q->hdr_len);
	q->rc_order = get_be32(h + H_RC_ORDER);
	if (q->rc_order > 6)
		return img_errf(err, errlen, -EINVAL, "%s: refcount_order %u is above 6", path,
		                q->rc_order);
	q->rc_max = q->rc_order == 6 ? UINT64_MAX : (1ull << (1u << q->rc_order)) - 1;
	q->rb_bits = q->cluster_bits + 3 - q->rc_order;

	img->size = get_be64(h + H_SIZE);
	if (img->size > IMG_MAX_SIZE)
		return img_errf(err, errlen, -ENOTSUP,
		                "%s: virtual size %llu is larger than the 1 PiB we support", path,
		                (unsigned long long)img->size);
	fend = ROUND_UP(q->file_size, q->cs);

	q->l1_size = get_be32(h + H_L1_SIZE);
	q->l1_off = get_be64(h + H_L1_OFF);
	l1_cover = 1ull << (q->cluster_bits + q->l2_bits);
	need = (img->size + l1_cover - 1) / l1_cover;
	if (q->l1_size < need)
		return img_errf(err, errlen, -EINVAL,
		                "%s: L1 table of %u entries is too small for the virtual size",
		                path, q->l1_size);
	if ((uint64_t)q->l1_size * 8 > QCOW_MAX_L1_BYTES)
		return img_errf(err, errlen, -EINVAL, "%s: L1 table of %u entries is over 32 MiB",
		                path, q->l1_size);
	if (q->l1_size && (q->l1_off % q->cs || !q->l1_off))
		return img_errf(err, errlen, -EINVAL, "%s: L1 table offset %llu is not a cluster",
		                path, (unsigned long long)q->l1_off);
	if (q->l1_size && (q->l1_off >= fend || (uint64_t)q->l1_size * 8 > fend - q->l1_off))
		return img_errf(err, errlen, -EINVAL, "%s: L1 table runs past the end of the file",
		                path);

	q->rt_off = get_be64(h + H_RT_OFF);
	q->rt_clusters = get_be32(h + H_RT_CLUSTERS);
	if (!q->rt_clusters || (uint64_t)q->rt_clusters * q->cs > QCOW_MAX_RT_BYTES)
		return img_errf(err, errlen, -EINVAL,
		                "%s: refcount table of %u clusters is empty or over 8 MiB", path,
		                q->rt_clusters);
	if (q->rt_off % q->cs || !q->rt_off)
		return img_errf(err, errlen, -EINVAL,
		                "%s: refcount table offset %llu is not a cluster", path,
		                (unsigned long long)q->rt_off);
	if (q->rt_off >= fend || (uint64_t)q->rt_clusters * q->cs > fend - q->rt_off)
		return img_errf(err, errlen, -EINVAL,
		                "%s: refcount table runs past the end of the file", path);
	q->rt_entries = (uint64_t)q->rt_clusters * q->cs / 8;
	return 0;
}

static int parse_backing_fmt(struct img *img, const uint8_t *s, uint32_t len, char *err,
                             size_t errlen)
{
	if (len == 5 && !memcmp(s, "qcow2", 5))
		img->backing_fmt = IMG_FMT_QCOW2;
	else if (len == 3 && !memcmp(s, "raw", 3))
		img->backing_fmt = IMG_FMT_RAW;
	else
		return img_errf(
			err, errlen, -ENOTSUP,
			"%s: backing file format '%.*s' is not supported (only qcow2 and raw)",
			img->path, len > 32 ? 32 : (int)len, (const char *)s);
	return 0;
}

/* Where the LUKS header lies: whole clusters inside the file, past the header cluster. */
static int parse_crypto(struct img *img, const uint8_t *p, uint32_t len, char *err, size_t errlen)
{
	struct qcow *q = img->q;

	if (len != 16)
		return img_errf(err, errlen, -EINVAL,
		                "%s: encryption header extension of %u bytes (not 16)", img->path,
		                len);
	q->fde_off = get_be64(p);
	q->fde_len = get_be64(p + 8);
	if (!q->fde_off || q->fde_off % q->cs || q->fde_off >= q->file_end ||
	    q->fde_len > q->file_end - q->fde_off)
		return img_errf(err, errlen, -EINVAL,
		                "%s: its LUKS header (%llu bytes at %llu) is not inside the file",
		                img->path, (unsigned long long)q->fde_len,
		                (unsigned long long)q->fde_off);
	return 0;
}

/* Header extensions and the backing file name, all within the first cluster. */
static int parse_extensions(struct img *img, const uint8_t *c, size_t clen, char *err,
                            size_t errlen)
{
	struct qcow *q = img->q;
	uint64_t boff = get_be64(c + H_BACKING_OFF);
	uint32_t blen = get_be32(c + H_BACKING_SIZE);
	size_t end = boff && boff < clen ? (size_t)boff : clen, off = q->hdr_len;
	int rc;

	while (off + 8 <= end) {
		uint32_t type = get_be32(c + off), len = get_be32(c + off + 4);

		if (type == QCOW_EXT_END)
			break;
		if (len > end - off - 8)
			return img_errf(err, errlen, -EINVAL,
			                "%s: header extension 0x%x runs past the header", img->path,
			                type);
		if (type == QCOW_EXT_BACKING_FMT) {
			rc = parse_backing_fmt(img, c + off + 8, len, err, errlen);
			if (rc)
				return rc;
		}
		if (type == QCOW_EXT_CRYPTO) {
			rc = parse_crypto(img, c + off + 8, len, err, errlen);
			if (rc)
				return rc;
		}
		/* Unknown extensions are ignored, as the format allows. */
		off += 8 + ROUND_UP((size_t)len, 8);
	}
	if (!boff)
		return 0;
	if (!blen || blen > QCOW_BACKING_NAME_MAX || boff > clen || blen > clen - boff)
		return img_errf(err, errlen, -EINVAL,
		                "%s: backing file name (%u bytes at %llu) lies outside the header "
		                "cluster",
		                img->path, blen, (unsigned long long)boff);
	if (memchr(c + boff, '\0', blen))
		return img_errf(err, errlen, -EINVAL, "%s: backing file name holds a NUL byte",
		                img->path);
	img->backing_name = strndup((const char *)c + boff, blen);
	if (!img->backing_name)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	return 0;
}

static int load_tables(struct img *img, char *err, size_t errlen)
{
	struct qcow *q = img->q;
	size_t l1_bytes = (size_t)q->l1_size * 8, rt_bytes = (size_t)q->rt_entries * 8;
	unsigned nl2, nrb;
	int rc;

	/* Both sizes were checked against the file: a corrupt header cannot make these huge. */
	q->l1 = malloc(l1_bytes ? l1_bytes : 8);
	q->rt = malloc(rt_bytes);
	if (!q->l1 || !q->rt)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	rc = img_pread_full(img->fd, q->l1, l1_bytes, q->l1_off);
	if (!rc)
		rc = img_pread_full(img->fd, q->rt, rt_bytes, q->rt_off);
	if (rc)
		return img_errf(err, errlen, rc, "%s: cannot read its tables: %s", img->path,
		                strerror(-rc));
	q->l1_dirty_lo = UINT32_MAX;

	/* About 4 MiB of L2 tables (32 GiB of disk with 64 KiB clusters), 1 MiB of refcounts. */
	nl2 = (unsigned)((4u << 20) >> q->cluster_bits);
	nl2 = nl2 < 4 ? 4 : nl2 > 64 ? 64 : nl2;
	nrb = (unsigned)((1u << 20) >> q->cluster_bits);
	nrb = nrb < 2 ? 2 : nrb > 16 ? 16 : nrb;
	if (qcache_init(&q->l2c, nl2, q->cs) || qcache_init(&q->rbc, nrb, q->cs))
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	if (!img->rdonly) {
		q->bounce = malloc(2 * q->cs);
		if (!q->bounce)
			return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	}
	return 0;
}

int qcow_open(struct img *img, char *err, size_t errlen)
{
	uint8_t h[QCOW_HDR_V3_LEN], *c = NULL;
	struct stat st;
	struct qcow *q;
	size_t clen;
	int rc;

	q = img->q = calloc(1, sizeof(*q));
	if (!q)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	if (fstat(img->fd, &st) < 0)
		return img_errf(err, errlen, -errno, "%s: %s", img->path, strerror(errno));
	q->file_size = (uint64_t)st.st_size;
	if (q->file_size < QCOW_HDR_V3_LEN)
		return img_errf(err, errlen, -EINVAL,
		                "%s: too short (%llu bytes) for a qcow2 header", img->path,
		                (unsigned long long)q->file_size);
	rc = img_pread_full(img->fd, h, sizeof(h), 0);
	if (rc)
		return img_errf(err, errlen, rc, "%s: cannot read: %s", img->path, strerror(-rc));
	if (get_be32(h + H_MAGIC) != QCOW_MAGIC)
		return img_errf(err, errlen, -EINVAL, "%s: not a qcow2 image (bad magic)",
		                img->path);
	if (get_be32(h + H_VERSION) == 2)
		return img_errf(err, errlen, -ENOTSUP,
		                "%s: qcow2 version 2 is not supported; upgrade the image with "
		                "'qemu-img amend -f qcow2 -o compat=1.1'",
		                img->path);
	if (get_be32(h + H_VERSION) != 3)
		return img_errf(err, errlen, -ENOTSUP, "%s: qcow2 version %u is not supported",
		                img->path, get_be32(h + H_VERSION));
	rc = check_features(img->path, h, err, errlen);
	if (!rc)
		rc = check_geometry(img, q, h, err, errlen);
	if (rc)
		return rc;
	q->crypt_method = get_be32(h + H_CRYPT);
	q->incompat = get_be64(h + H_INCOMPAT);
	q->compat = get_be64(h + H_COMPAT);
	q->autoclear = get_be64(h + H_AUTOCLEAR);
	q->file_end = ROUND_UP(q->file_size, q->cs);

	clen = q->file_size < q->cs ? (size_t)q->file_size : (size_t)q->cs;
	c = malloc(clen);
	if (!c)
		return img_errf(err, errlen, -ENOMEM, "%s: out of memory", img->path);
	rc = img_pread_full(img->fd, c, clen, 0);
	if (rc)
		img_errf(err, errlen, rc, "%s: cannot read: %s", img->path, strerror(-rc));
	else
		rc = parse_extensions(img, c, clen, err, errlen);
	free(c);
	if (!rc)
		rc = load_tables(img, err, errlen);
	if (rc || img->rdonly || !q->autoclear)
		return rc;
	/* Unknown autoclear features (bitmaps, ...) must be dropped before our first write. */
	put_be64(h, 0);
	rc = img_pwrite_full(img->fd, h, 8, QCOW_HDR_AUTOCLEAR);
	if (!rc && fdatasync(img->fd) < 0)
		rc = -errno;
	if (rc)
		return img_errf(err, errlen, rc, "%s: cannot clear autoclear features: %s",
		                img->path, strerror(-rc));
	q->autoclear = 0;
	return 0;
}

void qcow_free(struct img *img)
{
	struct qcow *q = img->q;

	if (!q)
		return;
	qcache_free(&q->l2c);
	qcache_free(&q->rbc);
	free(q->l1);
	free(q->rt);
	free(q->bounce);
	free(q->frees);
	qcow_luks_free(q);
	free(q);
	img->q = NULL;
}

static const struct {
	uint8_t type, bit;
	const char *name;
} feature_names[] = {
	{0, 0, "dirty bit"},        {0, 1, "corrupt bit"},         {0, 2, "external data file"},
	{0, 3, "compression type"}, {0, 4, "extended L2 entries"}, {1, 0, "lazy refcounts"},
	{2, 0, "bitmaps"},          {2, 1, "raw external data"},
};

static size_t put_ext(uint8_t *p, uint32_t type, const void *data, uint32_t len)
{
	put_be32(p, type);
	put_be32(p + 4, len);
	memcpy(p + 8, data, len);
	memset(p + 8 + len, 0, ROUND_UP(len, 8) - len);
	return 8 + ROUND_UP(len, 8);
}

/*
 * Lays out the extension area and backing file name of header cluster hdr
 * (cs bytes, header fields in place), keeping the extensions of old (the
 * previous header cluster, or NULL) other than the backing format.
 * -ENAMETOOLONG if it does not fit in the cluster.
 */
int qcow_header_exts(uint8_t *hdr, size_t cs, const uint8_t *old, const char *backing,
                     enum img_format fmt, bool features)
{
	uint32_t hlen = get_be32(hdr + H_HDR_LEN);
	size_t off = hlen, blen = backing ? strlen(backing) : 0;
	const char *fname = fmt == IMG_FMT_RAW ? "raw" : "qcow2";
	uint8_t table[sizeof(feature_names) / sizeof(feature_names[0])][48];

	memset(hdr + hlen, 0, cs - hlen);
	/* Keep extensions we do not know; ours are rewritten. */
	if (old) {
		uint64_t oboff = get_be64(old + H_BACKING_OFF);
		size_t oend = oboff && oboff < cs ? (size_t)oboff : cs;
		size_t o = get_be32(old + H_HDR_LEN);

		while (o + 8 <= oend) {
			uint32_t type = get_be32(old + o), len = get_be32(old + o + 4);

			if (type == QCOW_EXT_END || len > oend - o - 8)
				break;
			if (type != QCOW_EXT_BACKING_FMT) {
				if (off + 16 + ROUND_UP((size_t)len, 8) > cs)
					return -ENAMETOOLONG;
				off += put_ext(hdr + off, type, old + o + 8, len);
			}
			o += 8 + ROUND_UP((size_t)len, 8);
		}
	}
	if (backing) {
		if (!blen || blen > QCOW_BACKING_NAME_MAX)
			return -EINVAL;
		if (off + 16 + 8 > cs)
			return -ENAMETOOLONG;
		off += put_ext(hdr + off, QCOW_EXT_BACKING_FMT, fname, (uint32_t)strlen(fname));
	}
	if (features && off + 8 + sizeof(table) + 8 + blen <= cs) {
		memset(table, 0, sizeof(table));
		for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
			table[i][0] = feature_names[i].type;
			table[i][1] = feature_names[i].bit;
			memcpy(&table[i][2], feature_names[i].name, strlen(feature_names[i].name));
		}
		off += put_ext(hdr + off, QCOW_EXT_FEATURES, table, sizeof(table));
	}
	if (off + 8 + blen > cs)
		return -ENAMETOOLONG;
	put_be64(hdr + off, 0); /* end of extensions */
	off += 8;
	put_be64(hdr + H_BACKING_OFF, backing ? off : 0);
	put_be32(hdr + H_BACKING_SIZE, (uint32_t)blen);
	if (backing)
		memcpy(hdr + off, backing, blen);
	return 0;
}
