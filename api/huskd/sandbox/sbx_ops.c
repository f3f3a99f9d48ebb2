// SPDX-License-Identifier: MIT
/*
 * The files API, folder archives and the environment (API.md §5.1 (8),
 * §5.3): each is one or a few agent requests on the sandbox's session once
 * it is ready (a paused sandbox resumes for them). Archives are made and
 * unpacked by the guest's own tar and gzip, so huskd needs no archive code.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "sbx_int.h"
#include "sbx_text.h"

/* A list's or env's answer, held in memory. */
#define READ_MAX (512u << 20)
/* Archives pass through memory: bigger ones belong to a snapshot, not an HTTP body. */

struct op {
	struct sandbox *sb;
	sbx_done_fn done;
	void *ctx;
	char path[4096];
	int kind;
	struct sbx_buf buf; /* a list's or env's bytes */
};

enum { OP_PLAIN, OP_FOUND, OP_LIST, OP_ENV, OP_STAT, OP_INFO };

/* The live sandbox, or NULL after answering done with why not. */
static struct sandbox *target(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx)
{
	struct sbx_err err;
	struct sandbox *sb = sbx_lookup(m, id, &err);

	if (!sb)
		done(ctx, &err, NULL);
	return sb;
}

static struct op *op_new(struct sandbox *sb, int kind, const char *path, sbx_done_fn done,
                         void *ctx)
{
	struct op *op = calloc(1, sizeof(*op));
	struct sbx_err err;

	if (!op) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return NULL;
	}
	*op = (struct op){.sb = sb, .done = done, .ctx = ctx, .kind = kind};
	if (path)
		workspace_path(sbx_workspace(sb), path, op->path, sizeof(op->path));
	return op;
}

static json_t *list_entries(json_t *out)
{
	json_t *files = json_array(), *e;
	size_t i;

	json_array_foreach(json_object_get(out, "entries"), i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type"));
		int64_t ms = json_integer_value(json_object_get(e, "mtime_ms"));
		char mode[8], when[STORE_ISO_LEN];

		snprintf(mode, sizeof(mode), "%04llo",
		         (unsigned long long)json_integer_value(json_object_get(e, "mode")) &
		                 07777);
		store_iso8601(ms, when);
		json_array_append_new(files, json_pack("{sOsOsbsbssss}", "path",
		                                       json_object_get(e, "name"), "size",
		                                       json_object_get(e, "size"), "isDir",
		                                       type && !strcmp(type, "dir"), "isSymlink",
		                                       type && !strcmp(type, "symlink"), "mode",
		                                       mode, "modTime", when));
	}
	return json_pack("{so}", "files", files);
}

static bool op_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct op *op = arg;

	if (type == FRAME_DATA)
		sbx_buf_add(&op->buf, p, len, READ_MAX);
	return false;
}

static void op_done(void *arg, int rc, json_t *out, const struct sbx_err *err)
{
	struct op *op = arg;
	struct sbx_reply reply = {0};
	struct sbx_err e;
	const char *code = json_string_value(json_object_get(out, "code"));

	if (rc > 0 && op->kind == OP_FOUND && code && !strcmp(code, "not_found")) {
		reply.data = json_pack("{sb}", "found", 0);
		op->done(op->ctx, NULL, &reply);
	} else if (rc > 0) {
		sbx_agent_error(out, &e, NULL);
		op->done(op->ctx, &e, NULL);
	} else if (rc) {
		op->done(op->ctx, err, NULL);
	} else if (op->buf.over) {
		sbx_fail(&e, SBX_TOO_LARGE, -EFBIG, "the answer has over %u MiB", READ_MAX >> 20);
		op->done(op->ctx, &e, NULL);
	} else {
		if (op->kind == OP_LIST) {
			reply.data = list_entries(out);
		} else if (op->kind == OP_INFO) {
			reply.data = json_incref(out);
		} else if (op->kind == OP_STAT) {
			json_t *one = json_pack("{s[O]}", "entries", out), *l = list_entries(one);

			reply.data = json_incref(json_array_get(json_object_get(l, "files"), 0));
			if (reply.data)
				json_object_set_new(reply.data, "path", json_string(op->path));
			json_decref(l);
			json_decref(one);
		} else if (op->kind == OP_FOUND) {
			reply.data = json_pack("{sb}", "found", 1);
		} else if (op->kind == OP_ENV) {
			json_t *env = json_object_get(out, "env");

			json_decref(op->sb->env);
			op->sb->env = json_deep_copy(env);
			if (!op->sb->env)
				op->sb->env = json_object();
			sbx_save(op->sb, json_pack("{sO}", "env", env));
			reply.data = json_pack("{sO}", "env", env);
		}
		op->done(op->ctx, NULL, &reply);
	}
	json_decref(reply.data);
	free(op->buf.data);
	free(op);
}

static const struct sbx_call_ops op_ops = {.data = op_data, .done = op_done};

/* Sends req (stolen) for op. */
static void op_send(struct op *op, json_t *req)
{
	struct sbx_err err;

	if (!req) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		op_done(op, -ENOMEM, NULL, &err);
		return;
	}
	sbx_call(op->sb, req, NULL, &op_ops, op);
	json_decref(req);
}

/* ---- files ---- */

struct write {
	sbx_done_fn done;
	void *ctx;
	size_t n;
};

static void written(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct write *w = arg;
	struct sbx_reply reply = {0};

	(void)sb;
	if (!err)
		reply.data = json_pack("{sI}", "filesWritten", (json_int_t)w->n);
	w->done(w->ctx, err, err ? NULL : &reply);
	json_decref(reply.data);
	free(w);
}

