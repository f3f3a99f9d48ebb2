// SPDX-License-Identifier: MIT
/*
 * The route table, the API key check, and how the manager's typed errors
 * become HTTP statuses and error codes (API.md §3.5).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"
#include "router.h"

static const struct route api_routes[] = {
	{"POST", "/sandbox", r_create},
	{"GET", "/sandbox", r_list},
	{"GET", "/sandbox/runtimes", r_runtimes},
	{"POST", "/sandbox/runtimes/import", r_import_init},
	{"PUT", "/sandbox/runtimes/import/:id", r_import_upload},
	{"POST", "/sandbox/runtimes/import/:id/run", r_import_run},
	{"GET", "/sandbox/runtimes/import/:id", r_import_get},
	{"DELETE", "/sandbox/runtimes/:id", r_runtime_delete},
	{"GET", "/sandbox/stats", r_stats},
	{"GET", "/services/stats/:org", r_service_stats},
	{"GET", "/sandbox/status/:id", r_status},
	{"GET", "/sandbox/execution/:id", r_execution},
	{"DELETE", "/sandbox/execution/:id", r_execution_cancel},
	{"GET", "/sandbox/sandboxes/:id/executions", r_executions},
	{"GET", "/sandbox/sandboxes/:id/events", r_events},
	{"GET", "/sandbox/:id", r_get},
	{"DELETE", "/sandbox/:id", r_destroy},
	{"POST", "/sandbox/:id/execute", r_execute},
	{"POST", "/sandbox/:id/pause", r_pause},
	{"POST", "/sandbox/:id/resume", r_resume},
	{"PUT", "/sandbox/:id/network", r_net_set},
	{"POST", "/sandbox/:id/snapshot", r_snap_create},
	{"POST", "/sandbox/:id/checkpoint", r_ckpt_create},
	{"GET", "/sandbox/checkpoints/:id", r_ckpt_list},
	{"POST", "/sandbox/:id/checkpoint/:ck/restore", r_ckpt_restore},
	{"DELETE", "/sandbox/:id/checkpoint/:ck", r_ckpt_delete},
	{"GET", "/sandbox/snapshots", r_snap_list},
	{"GET", "/sandbox/snapshots/public", r_snap_public_list},
	{"GET", "/sandbox/snapshots/public/:ref", r_snap_public_get},
	{"GET", "/sandbox/snapshots/lineage", r_snap_lineage},
	{"POST", "/sandbox/snapshots/build", r_build_init},
	{"PUT", "/sandbox/snapshots/:snap/upload", r_build_upload},
	{"POST", "/sandbox/snapshots/:snap/finalize", r_build_finalize},
	{"GET", "/sandbox/snapshots/:snap", r_snap_get},
	{"PATCH", "/sandbox/snapshots/:snap", r_snap_tag},
	{"DELETE", "/sandbox/snapshots/:snap", r_snap_delete},
	{"GET", "/streams/:id", r_stream},
	{"PATCH", "/sandbox/env/:id", r_env},
	{"POST", "/sandbox/sandboxes/:id/jobs", r_job_create},
	{"GET", "/sandbox/sandboxes/:id/jobs", r_job_list},
	{"GET", "/sandbox/sandboxes/:id/jobs/:job", r_job_get},
	{"DELETE", "/sandbox/sandboxes/:id/jobs/:job", r_job_stop},
	{"POST", "/fs/:id", r_fs_write},
	{"GET", "/fs/:id", r_fs_read},
	{"GET", "/fs/list/:id", r_fs_list},
	{"POST", "/fs/mkdir/:id", r_fs_mkdir},
	{"POST", "/fs/rm/:id", r_fs_rm},
	{"POST", "/fs/rmdir/:id", r_fs_rmdir},
	{"GET", "/fs/download/:id", r_fs_download},
	{"POST", "/fs/upload/:id", r_fs_upload},
};

/* Stream URLs are capabilities (unguessable ids); the client fetches them without a key. */
static bool authorized(struct routes *rt, struct http_req *r)
{
	const char *h = http_header(r, "Authorization");

	if (!strncmp(http_path(r), "/streams/", 9))
		return true;
	if (!h || strncmp(h, "Bearer ", 7))
		return false;
	for (char **k = rt->cfg.keys; *k; k++)
		if (!strcmp(h + 7, *k))
			return true;
	return false;
}

void routes_handle(struct http_req *r, void *ctx)
{
	struct routes *rt = ctx;

	/* A sandbox's url is public, as the reference's are (no key on the way in). */
	if (proxy_route(rt, r))
		return;
	if (!authorized(rt, r)) {
		api_error(
			r, 401, "UNAUTHORIZED",
			"a valid API key is required: send 'Authorization: Bearer <key>' (keys are "
			"in %s/api-keys or HUSK_API_KEY)",
			rt->cfg.state);
		return;
	}
	router_dispatch(r, api_routes, sizeof(api_routes) / sizeof(api_routes[0]), rt);
}

int routes_open(struct sbx_mgr *m, const struct routes_config *cfg, struct routes **out)
{
	struct routes *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return -ENOMEM;
	rt->m = m;
	rt->cfg = *cfg;
	sbx_mgr_on_change(m, wait_kick, rt);
	*out = rt;
	return 0;
}

void routes_close(struct routes *rt)
{
	wait_drop_all(rt);
}

void routes_free(struct routes *rt)
{
	free(rt);
}

/* ---- errors ---- */

static const char *const not_found[] = {
	[S_SANDBOX] = "SANDBOX_NOT_FOUND",     [S_FILE] = "FILE_NOT_FOUND",
	[S_ARCHIVE] = "FILE_NOT_FOUND",        [S_CHECKPOINT] = "CHECKPOINT_NOT_FOUND",
	[S_SNAPSHOT] = "SNAPSHOT_NOT_FOUND",   [S_JOB] = "JOB_NOT_FOUND",
	[S_EXECUTION] = "EXECUTION_NOT_FOUND", [S_BUILD] = "SNAPSHOT_NOT_FOUND",
	[S_RUNTIME] = "RUNTIME_NOT_FOUND",
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
		status = 409, code = "SANDBOX_TERMINATED";
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
	return snprintf(out, outlen, "http://%s", host) < (int)outlen ? 0 : -ENAMETOOLONG;
}
