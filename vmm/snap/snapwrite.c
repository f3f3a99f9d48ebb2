// SPDX-License-Identifier: MIT
/*
 * Writing a snapshot: sections go to "path.tmp" as they come, the table
 * and the header last, then fsync and rename (FORMAT.md, "Writing").
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snap_priv.h"
#include "snapfile.h"

int snap_writer_open(const char *path, struct snap_writer **wp)
{
	struct snap_writer *w = calloc(1, sizeof(*w));
	int ret = -ENOMEM;

	if (!w)
		return -ENOMEM;
	w->fd = -1;
	if (!(w->path = strdup(path)) || asprintf(&w->tmp, "%s.tmp", path) < 0) {
		w->tmp = NULL;
		goto err;
	}
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		ret = -errno;
		free(w->tmp);
		w->tmp = NULL; /* not ours: abort must not remove it */
		goto err;
	}
	w->off = SNAP_HDR_SIZE;
	*wp = w;
	return 0;
err:
	snap_writer_abort(w);
	return ret;
}

static int writer_error(struct snap_writer *w, int ret)
{
	if (!w->err)
		w->err = ret;
	return ret;
}

int snap_writer_seal(struct snap_writer *w, const struct snap_key *key)
{
	int ret;

	if (w->err)
		return w->err;
	if (w->nr || (w->flags & SNAP_FLAG_SEALED))
		return writer_error(w, -EINVAL);
	ret = snap_seal_init();
	if (!ret)
		ret = snap_salt_new(w->salt);
	if (ret)
		return writer_error(w, ret);
	w->key = *key;
	w->flags |= SNAP_FLAG_SEALED;
	return 0;
}

/*
 * The bytes that go to the file for a frame: the frame itself, or in a
 * sealed file a sealed copy with its tag after it (*stored grows by it).
 */
static int frame_out(struct snap_writer *w, uint32_t index, const void **frame, size_t *stored)
{
	int ret;

	if (!(w->flags & SNAP_FLAG_SEALED))
		return 0;
	if (w->seal_cap < *stored + SNAP_TAG_LEN) {
		void *p = realloc(w->seal_buf, *stored + SNAP_TAG_LEN);

		if (!p)
			return -ENOMEM;
		w->seal_buf = p;
		w->seal_cap = *stored + SNAP_TAG_LEN;
	}
	memcpy(w->seal_buf, *frame, *stored);
	ret = snap_seal(&w->key, w->salt, index, w->seal_buf, *stored, w->seal_buf + *stored);
	if (ret)
		return ret;
	*frame = w->seal_buf;
	*stored += SNAP_TAG_LEN;
	return 0;
}

/* The next section's table entry and place in the file; its bytes are the caller's to write. */
static int entry_claim(struct snap_writer *w, uint32_t type, uint32_t id, const char *name,
                       size_t stored, size_t raw, uint32_t csum, struct snap_slot *slot)
{
	struct snap_entry *e;

	if (w->nr == SNAP_MAX_SECTIONS)
		return writer_error(w, -EFBIG);
	if (w->nr == w->cap) {
		uint32_t cap = w->cap ? w->cap * 2 : 64;
		void *p = reallocarray(w->ents, cap, sizeof(*w->ents));

		if (!p)
			return writer_error(w, -ENOMEM);
		w->ents = p;
		w->cap = cap;
	}
	*slot = (struct snap_slot){.index = w->nr, .off = w->off, .stored = stored};
	e = &w->ents[w->nr++];
	*e = (struct snap_entry){.type = type,
	                         .id = id,
	                         .off = w->off,
	                         .stored = stored + snap_tag_len(w->flags),
	                         .raw = raw,
	                         .csum = csum};
	if (name)
		strcpy(e->name, name); /* length checked by the caller */
	w->off += e->stored;
	return 0;
}

int snap_writer_put(struct snap_writer *w, uint32_t type, uint32_t id, const char *name,
                    const void *frame, size_t stored, size_t raw, uint32_t csum)
{
	struct snap_slot slot;
	int ret = entry_claim(w, type, id, name, stored, raw, csum, &slot);

	if (ret)
		return ret;
	ret = frame_out(w, slot.index, &frame, &stored);
	if (!ret)
		ret = snap_pwrite_all(w->fd, frame, stored, slot.off);
	return ret ? writer_error(w, ret) : 0;
}

int snap_writer_claim(struct snap_writer *w, uint32_t type, uint32_t id, size_t stored, size_t raw,
                      uint32_t csum, struct snap_slot *slot)
{
	return w->err ? w->err : entry_claim(w, type, id, NULL, stored, raw, csum, slot);
}

int snap_writer_fill(const struct snap_writer *w, const struct snap_slot *slot, uint8_t *frame,
                     size_t cap)
{
	size_t len = slot->stored;
	int ret = 0;

	if (cap < len + snap_tag_len(w->flags))
		return -EINVAL;
	/* In place: the caller's buffer has room for the tag. */
	if (w->flags & SNAP_FLAG_SEALED) {
		ret = snap_seal(&w->key, w->salt, slot->index, frame, len, frame + len);
		len += SNAP_TAG_LEN;
	}
	return ret ? ret : snap_pwrite_all(w->fd, frame, len, slot->off);
}

