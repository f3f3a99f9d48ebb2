// SPDX-License-Identifier: MIT
/*
 * The snapshot file: header, section table, state blobs, and the frame
 * helpers guest RAM (snapmem.c) shares. The layout is in FORMAT.md.
 */
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap_priv.h"

void snap_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || !errlen)
		return;
	n = snprintf(err, errlen, "snapshot %s: ", path);
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

void snap_describe(const struct snap_reader *r, uint32_t i, char *buf, size_t len)
{
	const struct snap_entry *e = &r->ents[i];

	switch (e->type) {
	case SNAP_VM:
		snprintf(buf, len, "section %u (vm)", i);
		break;
	case SNAP_VCPU:
		snprintf(buf, len, "section %u (vcpu %u)", i, e->id);
		break;
	case SNAP_DEVICE:
		snprintf(buf, len, "section %u (device %s %u)", i, e->name, e->id);
		break;
	case SNAP_RAM:
		snprintf(buf, len, "section %u (ram layout)", i);
		break;
	case SNAP_MEMORY:
		snprintf(buf, len, "section %u (memory chunk %u)", i, e->id);
		break;
	default:
		snprintf(buf, len, "section %u (type %u)", i, e->type);
	}
}

/*
 * Independent 256 KiB blocks: large enough that the per-block size and
 * checksum cost nothing, small enough for the contexts' buffers. Level 0
 * is LZ4's fast mode; snapshots are taken while the guest waits.
 */
static const LZ4F_preferences_t snap_prefs = {
	.frameInfo =
		{
			.blockSizeID = LZ4F_max256KB,
			.blockMode = LZ4F_blockIndependent,
			.contentChecksumFlag = LZ4F_contentChecksumEnabled,
			.blockChecksumFlag = LZ4F_blockChecksumEnabled,
		},
	.compressionLevel = 0,
};

size_t snap_frame_bound(size_t len)
{
	return LZ4F_compressFrameBound(len, &snap_prefs);
}

/*
 * The largest frame of len bytes that any writer could make: LZ4's
 * smallest blocks carry the most per-block overhead. Callers check len
 * against the stored size first, so that nothing here can wrap.
 */
static size_t frame_limit(size_t len)
{
	LZ4F_preferences_t prefs = snap_prefs;

	prefs.frameInfo.blockSizeID = LZ4F_max64KB;
	return LZ4F_compressFrameBound(len, &prefs);
}

int snap_frame_compress(LZ4F_cctx *cctx, void *dst, size_t cap, const void *src, size_t len,
                        size_t *stored, uint32_t *csum)
{
	LZ4F_preferences_t prefs = snap_prefs;
	LZ4F_cctx *own = NULL;
	size_t n, at;
	int ret = -EIO;

	if (!cctx) {
		if (LZ4F_isError(LZ4F_createCompressionContext(&own, LZ4F_VERSION)))
			return -ENOMEM;
		cctx = own;
	}
	prefs.frameInfo.contentSize = len;
	n = LZ4F_compressBegin(cctx, dst, cap, &prefs);
	if (LZ4F_isError(n))
		goto out;
	at = n;
	if (len) {
		n = LZ4F_compressUpdate(cctx, (uint8_t *)dst + at, cap - at, src, len, NULL);
		if (LZ4F_isError(n))
			goto out;
		at += n;
	}
	n = LZ4F_compressEnd(cctx, (uint8_t *)dst + at, cap - at, NULL);
	if (LZ4F_isError(n))
		goto out;
	at += n;
	*stored = at;
	/* With a content checksum, a frame ends with it. */
	*csum = snap_get32((uint8_t *)dst + at - 4);
	ret = 0;
out:
	LZ4F_freeCompressionContext(own);
	return ret;
}

