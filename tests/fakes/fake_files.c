// SPDX-License-Identifier: MIT
/*
 * The file ops on the fake guest's files (fake_fs.c). A write replaces the
 * whole file at END, as husk-agent's do; a read streams 64 KiB DATA frames
 * as the connection takes them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct write_req {
	struct req r;
	char *path;
	unsigned mode;
	uint8_t *buf;
	size_t len, cap;
	bool failed; /* an ERROR went out: swallow DATA until END */
};

struct read_req {
	struct req r;
	struct blob *b;
	size_t pos, end;
	bool endless; /* FAKE_VMM=endless-reads: zeros until a CANCEL */
};

static void reply_errno(struct conn *c, uint32_t id, int e, const char *what, const char *path)
{
	static const struct {
		int e;
		const char *code;
	} codes[] = {{ENOENT, "not_found"},      {EEXIST, "exists"},
	             {ENOTEMPTY, "exists"},      {ENOTDIR, "not_a_directory"},
	             {EISDIR, "is_a_directory"}, {ENOSPC, "no_space"},
	             {EINVAL, "bad_request"},    {EBUSY, "busy"}};
	const char *code = "io_error";

	if (!e) {
		conn_send_json(c, FRAME_RESULT, id, json_pack("{s:s}", "path", path));
		return;
	}
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].e == e)
			code = codes[i].code;
	conn_send_error(c, id, code, "cannot %s '%s': %s", what, path, strerror(e));
}

static void write_free(struct write_req *w)
{
	conn_fake(w->r.c)->g.stored -= w->len;
	free(w->buf);
	free(w->path);
	free(w);
}

static void write_fail(struct write_req *w, int e)
{
	reply_errno(w->r.c, w->r.id, e, "write", w->path);
	conn_fake(w->r.c)->g.stored -= w->len;
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
	w->failed = true;
}

static void write_commit(struct write_req *w)
{
	struct guest *g = &conn_fake(w->r.c)->g;
	struct blob *b;
	struct fentry *old = fs_find(g, w->path);

	if (fs_is_dir(g, w->path)) {
		write_fail(w, EISDIR);
		return;
	}
	b = blob_new(w->len);
	if (!b) {
		write_fail(w, ENOMEM);
		return;
	}
	if (w->len)
		memcpy(b->data, w->buf, w->len);
	if (old) {
		g->stored -= old->blob->len;
		blob_put(old->blob);
		old->blob = b;
		old->mode = w->mode;
		old->mtime_ms = wall_ms();
	} else if (fs_add(g, w->path, false, w->mode, b)) {
		write_fail(w, ENOMEM);
		return;
	}
	watch_emit(w->path, old ? "write" : "create");
	conn_send_json(w->r.c, FRAME_RESULT, w->r.id,
	               json_pack("{s:s, s:I}", "path", w->path, "size", (json_int_t)w->len));
	free(w->buf);
	w->buf = NULL;
	w->len = 0; /* the bytes now count as the file's */
}

static void write_frame(struct req *r, const struct frame *f)
{
	struct write_req *w = (struct write_req *)r;
	struct guest *g = &conn_fake(r->c)->g;

	if (f->type == FRAME_CANCEL) {
		req_unregister(r);
		if (!w->failed)
			conn_send_error(r->c, r->id, "cancelled", "write of '%s' cancelled",
			                w->path);
		write_free(w);
		return;
	}
	if (f->type != FRAME_DATA)
		return;
	if (!w->failed && f->len) {
		if (g->stored + f->len > FAKE_FILES_MAX) {
			write_fail(w, ENOSPC);
		} else {
			if (w->len + f->len > w->cap) {
				size_t cap = w->cap ? w->cap : FAKE_CHUNK;
				uint8_t *nb;

				while (cap < w->len + f->len)
					cap *= 2;
				nb = realloc(w->buf, cap);
				if (!nb) {
					write_fail(w, ENOMEM);
					goto end;
				}
				w->buf = nb;
				w->cap = cap;
			}
			memcpy(w->buf + w->len, f->payload, f->len);
			w->len += f->len;
			g->stored += f->len;
		}
	}
end:
	if (!(f->flags & FRAME_F_END))
		return;
	req_unregister(r);
	if (!w->failed)
		write_commit(w);
	write_free(w);
}

