// SPDX-License-Identifier: MIT
/*
 * envd's routes under /e2b/envd (API.md §11.2): with E2B_SANDBOX_URL set
 * to <huskd>/e2b/envd the SDK sends every sandbox's envd requests here,
 * naming the sandbox in E2b-Sandbox-Id and proving it may use it with the
 * sandbox's access token (X-Access-Token) - no API key, as E2B's envd.
 * GET /health, the Connect services (POST /<service>/<method>), and the
 * files: GET /files?path= (a file's bytes) and POST /files?path= (one file
 * as application/octet-stream, or multipart/form-data parts each named by
 * its filename), given to ?username= when named.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"
#include "e2b_wire.h"
#include "r_target.h"

/* Files one multipart upload holds at most. */
#define UPLOAD_PARTS_MAX 64

ROUTE(e2b_health)
{
	struct routes *rt = ctx;
	char id[STORE_ID_LEN];
	struct sbx_err err;
	json_t *info;
	const char *st;

	(void)p;
	if (cx_sandbox(rt, r, false, id))
		return;
	if (sbx_get(rt->m, id, &info, &err)) {
		e2b_error(r, 502, "sandbox %s is not running: %s", id, err.msg);
		return;
	}
	st = json_string_value(json_object_get(info, "status"));
	if (st && (!strcmp(st, "terminated") || !strcmp(st, "failed") || !strcmp(st, "deleted") ||
	           !strcmp(st, "stopping")))
		e2b_error(r, 502, "sandbox %s is not running (%s)", id, st);
	else
		http_respond(r, 204, NULL, NULL, 0);
	json_decref(info);
}

ROUTE(e2b_rpc)
{
	struct routes *rt = ctx;
	char id[STORE_ID_LEN];

	if (cx_sandbox(rt, r, true, id))
		return;
	if (!strcmp(p[0], "process.Process"))
		e2b_process_call(rt, r, id, p[1]);
	else if (!strcmp(p[0], "filesystem.Filesystem"))
		e2b_fs_call(rt, r, id, p[1]);
	else
		cx_error(r, CX_UNIMPLEMENTED,
		         "huskd's envd serves process.Process and filesystem.Filesystem, not %s",
		         p[0]);
}

static void read_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct http_req *r = ctx;

	if (err)
		e2b_reply_error(r, err);
	else if (reply->has_fd)
		stream_live(r, reply->fd, reply->live, "application/octet-stream");
	else
		http_respond(r, 200, "application/octet-stream", reply->bytes, reply->len);
}

ROUTE(e2b_files_get)
{
	struct routes *rt = ctx;
	char id[STORE_ID_LEN], path[4096];

	(void)p;
	if (cx_sandbox(rt, r, false, id))
		return;
	if (http_query_get(r, "path", path, sizeof(path)) <= 0) {
		e2b_error(r, 400, "give the file as ?path= (at most 4095 bytes)");
		return;
	}
	sbx_fs_read(rt->m, id, path, read_done, r);
}

/* An upload: its files written, answered [{name, type, path}]. */
struct upload {
	struct http_req *r;
	json_t *answer;
};

static void written(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct upload *u = ctx;

	(void)reply;
	if (err)
		e2b_reply_error(u->r, err);
	else
		http_respond_json(u->r, 200, json_incref(u->answer));
	json_decref(u->answer);
	free(u);
}

/* One file for sbx_fs_write {path, content, user?} and its answer {name, type, path}. */
static int add_file(json_t *files, json_t *answer, const char *path, const char *user,
                    const void *data, size_t len)
{
	char *b64 = e2b_b64(data, len);
	const char *slash = strrchr(path, '/');
	int rc;

	if (!b64)
		return -ENOMEM;
	rc = json_array_append_new(files, json_pack("{ssssss*}", "path", path, "content", b64,
	                                            "user", *user ? user : NULL));
	free(b64);
	if (rc == 0)
		rc = json_array_append_new(answer,
		                           json_pack("{ssssss}", "name", slash ? slash + 1 : path,
		                                     "type", "file", "path", path));
	return rc ? -ENOMEM : 0;
}

ROUTE(e2b_files_post)
{
	struct routes *rt = ctx;
	const char *ct = http_header(r, "Content-Type");
	char id[STORE_ID_LEN], path[4096] = "", user[64] = "", boundary[MULTIPART_BOUNDARY_LEN];
	json_t *files = json_array(), *answer = json_array();
	struct multipart_part *parts = NULL;
	struct upload *u = NULL;
	size_t len, n = 0;
	const void *body = http_body(r, &len);
	int rc = 0;

	(void)p;
	if (cx_sandbox(rt, r, false, id))
		goto out;
	if (http_query_get(r, "path", path, sizeof(path)) == -2 ||
	    http_query_get(r, "username", user, sizeof(user)) == -2) {
		e2b_error(r, 400, "path is at most 4095 bytes, username 63");
		goto out;
	}
	if (ct && !strncmp(ct, "application/octet-stream", 24)) {
		if (!path[0]) {
			e2b_error(r, 400, "an octet-stream upload needs ?path=");
			goto out;
		}
		if (http_header(r, "Content-Encoding")) {
			e2b_error(r, 400,
			          "huskd takes uploads without Content-Encoding: send them plain");
			goto out;
		}
		rc = add_file(files, answer, path, user, body, len);
	} else if (multipart_boundary(ct, boundary) == 0) {
		parts = calloc(UPLOAD_PARTS_MAX, sizeof(*parts));
		rc = parts ? multipart_parse(boundary, body, len, parts, UPLOAD_PARTS_MAX, &n)
		           : -ENOMEM;
		if (rc == -ENOMEM)
			goto no_memory;
		if (rc || !n) {
			e2b_error(r, 400, "the body is not multipart/form-data with a file part%s",
			          rc == -E2BIG ? " (64 files at most)" : "");
			goto out;
		}
		for (size_t i = 0; i < n && !rc; i++) {
			const char *to = n == 1 && path[0] ? path : parts[i].filename;

			if (!to[0]) {
				e2b_error(r, 400, "part %zu has no filename: name the file's path",
				          i);
				goto out;
			}
			rc = add_file(files, answer, to, user, parts[i].data, parts[i].len);
		}
	} else {
		e2b_error(r, 400,
		          "Content-Type must be multipart/form-data (with a boundary) or "
		          "application/octet-stream");
		goto out;
	}
	if (rc || !files || !answer || !(u = calloc(1, sizeof(*u))))
		goto no_memory;
	*u = (struct upload){.r = r, .answer = answer};
	answer = NULL;
	sbx_fs_write(rt->m, id, files, written, u);
	goto out;
no_memory:
	e2b_error(r, 503, "out of memory");
out:
	free(parts);
	json_decref(files);
	json_decref(answer);
}

bool e2b_by_host(const char *domain, struct http_req *r)
{
	const char *prefix = proxy_e2b_prefix(http_header(r, "Host"), domain);
	size_t n = prefix ? strlen(prefix) : 0;

	if (!prefix)
		return false;
	/* Asked again for the same request (admission, then the handler): prefixed already. */
	if (!strncmp(http_path(r), prefix, n) && http_path(r)[n] == '/')
		return true;
	if (http_path_prefix(r, prefix))
		log_warn(NULL, "out of memory routing %s for E2B", http_path(r));
	return true;
}
