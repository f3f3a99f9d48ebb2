// SPDX-License-Identifier: MIT
/*
 * The /fs family and PATCH /sandbox/env (API.md §5.1 (8), §5.3): each is one
 * or a few agent requests, made on a task thread once the sandbox is ready,
 * then answered on the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "agentop.h"
#include "handlers.h"
#include "json_resp.h"
#include "sbx_priv.h"
#include "util.h"

/* A file read whole into memory to answer with: bigger ones need the archive download. */
#define READ_MAX (512u << 20)

/* A path from the query or body, made absolute against the workspace. */
static const char *full_path(const char *path, char *out, size_t outlen)
{
	workspace_path(WORKSPACE, path ? path : ".", out, outlen);
	return out;
}

static void answer_write(struct op *op)
{
	if (op->rc) {
		api_error(op->r, op->rc == -EINVAL ? 400 : 502, "FILE_ERROR", "%s", op->err);
		return;
	}
	api_ok(op->r, 200,
	       json_pack("{sI}", "filesWritten", (json_int_t)json_array_size(op->files)));
}

HANDLER(h_fs_write)
{
	json_t *body = body_object(r), *files;
	struct op *op;

	if (!body)
		return;
	files = json_object_get(body, "files");
	if (!json_is_array(files)) {
		api_error(r, 400, "BAD_REQUEST",
		          "files must be an array of {path, content (base64)}");
		json_decref(body);
		return;
	}
	op = op_new(OP_WRITE_FILES, answer_write);
	if (!op) {
		json_decref(body);
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->files = json_incref(files);
	json_decref(body);
	op_submit(ctx, r, p[0], op);
}

static void answer_read(struct op *op)
{
	void *data;

	if (op->rc) {
		answer_agent_error(op);
		return;
	}
	if (op->len > READ_MAX) {
		api_error(
			op->r, 413, "FILE_TOO_LARGE",
			"the file has %zu bytes; read files over %u MiB with the archive download",
			op->len, READ_MAX >> 20);
		return;
	}
	data = op->len ? mmap(NULL, op->len, PROT_READ, MAP_PRIVATE, op->fd, 0) : NULL;
	if (op->len && data == MAP_FAILED) {
		api_error(op->r, 500, "INTERNAL", "cannot map the file read: %s", strerror(errno));
		return;
	}
	http_respond(op->r, 200, "application/octet-stream", data, op->len);
	if (op->len)
		munmap(data, op->len);
}

HANDLER(h_fs_read)
{
	char path[4096], full[4096];
	struct op *op;

	if (http_query_get(r, "path", path, sizeof(path)) <= 0) {
		api_error(r, 400, "BAD_REQUEST", "give the file as ?path=");
		return;
	}
	op = op_new(OP_READ, answer_read);
	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->req = json_pack("{ss}", "path", full_path(path, full, sizeof(full)));
	op_submit(ctx, r, p[0], op);
}

static void answer_list(struct op *op)
{
	json_t *files = json_array(), *e;
	size_t i;

	if (op->rc) {
		json_decref(files);
		answer_agent_error(op);
		return;
	}
	json_array_foreach(json_object_get(op->out, "entries"), i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type"));
		int64_t ms = json_integer_value(json_object_get(e, "mtime_ms"));
		char mode[8], when[40];

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
	api_ok(op->r, 200, json_pack("{so}", "files", files));
}

HANDLER(h_fs_list)
{
	char path[4096] = ".", full[4096];
	struct op *op = op_new(OP_CALL, answer_list);

	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	http_query_get(r, "path", path, sizeof(path));
	op->req =
		json_pack("{ssss}", "op", "file.list", "path", full_path(path, full, sizeof(full)));
	op_submit(ctx, r, p[0], op);
}

static void answer_plain(struct op *op)
{
	if (op->rc)
		answer_agent_error(op);
	else
		api_ok(op->r, 200, NULL);
}

/* rm and rmdir: a missing path is no error, just found: false. */
static void answer_found(struct op *op)
{
	const char *code = json_string_value(json_object_get(op->out, "code"));

	if (op->rc > 0 && code && !strcmp(code, "not_found"))
		api_ok_fields(op->r, 200, json_pack("{sb}", "found", 0));
	else if (op->rc)
		answer_agent_error(op);
	else
		api_ok_fields(op->r, 200, json_pack("{sb}", "found", 1));
}

/* mkdir, rm, rmdir: {path, recursive} bodies into one agent request. */
static void fs_simple(struct http_req *r, const char *id, void *ctx, const char *agent_op,
                      const char *flag, void (*answer)(struct op *op))
{
	json_t *body = body_object(r);
	const char *path;
	char full[4096];
	struct op *op;

	if (!body)
		return;
	path = json_string_value(json_object_get(body, "path"));
	op = path ? op_new(OP_CALL, answer) : NULL;
	if (!op) {
		api_error(r, 400, "BAD_REQUEST", "the body needs a path");
		json_decref(body);
		return;
	}
	op->req = json_pack("{ssss}", "op", agent_op, "path", full_path(path, full, sizeof(full)));
	if (flag)
		json_object_set_new(op->req, flag,
		                    json_boolean(json_is_true(json_object_get(body, "recursive"))));
	json_decref(body);
	op_submit(ctx, r, id, op);
}

HANDLER(h_fs_mkdir)
{
	fs_simple(r, p[0], ctx, "file.mkdir", "parents", answer_plain);
}

HANDLER(h_fs_rm)
{
	fs_simple(r, p[0], ctx, "file.rm", NULL, answer_found);
}

HANDLER(h_fs_rmdir)
{
	fs_simple(r, p[0], ctx, "file.rmdir", "recursive", answer_found);
}

static void answer_env(struct op *op)
{
	struct sandbox *sb = sbx_find(op->d, op->sandbox);
	json_t *env = json_object_get(op->out, "env"), *priv;

	if (op->rc) {
		answer_agent_error(op);
		return;
	}
	if (sb) {
		json_decref(sb->env);
		sb->env = json_deep_copy(env);
		priv = json_pack("{sO}", "env", env);
		if (store_sandbox_update(op->d->store, op->sandbox, NULL, priv, NULL))
			huskd_log(op->sandbox, "cannot record its environment");
		json_decref(priv);
	}
	api_ok(op->r, 200, json_pack("{sO}", "env", env));
}

HANDLER(h_env)
{
	json_t *body = body_object(r), *env, *v;
	const char *k;
	struct op *op;

	if (!body)
		return;
	env = json_object_get(body, "env");
	json_object_foreach(env, k, v)
	{
		if (!json_is_string(v) && !json_is_null(v)) {
			api_error(r, 400, "BAD_REQUEST", "env.%s must be a string or null", k);
			json_decref(body);
			return;
		}
	}
	op = json_is_object(env) ? op_new(OP_ENV, answer_env) : NULL;
	if (!op) {
		api_error(r, 400, "BAD_REQUEST",
		          "the body needs env: an object of strings or nulls");
		json_decref(body);
		return;
	}
	op->req = json_pack("{sssO}", "op", "env.set", "vars", env);
	json_decref(body);
	op_submit(ctx, r, p[0], op);
}