static void write_drop(struct req *r)
{
	write_free((struct write_req *)r);
}

static const struct req_ops write_ops = {.on_frame = write_frame, .drop = write_drop};

static void file_write(struct conn *c, uint32_t id, const char *path, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	json_t *mode = json_object_get(req, "mode");
	struct write_req *w;
	int e;

	if (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
	             json_integer_value(mode) > 07777)) {
		conn_send_error(c, id, "bad_request", "mode must be an integer from 0 to 07777");
		return;
	}
	e = fs_is_dir(g, path)
	            ? EISDIR
	            : fs_check_ancestors(g, path, json_is_false(json_object_get(req, "mkdirs")));
	if (e) {
		reply_errno(c, id, e, "write", path);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->path = strdup(path))) {
		free(w);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	w->mode = mode ? (unsigned)json_integer_value(mode) : 0644;
	req_register(c, &w->r, id, &write_ops);
}

static void read_free(struct read_req *rd)
{
	blob_put(rd->b);
	free(rd);
}

static void read_tick(struct req *r)
{
	struct read_req *rd = (struct read_req *)r;

	static const char zeros[FAKE_CHUNK];

	while (rd->endless && conn_queued(r->c) < FAKE_OUTQ_HIGH && !conn_dead(r->c))
		conn_send(r->c, FRAME_DATA, 0, r->id, zeros, sizeof(zeros));
	if (rd->endless)
		return;
	while (rd->pos < rd->end && conn_queued(r->c) < FAKE_OUTQ_HIGH && !conn_dead(r->c)) {
		size_t n = rd->end - rd->pos < FAKE_CHUNK ? rd->end - rd->pos : FAKE_CHUNK;

		conn_send(r->c, FRAME_DATA, 0, r->id, rd->b->data + rd->pos, n);
		rd->pos += n;
	}
	if (rd->pos < rd->end || conn_dead(r->c))
		return;
	req_unregister(r);
	conn_send_json(r->c, FRAME_RESULT, r->id, json_pack("{s:I}", "size", (json_int_t)rd->pos));
	read_free(rd);
}

static void read_frame(struct req *r, const struct frame *f)
{
	if (f->type != FRAME_CANCEL)
		return;
	req_unregister(r);
	conn_send_error(r->c, r->id, "cancelled", "read cancelled");
	read_free((struct read_req *)r);
}

static void read_drop(struct req *r)
{
	read_free((struct read_req *)r);
}

static const struct req_ops read_ops = {
	.on_frame = read_frame, .tick = read_tick, .drop = read_drop};