void sbx_fs_write(struct sbx_mgr *m, const char *id, json_t *files, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct write *w;
	struct sbx_err err;

	if (!sb)
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	*w = (struct write){.done = done, .ctx = ctx, .n = json_array_size(files)};
	sbx_files_write(sb, files, false, written, w);
}

void sbx_fs_list(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_LIST, path, done, ctx) : NULL;

	if (op)
		op_send(op, json_pack("{ssss}", "op", "file.list", "path", op->path));
}

void sbx_info(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_INFO, NULL, done, ctx) : NULL;

	if (op)
		op_send(op, json_pack("{ss}", "op", "info"));
}

void sbx_fs_stat(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_STAT, path, done, ctx) : NULL;

	if (op)
		op_send(op, json_pack("{ssss}", "op", "file.stat", "path", op->path));
}

void sbx_fs_mkdir(struct sbx_mgr *m, const char *id, const char *path, bool parents,
                  sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_PLAIN, path, done, ctx) : NULL;

	if (op)
		op_send(op, json_pack("{sssssb}", "op", "file.mkdir", "path", op->path, "parents",
		                      parents));
}

void sbx_fs_rm(struct sbx_mgr *m, const char *id, const char *path, bool dir, bool recursive,
               sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_FOUND, path, done, ctx) : NULL;

	if (!op)
		return;
	if (dir)
		op_send(op, json_pack("{sssssb}", "op", "file.rmdir", "path", op->path, "recursive",
		                      recursive));
	else
		op_send(op, json_pack("{ssss}", "op", "file.rm", "path", op->path));
}

void sbx_env_set(struct sbx_mgr *m, const char *id, json_t *vars, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct op *op = sb ? op_new(sb, OP_ENV, NULL, done, ctx) : NULL;

	if (op)
		op_send(op, json_pack("{sssO}", "op", "env.set", "vars", vars));
}

/* ---- archives ---- */

struct archive {
	sbx_done_fn done;
	void *ctx;
	bool download;
	int fd; /* a download's archive, kept in an unlinked file as it comes */
};

/* tar's own words, as an error (a missing folder: not found). */
static void archived(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                     void *arg)
{
	struct archive *a = arg;
	struct sbx_reply reply = {0};
	struct sbx_err e;

	(void)sb;
	if (err) {
		a->done(a->ctx, err, NULL);
	} else if (a->download && out->buf.over) { /* tar was stopped there */
		sbx_fail(&e, SBX_TOO_LARGE, -EFBIG, "the archive has over %u MiB",
		         ARCHIVE_MAX >> 20);
		a->done(a->ctx, &e, NULL);
	} else if (out->exit_code) {
		sbx_fail(&e,
		         strstr(out->err, "No such file") || strstr(out->err, "Cannot")
		                 ? SBX_NOT_FOUND
		                 : SBX_STEP_FAILED,
		         -EIO, "%s", out->err[0] ? out->err : "tar failed in the sandbox");
		a->done(a->ctx, &e, NULL);
	} else {
		if (a->download) {
			reply.has_fd = true;
			reply.fd = a->fd;
			reply.len = out->buf.len;
		}
		a->done(a->ctx, NULL, &reply);
	}
	if (a->fd >= 0)
		close(a->fd);
	free(a);
}

static void archive(struct sbx_mgr *m, const char *id, json_t *argv, const void *in, size_t len,
                    sbx_done_fn done, void *ctx)
{
	struct sandbox *sb = target(m, id, done, ctx);
	struct archive *a = sb ? calloc(1, sizeof(*a)) : NULL;
	struct agent_input input = {.type = FRAME_STDIN, .data = in, .len = len};
	struct sbx_err err;

	if (!a) {
		json_decref(argv);
		if (sb) {
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
			done(ctx, &err, NULL);
		}
		return;
	}
	*a = (struct archive){.done = done, .ctx = ctx, .download = !in, .fd = -1};
	if (in) {
		sbx_run(sb, argv, &input, 0, archived, a);
		return;
	}
	a->fd = open(m->streams, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (a->fd < 0) {
		json_decref(argv);
		sbx_fail(&err, SBX_UNAVAILABLE, -errno,
		         "cannot make room for the archive under %s: %s", m->streams,
		         strerror(errno));
		free(a);
		done(ctx, &err, NULL);
		return;
	}
	sbx_run_to(sb, argv, NULL, ARCHIVE_MAX, a->fd, archived, a);
}

void sbx_fs_download(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done,
                     void *ctx)
{
	char full[4096];

	workspace_path(sbx_workspace(sbx_find(m, id)), path, full, sizeof(full));
	archive(m, id, json_pack("[ssssss]", "tar", "-czf", "-", "-C", full, "."), NULL, 0, done,
	        ctx);
}

void sbx_fs_upload(struct sbx_mgr *m, const char *id, const char *path, const void *tar, size_t len,
                   bool gzip, sbx_done_fn done, void *ctx)
{
	char full[4096];

	workspace_path(sbx_workspace(sbx_find(m, id)), path, full, sizeof(full));
	archive(m, id,
	        json_pack("[sssss]", "sh", "-c",
	                  gzip ? "mkdir -p \"$1\" && tar -xzf - -C \"$1\""
	                       : "mkdir -p \"$1\" && tar -xf - -C \"$1\"",
	                  "sh", full),
	        tar, len, done, ctx);
}
