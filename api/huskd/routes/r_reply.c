// SPDX-License-Identifier: MIT
/*
 * Answers: how the manager's typed errors become HTTP statuses and error
 * codes (API.md §3.5), and what routes share to read a request's body and
 * query and to name huskd's own address.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

/* ---- errors ---- */

static const char *const not_found[] = {
	[S_SANDBOX] = "SANDBOX_NOT_FOUND",     [S_FILE] = "FILE_NOT_FOUND",
	[S_ARCHIVE] = "FILE_NOT_FOUND",        [S_CHECKPOINT] = "CHECKPOINT_NOT_FOUND",
	[S_SNAPSHOT] = "SNAPSHOT_NOT_FOUND",   [S_JOB] = "JOB_NOT_FOUND",
	[S_EXECUTION] = "EXECUTION_NOT_FOUND", [S_BUILD] = "SNAPSHOT_NOT_FOUND",
	[S_RUNTIME] = "RUNTIME_NOT_FOUND",     [S_STREAM] = "STREAM_NOT_FOUND",
};

/* The sandbox id in the request's path, for the log ("" if none). */
static void path_sandbox(struct http_req *r, char *out, size_t len)
{
	const char *p = strstr(http_path(r), "sbx_");

	snprintf(out, len, "%.*s", p ? (int)strcspn(p, "/?") : 0, p ? p : "");
}

void reply_error(struct http_req *r, const struct sbx_err *err, enum subject what)
{
	int status = 500;
	const char *code = "INTERNAL";
	char id[64];

	switch (err->fault) {
	case SBX_BAD_INPUT:
		status = 400, code = "BAD_REQUEST";
		break;
	case SBX_NO_SANDBOX:
		status = 404, code = "SANDBOX_NOT_FOUND";
		break;
	case SBX_ENDED:
		/* Not 409: the client reads every 409 on execute as "busy". */
		status = 410, code = "SANDBOX_TERMINATED";
		break;
	case SBX_BUSY:
		status = 409, code = "SANDBOX_BUSY";
		break;
	case SBX_STATE:
		status = 409, code = "INVALID_STATE";
		break;
	case SBX_EXISTS:
		status = 409, code = what == S_FILE ? "FILE_ERROR" : "CONFLICT";
		break;
	case SBX_NOT_FOUND:
		status = 404, code = not_found[what];
		break;
	case SBX_TOO_LARGE:
		status = 413;
		code = what == S_FILE      ? "FILE_TOO_LARGE"
		       : what == S_ARCHIVE ? "ARCHIVE_TOO_LARGE"
		       : what == S_RUNTIME ? "IMAGE_TOO_LARGE"
		                           : "BAD_REQUEST";
		break;
	case SBX_DENIED:
		status = 403, code = "FILE_ERROR";
		break;
	case SBX_NO_SPACE:
		status = 507, code = what == S_RUNTIME ? "NO_SPACE" : "FILE_ERROR";
		break;
	case SBX_STEP_FAILED:
		status = what == S_ARCHIVE ? 400 : 422;
		code = what == S_ARCHIVE   ? "ARCHIVE_FAILED"
		       : what == S_RUNTIME ? "IMPORT_FAILED"
		                           : "BUILD_FAILED";
		break;
	case SBX_UNREACHABLE:
		status = 502, code = "SANDBOX_UNREACHABLE";
		break;
	case SBX_FULL:
		/* Not permanent: the client retries 503 for 30 s, by when sandboxes may have gone.
		 */
		status = 503, code = "HOST_FULL";
		if (http_add_header(r, "Retry-After", "5"))
			log_warn(NULL, "cannot add Retry-After to a 503");
		break;
	case SBX_UNAVAILABLE:
		status = 503, code = "UNAVAILABLE";
		break;
	case SBX_FORBIDDEN:
		status = 403, code = "FORBIDDEN";
		break;
	case SBX_OK:
	case SBX_INTERNAL:
		break;
	}
	if (status >= 500) {
		path_sandbox(r, id, sizeof(id));
		log_error(id[0] ? id : NULL, "%s %s: %d %s: %s", http_method(r), http_path(r),
		          status, code, err->msg);
	}
	api_error(r, status, code, "%s", err->msg);
}

void reply_done(struct http_req *r, const struct sbx_err *err, const struct sbx_reply *reply,
                enum subject what)
{
	if (err)
		reply_error(r, err, what);
	else
		api_ok(r, 200, reply && reply->data ? json_incref(reply->data) : NULL);
}

void done_sandbox(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	reply_done(ctx, err, reply, S_SANDBOX);
}

void done_file(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	reply_done(ctx, err, reply, S_FILE);
}

/* ---- request helpers ---- */

json_t *body_object(struct http_req *r)
{
	size_t len = 0;
	const char *body = http_body(r, &len);
	json_error_t e;
	json_t *j;

	if (!len)
		return json_object();
	j = json_loadb(body, len, 0, &e);
	if (!j) {
		api_error(r, 400, "BAD_REQUEST", "the body is not valid JSON: %s (line %d)", e.text,
		          e.line);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		api_error(r, 400, "BAD_REQUEST", "the body must be a JSON object");
		return NULL;
	}
	return j;
}

int query_int(struct http_req *r, const char *key, int def)
{
	char v[32];

	return http_query_get(r, key, v, sizeof(v)) > 0 ? atoi(v) : def;
}

void query_page(struct http_req *r, int def, int max, int *limit, int *offset)
{
	*limit = query_int(r, "limit", def);
	if (*limit <= 0 || *limit > max)
		*limit = *limit <= 0 ? def : max;
	*offset = query_int(r, "offset", 0);
	if (*offset < 0)
		*offset = 0;
}

int base_url(struct routes *rt, struct http_req *r, char *out, size_t outlen)
{
	const char *host = http_header(r, "Host");

	if (rt->cfg.public_url)
		return snprintf(out, outlen, "%s", rt->cfg.public_url) < (int)outlen
		               ? 0
		               : -ENAMETOOLONG;
	if (!host || !*host || strpbrk(host, "/ \\"))
		host = "127.0.0.1";
	return snprintf(out, outlen, "%s://%s", rt->cfg.tls ? "https" : "http", host) < (int)outlen
	               ? 0
	               : -ENAMETOOLONG;
}
