// SPDX-License-Identifier: MIT
/* The /fs family, archives and PATCH /sandbox/env (API.md §5.1 (8), §5.3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

ROUTE(r_fs_write)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *files;

	if (!body)
		return;
	files = json_object_get(body, "files");
	if (!json_is_array(files))
		api_error(r, 400, "BAD_REQUEST",
		          "files must be an array of {path, content (base64)}");
	else
		sbx_fs_write(rt->m, p[0], files, done_file, r);
	json_decref(body);
}

static void read_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_FILE);
	else if (reply->has_fd)
		stream_live(ctx, reply->fd, reply->live, "application/octet-stream");
	else
		http_respond(ctx, 200, "application/octet-stream", reply->bytes, reply->len);
}

ROUTE(r_fs_read)
{
	struct routes *rt = ctx;
	char path[4096];

	if (http_query_get(r, "path", path, sizeof(path)) <= 0) {
		api_error(r, 400, "BAD_REQUEST", "give the file as ?path=");
		return;
	}
	sbx_fs_read(rt->m, p[0], path, read_done, r);
}

ROUTE(r_fs_list)
{
	struct routes *rt = ctx;
	char path[4096] = ".";

	http_query_get(r, "path", path, sizeof(path));
	sbx_fs_list(rt->m, p[0], path, done_file, r);
}

/* rm and rmdir answer {"success":true, "found": bool} at the top level. */
static void found_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_FILE);
	else
		api_ok_fields(ctx, 200, json_incref(reply->data));
}

/* mkdir, rm, rmdir: a {path, recursive} body. */
static void fs_simple(struct http_req *r, const char *id, struct routes *rt, int what)
{
	json_t *body = body_object(r);
	const char *path;
	bool recursive;

	if (!body)
		return;
	path = json_string_value(json_object_get(body, "path"));
	recursive = json_is_true(json_object_get(body, "recursive"));
	if (!path)
		api_error(r, 400, "BAD_REQUEST", "the body needs a path");
	else if (what == 0)
		sbx_fs_mkdir(rt->m, id, path, recursive, done_file, r);
	else
		sbx_fs_rm(rt->m, id, path, what == 2, recursive, found_done, r);
	json_decref(body);
}

ROUTE(r_fs_mkdir)
{
	fs_simple(r, p[0], ctx, 0);
}

ROUTE(r_fs_rm)
{
	fs_simple(r, p[0], ctx, 1);
}

ROUTE(r_fs_rmdir)
{
	fs_simple(r, p[0], ctx, 2);
}

/* format: "tar.gz" (the default) or "zip" into *zip; else 0 after a 400. */
static int format_of(struct http_req *r, bool *zip, bool *given)
{
	char fmt[16] = "";

	*given = http_query_get(r, "format", fmt, sizeof(fmt)) > 0;
	*zip = *given && !strcmp(fmt, "zip");
	if (*given && !*zip && strcmp(fmt, "tar.gz")) {
		api_error(r, 400, "BAD_REQUEST",
		          "format '%s' is not one huskd serves: zip or tar.gz", fmt);
		return 0;
	}
	return 1;
}

static void download_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_ARCHIVE);
	else
		stream_file(ctx, reply->fd, "application/gzip");
}

static void download_zip_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_ARCHIVE);
	else
		stream_file(ctx, reply->fd, "application/zip");
}

ROUTE(r_fs_download)
{
	struct routes *rt = ctx;
	char path[4096] = ".";
	bool zip, given;

	if (!format_of(r, &zip, &given))
		return;
	http_query_get(r, "path", path, sizeof(path));
	if (zip)
		sbx_fs_download_zip(rt->m, p[0], path, download_zip_done, r);
	else
		sbx_fs_download(rt->m, p[0], path, download_done, r);
}

static void upload_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	(void)reply;
	if (err)
		reply_error(ctx, err, S_ARCHIVE);
	else
		api_ok(ctx, 200, NULL);
}

/* zip or tar.gz, as format says or, without it, as the body's first bytes say. */
ROUTE(r_fs_upload)
{
	static const unsigned char gz[] = {0x1f, 0x8b}, pk[] = {'P', 'K', 3, 4};
	struct routes *rt = ctx;
	char path[4096] = ".";
	size_t len = 0;
	const unsigned char *body = http_body(r, &len);
	bool zip, given;

	if (!format_of(r, &zip, &given))
		return;
	if (!given)
		zip = len >= 4 && !memcmp(body, pk, 4);
	if (zip && (len < 4 || memcmp(body, pk, 4))) {
		api_error(r, 400, "BAD_REQUEST", "the body is not a zip archive (format=zip)");
		return;
	}
	if (!zip && (len < 2 || memcmp(body, gz, 2))) {
		api_error(r, 400, "BAD_REQUEST",
		          "the body is not a gzip-compressed tar archive: send a tar.gz, or a zip");
		return;
	}
	http_query_get(r, "path", path, sizeof(path));
	/* The body lives as long as r, which is answered only when the upload is done. */
	if (zip)
		sbx_fs_upload_zip(rt->m, p[0], path, body, len, upload_done, r);
	else
		sbx_fs_upload(rt->m, p[0], path, body, len, true, upload_done, r);
}

ROUTE(r_env)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *env, *v;
	const char *k;

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
	if (!json_is_object(env))
		api_error(r, 400, "BAD_REQUEST",
		          "the body needs env: an object of strings or nulls");
	else
		sbx_env_set(rt->m, p[0], env, done_sandbox, r);
	json_decref(body);
}

struct job_call {
	struct routes *rt;
	struct http_req *r;
};

/* The Job (or {jobs}) with its stream URLs signed. */
static void job_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct job_call *jc = ctx;

	if (!err && reply && reply->data)
		stream_sign(jc->rt, reply->data);
	reply_done(jc->r, err, reply, S_JOB);
	free(jc);
}

static struct job_call *job_call(struct routes *rt, struct http_req *r)
{
	struct job_call *jc = calloc(1, sizeof(*jc));

	if (!jc)
		api_error(r, 503, "UNAVAILABLE", "out of memory");
	else
		*jc = (struct job_call){.rt = rt, .r = r};
	return jc;
}

ROUTE(r_job_create)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *streams;
	struct job_call *jc;
	char base[512];

	if (!body)
		return;
	streams = json_object_get(body, "streams");
	if (base_url(rt, r, base, sizeof(base)))
		api_error(r, 400, "BAD_REQUEST", "the Host header is too long");
	else if (streams && !json_is_object(streams))
		api_error(
			r, 400, "BAD_REQUEST",
			"streams must be an object {stdout?, stderr?} of stream ids or \"ignore\"");
	else if ((jc = job_call(rt, r)))
		sbx_job_create(rt->m, p[0], json_object_get(body, "command"), streams, base,
		               job_done, jc);
	json_decref(body);
}

ROUTE(r_job_list)
{
	struct routes *rt = ctx;
	struct job_call *jc = job_call(rt, r);

	if (jc)
		sbx_job_list(rt->m, p[0], query_int(r, "limit", 0), job_done, jc);
}

ROUTE(r_job_get)
{
	struct routes *rt = ctx;

	struct job_call *jc = job_call(rt, r);

	if (jc)
		sbx_job_get(rt->m, p[0], p[1], job_done, jc);
}

ROUTE(r_job_stop)
{
	struct routes *rt = ctx;
	char force[8] = "";

	struct job_call *jc;

	http_query_get(r, "force", force, sizeof(force));
	if ((jc = job_call(rt, r)))
		sbx_job_stop(rt->m, p[0], p[1], !strcmp(force, "true"), job_done, jc);
}