int snap_writer_add(struct snap_writer *w, uint32_t type, uint32_t id, const char *name,
                    const void *data, size_t len)
{
	size_t cap, stored;
	uint32_t csum;
	void *buf;
	int ret;

	if (w->err)
		return w->err;
	if (!type || type == SNAP_RAM || type == SNAP_MEMORY || type == SNAP_BASE)
		return writer_error(w, -EINVAL);
	if (!name)
		name = "";
	if (strlen(name) > SNAP_NAME_MAX)
		return writer_error(w, -ENAMETOOLONG);
	if (len > SNAP_BLOB_MAX)
		return writer_error(w, -EFBIG);
	for (uint32_t i = 0; i < w->nr; i++)
		if (w->ents[i].type == type && w->ents[i].id == id &&
		    !strcmp(w->ents[i].name, name))
			return writer_error(w, -EEXIST);
	cap = snap_frame_bound(len);
	if (!(buf = malloc(cap)))
		return writer_error(w, -ENOMEM);
	ret = snap_frame_compress(NULL, buf, cap, data, len, &stored, &csum);
	if (ret)
		writer_error(w, ret);
	else
		ret = snap_writer_put(w, type, id, name, buf, stored, len, csum);
	free(buf);
	return ret;
}

static void header_fill(uint8_t *h, const struct snap_writer *w)
{
	memset(h, 0, SNAP_HDR_SIZE);
	memcpy(h, SNAP_MAGIC, 8);
	snap_put32(h + H_VERSION, SNAP_VERSION);
	snap_put32(h + H_HDR_SIZE, SNAP_HDR_SIZE);
	snap_put32(h + H_FLAGS, w->flags);
	snap_put32(h + H_ENTRY_SIZE, SNAP_ENTRY_SIZE);
	snap_put64(h + H_TABLE_OFF, w->off);
	snap_put32(h + H_TABLE_COUNT, w->nr);
	if (w->flags & SNAP_FLAG_SEALED)
		memcpy(h + H_RESERVED, w->salt, SNAP_SALT_LEN);
}

static void entry_encode(uint8_t *p, const struct snap_entry *e)
{
	snap_put32(p, e->type);
	snap_put32(p + 4, e->id);
	snap_put64(p + 8, e->off);
	snap_put64(p + 16, e->stored);
	snap_put64(p + 24, e->raw);
	snap_put32(p + 32, e->csum);
	snap_put32(p + 36, e->flags);
	memset(p + 40, 0, SNAP_NAME_MAX + 1);
	memcpy(p + 40, e->name, strlen(e->name));
}

static int fsync_dir(const char *path)
{
	char *dir = strdup(path), *slash;
	int fd, ret = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else
		slash[slash == dir] = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return ret;
}

int snap_writer_commit(struct snap_writer *w)
{
	size_t raw = SNAP_HDR_SIZE + (size_t)w->nr * SNAP_ENTRY_SIZE, cap, stored;
	uint8_t *table = NULL, *frame = NULL, hdr[SNAP_HDR_SIZE];
	const void *out;
	uint32_t csum;
	int ret = w->err;

	if (ret)
		goto err;
	ret = -ENOMEM;
	cap = snap_frame_bound(raw);
	if (!(table = malloc(raw)) || !(frame = malloc(cap)))
		goto err;
	/*
	 * The table opens with a copy of the header, less the three fields
	 * that depend on the table's own frame: the table's checksum then
	 * covers the rest of the header too (FORMAT.md).
	 */
	header_fill(table, w);
	for (uint32_t i = 0; i < w->nr; i++)
		entry_encode(table + SNAP_HDR_SIZE + (size_t)i * SNAP_ENTRY_SIZE, &w->ents[i]);
	ret = snap_frame_compress(NULL, frame, cap, table, raw, &stored, &csum);
	out = frame;
	if (!ret)
		ret = frame_out(w, SNAP_TABLE_INDEX, &out, &stored);
	if (ret)
		goto err;
	header_fill(hdr, w);
	snap_put64(hdr + H_FILE_LEN, w->off + stored);
	snap_put64(hdr + H_TABLE_LEN, stored);
	snap_put32(hdr + H_TABLE_CSUM, csum);
	/* The header last: a file cut short before here has no magic. */
	ret = snap_pwrite_all(w->fd, out, stored, w->off);
	if (!ret)
		ret = snap_pwrite_all(w->fd, hdr, sizeof(hdr), 0);
	if (!ret && fsync(w->fd))
		ret = -errno;
	if (ret)
		goto err;
	if (rename(w->tmp, w->path)) {
		ret = -errno;
		goto err;
	}
	free(w->tmp);
	w->tmp = NULL; /* renamed: nothing to remove */
	ret = fsync_dir(w->path);
err:
	free(table);
	free(frame);
	snap_writer_abort(w);
	return ret;
}

void snap_writer_abort(struct snap_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp)
		unlink(w->tmp);
	free(w->tmp);
	free(w->path);
	free(w->ents);
	free(w->seal_buf);
	OPENSSL_cleanse(&w->key, sizeof(w->key));
	free(w);
}