/* Decompresses one whole frame into exactly raw bytes; why says what failed. */
static int frame_decompress(LZ4F_dctx *dctx, const uint8_t *src, size_t stored, void *dst,
                            size_t raw, uint32_t csum, char *why, size_t whylen)
{
	LZ4F_frameInfo_t fi;
	size_t in_off, out_off = 0, n, rc;
	uint8_t dummy;

	if (stored < SNAP_FRAME_MIN || snap_get32(src + stored - 4) != csum) {
		snprintf(why, whylen, "its checksum does not match the table's");
		return -EIO;
	}
	LZ4F_resetDecompressionContext(dctx);
	in_off = stored;
	rc = LZ4F_getFrameInfo(dctx, &fi, src, &in_off);
	if (LZ4F_isError(rc)) {
		snprintf(why, whylen, "bad LZ4 frame header (%s)", LZ4F_getErrorName(rc));
		return -EIO;
	}
	/* Checksums are what make this format safe to load: insist on them. */
	if (fi.frameType != LZ4F_frame || fi.contentChecksumFlag != LZ4F_contentChecksumEnabled ||
	    fi.blockChecksumFlag != LZ4F_blockChecksumEnabled || fi.contentSize != raw) {
		snprintf(why, whylen, "its LZ4 frame lacks checksums or has the wrong size");
		return -EIO;
	}
	for (;;) {
		size_t in = stored - in_off, out = raw - out_off;

		rc = LZ4F_decompress(dctx, raw ? (uint8_t *)dst + out_off : &dummy, &out,
		                     src + in_off, &in, NULL);
		if (LZ4F_isError(rc)) {
			snprintf(why, whylen, "lz4 reports %s", LZ4F_getErrorName(rc));
			return -EIO;
		}
		in_off += in;
		out_off += out;
		if (rc == 0)
			break;
		if (in == 0 && out == 0) {
			snprintf(why, whylen, "its LZ4 frame ends early");
			return -EIO;
		}
	}
	n = stored - in_off;
	if (n || out_off != raw) {
		snprintf(why, whylen, "%zu bytes follow its LZ4 frame", n);
		return -EIO;
	}
	return 0;
}