static void file_read(struct conn *c, uint32_t id, const char *path, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	json_t *off = json_object_get(req, "offset"), *len = json_object_get(req, "length");
	struct fentry *e = fs_find(g, path);
	struct read_req *rd;
	size_t from, n;

	if (!e || e->dir) {
		reply_errno(c, id, fs_is_dir(g, path) ? EISDIR : ENOENT, "read", path);
		return;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	from = json_is_integer(off) && json_integer_value(off) > 0 ? (size_t)json_integer_value(off)
	                                                           : 0;
	from = from < e->blob->len ? from : e->blob->len;
	n = e->blob->len - from;
	if (json_is_integer(len) && json_integer_value(len) >= 0 &&
	    (uint64_t)json_integer_value(len) < n)
		n = (size_t)json_integer_value(len);
	rd->b = e->blob;
	rd->b->refs++;
	rd->endless = conn_fake(c)->fail & FAIL_ENDLESS_READS;
	rd->pos = from;
	rd->end = from + n;
	req_register(c, &rd->r, id, &read_ops);
	read_tick(&rd->r);
}

static void file_list(struct conn *c, uint32_t id, const char *path)
{
	struct guest *g = &conn_fake(c)->g;
	size_t plen = strcmp(path, "/") ? strlen(path) : 0;
	json_t *seen, *entries;

	if (!fs_is_dir(g, path)) {
		reply_errno(c, id, fs_is_file(g, path) ? ENOTDIR : ENOENT, "list", path);
		return;
	}
	seen = json_object();
	entries = json_array();
	for (struct fentry *e = g->files; e && seen && entries; e = e->next) {
		char *full;

		if (!fs_below(e->path, path))
			continue;
		full = strndup(e->path, plen + 1 + strcspn(e->path + plen + 1, "/"));
		if (!full)
			continue;
		if (!json_object_get(seen, full + plen + 1)) {
			json_object_set_new(seen, full + plen + 1, json_true());
			json_array_append_new(
				entries,
				fs_entry_json(full + plen + 1, fs_find(g, full), e->mtime_ms));
		}
		free(full);
	}
	json_decref(seen);
	conn_send_json(c, FRAME_RESULT, id,
	               json_pack("{s:s, s:o}", "path", path, "entries", entries));
}

static void file_mkdir(struct conn *c, uint32_t id, const char *path, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	json_t *mode = json_object_get(req, "mode");
	bool parents = !json_is_false(json_object_get(req, "parents"));
	int e = 0;

	if (fs_is_file(g, path) || (!parents && fs_is_dir(g, path)))
		e = EEXIST;
	else if (!fs_is_dir(g, path) && !(e = fs_check_ancestors(g, path, !parents)) &&
	         fs_add(g, path, true,
	                json_is_integer(mode) ? (unsigned)json_integer_value(mode) & 07777 : 0755,
	                NULL))
		e = ENOMEM;
	if (!e)
		watch_emit(path, "create");
	reply_errno(c, id, e, "create directory", path);
}

static void file_rmdir(struct conn *c, uint32_t id, const char *path, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	bool recursive = json_is_true(json_object_get(req, "recursive"));
	int e = 0;

	if (!fs_is_dir(g, path)) {
		e = fs_is_file(g, path) ? ENOTDIR : ENOENT;
	} else if (!strcmp(path, "/")) {
		e = EBUSY;
	} else {
		for (struct fentry *f = g->files; f && !recursive; f = f->next)
			if (fs_below(f->path, path))
				e = ENOTEMPTY;
	}
	if (!e)
		fs_remove(g, path, true);
	if (!e)
		watch_emit(path, "remove");
	reply_errno(c, id, e, "remove directory", path);
}

void op_file(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	const char *p = json_string_value(json_object_get(req, "path"));
	struct fentry *f;
	char *path;

	if (!p || !*p) {
		conn_send_error(c, id, "bad_request", "path must be a non-empty string");
		return;
	}
	path = fs_path_norm(p);
	if (!path) {
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	f = fs_find(g, path);
	if (!strcmp(op, "file.write")) {
		file_write(c, id, path, req);
	} else if (!strcmp(op, "file.read") && (conn_fake(c)->fail & FAIL_MUTE_READS)) {
		; /* taken, never answered */
	} else if (!strcmp(op, "file.read")) {
		file_read(c, id, path, req);
	} else if (!strcmp(op, "file.list")) {
		file_list(c, id, path);
	} else if (!strcmp(op, "file.stat")) {
		if (fs_is_dir(g, path) || f)
			conn_send_json(c, FRAME_RESULT, id, fs_entry_json(path, f, wall_ms()));
		else
			reply_errno(c, id, ENOENT, "stat", path);
	} else if (!strcmp(op, "file.mkdir")) {
		file_mkdir(c, id, path, req);
	} else if (!strcmp(op, "file.rm")) {
		int e = !f && !fs_is_dir(g, path) ? ENOENT : fs_is_dir(g, path) ? EISDIR : 0;

		if (!e)
			fs_remove(g, path, false);
		if (!e)
			watch_emit(path, "remove");
		reply_errno(c, id, e, "remove", path);
	} else if (!strcmp(op, "file.rmdir")) {
		file_rmdir(c, id, path, req);
	} else if (!strcmp(op, "file.watch")) {
		watch_start(c, id, path, req);
	} else {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
	}
	free(path);
}
