// SPDX-License-Identifier: MIT
/*
 * Reading a snapshot file: the header, the section table (every entry
 * checked against the file and each other before use) and the state blobs.
 * The layout is in FORMAT.md; the frame helpers are in snapframe.c.
 */
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap_priv.h"

/* --- reading --- */

static int header_check(struct snap_reader *r, const uint8_t *h, uint64_t size, char *err,
                        size_t errlen)
{
	uint32_t version = snap_get32(h + H_VERSION), count = snap_get32(h + H_TABLE_COUNT);
	uint64_t file_len = snap_get64(h + H_FILE_LEN), toff = snap_get64(h + H_TABLE_OFF);
	uint64_t tlen = snap_get64(h + H_TABLE_LEN), raw, tag;
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
	/* A sealed file's salt is where the reserved bytes are. */
	if (version == 0 || snap_get32(h + H_HDR_SIZE) != SNAP_HDR_SIZE ||
	    snap_get32(h + H_ENTRY_SIZE) != SNAP_ENTRY_SIZE ||
	    (snap_get64(h + H_RESERVED) && !(snap_get32(h + H_FLAGS) & SNAP_FLAG_SEALED))) {
		snap_fail(err, errlen, p,
		          "has a malformed header (version, sizes or reserved bytes)");
		return -EINVAL;
	}
	if (snap_get32(h + H_FLAGS) & ~SNAP_FLAGS_KNOWN) {
		snap_fail(err, errlen, p, "uses features this husk does not know (flags %#x)",
		          snap_get32(h + H_FLAGS) & ~SNAP_FLAGS_KNOWN);
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
	tag = snap_tag_len(snap_get32(h + H_FLAGS));
	if (tlen < SNAP_FRAME_MIN + tag || raw / SNAP_MAX_RATIO > tlen - tag ||
	    tlen - tag > snap_frame_limit(raw)) {
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
	uint64_t tag = snap_tag_len(r->flags);
	char what[80];

	snap_describe(r, i, what, sizeof(what));
	if (e->off < SNAP_HDR_SIZE || e->off > data_end || e->stored > data_end - e->off) {
		snap_fail(err, errlen, r->path, "%s runs past the end of the file (truncated?)",
		          what);
		return -EINVAL;
	}
	if (e->stored < SNAP_FRAME_MIN + tag || e->raw / SNAP_MAX_RATIO > e->stored - tag ||
	    e->stored - tag > snap_frame_limit(e->raw)) {
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
	if (r->flags & SNAP_FLAG_SEALED) {
		tlen -= SNAP_TAG_LEN; /* at least a frame and a tag: header_check() */
		if (snap_unseal(&r->key, r->salt, SNAP_TABLE_INDEX, src, tlen, src + tlen)) {
			snap_fail(err, errlen, r->path,
			          "is sealed with another key (or was altered): it does not open "
			          "with the key given");
			ret = -EACCES;
			goto out;
		}
	}
	ret = snap_frame_decompress(dctx, src, tlen, table, raw, snap_get32(hdr + H_TABLE_CSUM),
	                            why, sizeof(why));
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
	return snap_reader_open_key(path, NULL, rp, err, errlen);
}

int snap_reader_sealed(const struct snap_reader *r)
{
	return !!(r->flags & SNAP_FLAG_SEALED);
}

int snap_reader_open_key(const char *path, const struct snap_key *key, struct snap_reader **rp,
                         char *err, size_t errlen)
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
	r->file_len = snap_get64(hdr + H_FILE_LEN);
	r->table_sum = snap_get32(hdr + H_TABLE_CSUM);
	r->flags = snap_get32(hdr + H_FLAGS);
	if (r->flags & SNAP_FLAG_SEALED) {
		ret = -EACCES;
		if (!key) {
			snap_fail(err, errlen, path,
			          "is sealed (encrypted at rest): it opens only with its key, "
			          "which huskd keeps for the org that owns it");
			goto err;
		}
		if (snap_seal_init()) {
			snap_fail(err, errlen, path, "is sealed, and OpenSSL has no AES-256-GCM");
			goto err;
		}
		r->key = *key;
		memcpy(r->salt, hdr + H_RESERVED, SNAP_SALT_LEN);
	}
	ret = table_load(r, hdr, err, errlen);
	if (!ret)
		ret = snap_mem_check(r, err, errlen);
	if (!ret)
		ret = snap_base_check(r, err, errlen);
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
	OPENSSL_cleanse(&r->key, sizeof(r->key));
	free(r);
}

void snap_reader_identity(const struct snap_reader *r, uint64_t *file_len, uint32_t *table_sum)
{
	*file_len = r->file_len;
	*table_sum = r->table_sum;
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