int snap_pio_all(int fd, void *buf, size_t len, uint64_t off, int write)
{
	while (len) {
		ssize_t n =
			write ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf = (uint8_t *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int snap_section_read(struct snap_reader *r, uint32_t i, LZ4F_dctx *dctx, void *src, void *dst,
                      char *err, size_t errlen)
{
	const struct snap_entry *e = &r->ents[i];
	LZ4F_dctx *own = NULL;
	void *own_src = NULL;
	char why[160], what[80];
	int ret;

	if (!dctx) {
		if (LZ4F_isError(LZ4F_createDecompressionContext(&own, LZ4F_VERSION)))
			return -ENOMEM;
		dctx = own;
	}
	if (!src && !(src = own_src = malloc(e->stored))) {
		ret = -ENOMEM;
		goto out;
	}
	ret = snap_pio_all(r->fd, src, e->stored, e->off, 0);
	if (ret) {
		snap_describe(r, i, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s cannot be read: %s", what, strerror(-ret));
		goto out;
	}
	ret = frame_decompress(dctx, src, e->stored, dst, e->raw, e->csum, why, sizeof(why));
	if (ret) {
		snap_describe(r, i, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s is corrupt: %s", what, why);
	}
out:
	free(own_src);
	LZ4F_freeDecompressionContext(own);
	return ret;
}

/* --- reading --- */

static int header_check(struct snap_reader *r, const uint8_t *h, uint64_t size, char *err,
                        size_t errlen)
{
	uint32_t version = snap_get32(h + H_VERSION), count = snap_get32(h + H_TABLE_COUNT);
	uint64_t file_len = snap_get64(h + H_FILE_LEN), toff = snap_get64(h + H_TABLE_OFF);
	uint64_t tlen = snap_get64(h + H_TABLE_LEN), raw;
	const char *p = r->path;

	if (memcmp(h, SNAP_MAGIC, 8)) {
		snap_fail(err, errlen, p, "is not a husk snapshot (no %s magic)", SNAP_MAGIC);
		return -EINVAL;
	}
	if (version > SNAP_VERSION) {
		snap_fail(err, errlen, p,
		          "was written in format version %u, newer than this husk reads (%u): "
		          "restore it with a newer husk",
		          version, SNAP_VERSION);
		return -EINVAL;
	}
	if (version == 0 || snap_get32(h + H_HDR_SIZE) != SNAP_HDR_SIZE ||
	    snap_get32(h + H_ENTRY_SIZE) != SNAP_ENTRY_SIZE || snap_get64(h + H_RESERVED)) {
		snap_fail(err, errlen, p,
		          "has a malformed header (version, sizes or reserved bytes)");
		return -EINVAL;
	}
	if (snap_get32(h + H_FLAGS)) {
		snap_fail(err, errlen, p, "uses features this husk does not know (flags %#x)",
		          snap_get32(h + H_FLAGS));
		return -EINVAL;
	}
	if (size != file_len) {
		snap_fail(err, errlen, p, "is %llu bytes but its header says %llu (%s)",
		          (unsigned long long)size, (unsigned long long)file_len,
		          size < file_len ? "truncated?" : "trailing bytes");
		return -EINVAL;
	}
	/* No sum here can wrap: each term is checked against file_len first. */
	if (toff < SNAP_HDR_SIZE || toff > file_len || tlen != file_len - toff) {
		snap_fail(err, errlen, p,
		          "section table (at %llu, %llu bytes) does not end the file",
		          (unsigned long long)toff, (unsigned long long)tlen);
		return -EINVAL;
	}
	if (count > SNAP_MAX_SECTIONS) {
		snap_fail(err, errlen, p, "has %u sections, more than the %u allowed", count,
		          SNAP_MAX_SECTIONS);
		return -EINVAL;
	}
	raw = SNAP_HDR_SIZE + (uint64_t)count * SNAP_ENTRY_SIZE;
	if (tlen < SNAP_FRAME_MIN || raw / SNAP_MAX_RATIO > tlen || tlen > frame_limit(raw)) {
		snap_fail(err, errlen, p, "section table of %llu bytes cannot hold %u sections",
		          (unsigned long long)tlen, count);
		return -EINVAL;
	}
	return 0;
}

static int entry_decode(struct snap_reader *r, uint32_t i, const uint8_t *p, char *err,
                        size_t errlen)
{
	struct snap_entry *e = &r->ents[i];
	const char *name = (const char *)p + 40;
	size_t n = strnlen(name, SNAP_NAME_MAX + 1);

	e->type = snap_get32(p);
	e->id = snap_get32(p + 4);
	e->off = snap_get64(p + 8);
	e->stored = snap_get64(p + 16);
	e->raw = snap_get64(p + 24);
	e->csum = snap_get32(p + 32);
	e->flags = snap_get32(p + 36);
	/* A name is NUL-terminated and NUL-padded, so that equal names are equal bytes. */
	for (size_t j = n; j < SNAP_NAME_MAX + 1; j++)
		if (name[j])
			n = SNAP_NAME_MAX + 1;
	if (n > SNAP_NAME_MAX) {
		snap_fail(err, errlen, r->path, "section %u has a malformed name", i);
		return -EINVAL;
	}
	memcpy(e->name, name, n);
	e->name[n] = '\0';
	if (!e->type || e->flags) {
		snap_fail(err, errlen, r->path, "section %u has type %u and flags %#x", i, e->type,
		          e->flags);
		return -EINVAL;
	}
	return 0;
}

static int entry_check(struct snap_reader *r, uint32_t i, uint64_t data_end, char *err,
                       size_t errlen)
{
	const struct snap_entry *e = &r->ents[i];
	char what[80];

	snap_describe(r, i, what, sizeof(what));
	if (e->off < SNAP_HDR_SIZE || e->off > data_end || e->stored > data_end - e->off) {
		snap_fail(err, errlen, r->path, "%s runs past the end of the file (truncated?)",
		          what);
		return -EINVAL;
	}
	if (e->stored < SNAP_FRAME_MIN || e->raw / SNAP_MAX_RATIO > e->stored ||
	    e->stored > frame_limit(e->raw)) {
		snap_fail(err, errlen, r->path, "%s: %llu stored bytes cannot hold %llu bytes",
		          what, (unsigned long long)e->stored, (unsigned long long)e->raw);
		return -EINVAL;
	}
	if (e->type != SNAP_MEMORY && e->raw > SNAP_BLOB_MAX) {
		snap_fail(err, errlen, r->path, "%s is larger than the %u bytes allowed", what,
		          SNAP_BLOB_MAX);
		return -EINVAL;
	}
	return 0;
}

static int by_offset(const void *a, const void *b, void *arg)
{
	const struct snap_entry *e = arg;
	uint64_t x = e[*(const uint32_t *)a].off, y = e[*(const uint32_t *)b].off;

	return x < y ? -1 : x > y;
}

static int by_key(const void *a, const void *b, void *arg)
{
	const struct snap_entry *e = arg, *x = &e[*(const uint32_t *)a],
				*y = &e[*(const uint32_t *)b];

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* No two sections share bytes or a (type, id, name). */
static int entries_cross_check(struct snap_reader *r, char *err, size_t errlen)
{
	uint32_t *idx = malloc(((size_t)r->nr + 1) * sizeof(*idx));
	char a[80], b[80];
	int ret = 0;

	if (!idx)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->nr; i++)
		idx[i] = i;
	qsort_r(idx, r->nr, sizeof(*idx), by_offset, r->ents);
	for (uint32_t i = 1; i < r->nr && !ret; i++) {
		const struct snap_entry *x = &r->ents[idx[i - 1]];

		if (x->off + x->stored > r->ents[idx[i]].off) {
			snap_describe(r, idx[i - 1], a, sizeof(a));
			snap_describe(r, idx[i], b, sizeof(b));
			snap_fail(err, errlen, r->path, "%s overlaps %s", a, b);
			ret = -EINVAL;
		}
	}
	qsort_r(idx, r->nr, sizeof(*idx), by_key, r->ents);
	for (uint32_t i = 1; i < r->nr && !ret; i++) {
		if (!by_key(&idx[i - 1], &idx[i], r->ents)) {
			snap_describe(r, idx[i - 1], a, sizeof(a));
			snap_describe(r, idx[i], b, sizeof(b));
			snap_fail(err, errlen, r->path, "%s and %s have the same name", a, b);
			ret = -EINVAL;
		}
	}
	free(idx);
	return ret;
}

static int table_load(struct snap_reader *r, const uint8_t *hdr, char *err, size_t errlen)
{
	uint64_t toff = snap_get64(hdr + H_TABLE_OFF), tlen = snap_get64(hdr + H_TABLE_LEN);
	size_t raw = SNAP_HDR_SIZE + (size_t)r->nr * SNAP_ENTRY_SIZE;
	uint8_t *src = malloc(tlen), *table = malloc(raw), copy[SNAP_HDR_SIZE];
	LZ4F_dctx *dctx = NULL;
	char why[160];
	int ret = -ENOMEM;

	r->ents = calloc(r->nr ? r->nr : 1, sizeof(*r->ents));
	if (!src || !table || !r->ents ||
	    LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		goto out;
	ret = snap_pio_all(r->fd, src, tlen, toff, 0);
	if (ret) {
		snap_fail(err, errlen, r->path, "section table cannot be read: %s", strerror(-ret));
		goto out;
	}
	ret = frame_decompress(dctx, src, tlen, table, raw, snap_get32(hdr + H_TABLE_CSUM), why,
	                       sizeof(why));
	if (ret) {
		snap_fail(err, errlen, r->path, "section table is corrupt: %s", why);
		goto out;
	}
	memcpy(copy, hdr, sizeof(copy));
	memset(copy + H_FILE_LEN, 0, 8);
	memset(copy + H_TABLE_LEN, 0, 8);
	memset(copy + H_TABLE_CSUM, 0, 4);
	if (memcmp(copy, table, sizeof(copy))) {
		snap_fail(err, errlen, r->path,
		          "header does not match its copy in the section table");
		ret = -EIO;
		goto out;
	}
	for (uint32_t i = 0; i < r->nr && !ret; i++)
		ret = entry_decode(r, i, table + SNAP_HDR_SIZE + (size_t)i * SNAP_ENTRY_SIZE, err,
		                   errlen);
	for (uint32_t i = 0; i < r->nr && !ret; i++)
		ret = entry_check(r, i, toff, err, errlen);
	if (!ret)
		ret = entries_cross_check(r, err, errlen);
out:
	if (ret == -ENOMEM)
		snap_fail(err, errlen, r->path, "out of memory");
	LZ4F_freeDecompressionContext(dctx);
	free(src);
	free(table);
	return ret;
}

int snap_reader_open(const char *path, struct snap_reader **rp, char *err, size_t errlen)
{
	struct snap_reader *r = calloc(1, sizeof(*r));
	uint8_t hdr[SNAP_HDR_SIZE];
	struct stat st;
	int ret = -ENOMEM;

	if (err && errlen)
		err[0] = '\0';
	if (r)
		r->fd = -1;
	if (!r || !(r->path = strdup(path))) {
		snap_fail(err, errlen, path, "out of memory");
		goto err;
	}
	/* O_NONBLOCK: a FIFO given by mistake is refused below, not waited on. */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0 || fstat(r->fd, &st)) {
		ret = -errno;
		snap_fail(err, errlen, path, "cannot be opened: %s", strerror(-ret));
		goto err;
	}
	ret = -EINVAL;
	if (!S_ISREG(st.st_mode)) {
		snap_fail(err, errlen, path, "is not a regular file");
		goto err;
	}
	if (st.st_size < SNAP_HDR_SIZE || snap_pio_all(r->fd, hdr, sizeof(hdr), 0, 0)) {
		snap_fail(err, errlen, path, "is too short to be a snapshot (%lld bytes)",
		          (long long)st.st_size);
		goto err;
	}
	ret = header_check(r, hdr, (uint64_t)st.st_size, err, errlen);
	if (ret)
		goto err;
	r->nr = snap_get32(hdr + H_TABLE_COUNT);
	ret = table_load(r, hdr, err, errlen);
	if (!ret)
		ret = snap_mem_check(r, err, errlen);
	if (ret)
		goto err;
	*rp = r;
	return 0;
err:
	snap_reader_close(r);
	return ret;
}

void snap_reader_close(struct snap_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r->path);
	free(r->ents);
	free(r->mem_secs);
	free(r);
}

unsigned snap_reader_nr_sections(const struct snap_reader *r)
{
	return r->nr;
}

int snap_reader_section(const struct snap_reader *r, unsigned i, struct snap_section_info *info)
{
	const struct snap_entry *e;

	if (i >= r->nr)
		return -ERANGE;
	e = &r->ents[i];
	*info = (struct snap_section_info){
		.type = e->type, .id = e->id, .size = e->raw, .stored = e->stored};
	memcpy(info->name, e->name, sizeof(info->name));
	return 0;
}

int snap_reader_get(struct snap_reader *r, uint32_t type, uint32_t id, const char *name,
                    void **data, size_t *len, char *err, size_t errlen)
{
	void *buf;
	int ret;

	if (!name)
		name = "";
	for (uint32_t i = 0; i < r->nr; i++) {
		const struct snap_entry *e = &r->ents[i];

		if (e->type != type || e->id != id || strcmp(e->name, name))
			continue;
		/* raw is bounded at open: SNAP_BLOB_MAX, or a chunk's size. */
		if (!(buf = malloc(e->raw ? e->raw : 1))) {
			snap_fail(err, errlen, r->path, "out of memory");
			return -ENOMEM;
		}
		ret = snap_section_read(r, i, NULL, NULL, buf, err, errlen);
		if (ret) {
			free(buf);
			return ret;
		}
		*data = buf;
		*len = e->raw;
		return 0;
	}
	snap_fail(err, errlen, r->path, "has no section of type %u, id %u, name \"%s\"", type, id,
	          name);
	return -ENOENT;
}
