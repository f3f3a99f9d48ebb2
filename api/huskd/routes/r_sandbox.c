// SPDX-License-Identifier: MIT
/* The sandbox lifecycle (API.md §5.1): create, list, get, status, destroy, pause, resume. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

struct create {
	struct routes *rt;
	struct http_req *r;
	json_t *body;
};

/* Its command, started at once (queued until the sandbox is up); the ids go in info. */
static void start_command(struct create *c, json_t *info)
{
	json_t *cmd = json_object_get(c->body, "command"), *exec = NULL;
	const char *id = json_string_value(json_object_get(info, "sandboxId"));
	struct sbx_exec_req req = {.argv = json_object_get(cmd, "exec"),
	                           .stream = json_object_get(c->body, "stream")};
	struct sbx_err err = {.msg = "the Host header is too long"};
	char base[512];
	bool resumed;

	req.base = base;
	if (base_url(c->rt, c->r, base, sizeof(base)) ||
	    sbx_exec_start(c->rt->m, id, &req, &exec, &resumed, &err)) {
		log_warn(id, "its command could not start: %s", err.msg);
		return;
	}
	for (const char *const *k = (const char *const[]){"executionId", "stdoutStreamUrl",
	                                                  "stderrStreamUrl", NULL};
	     *k; k++)
		if (json_object_get(exec, *k))
			json_object_set(info, *k, json_object_get(exec, *k));
	json_decref(exec);
}

/* A sandbox's audit records (husk's GET /audit, with a key of its org). */
static void audit_url(struct routes *rt, struct http_req *r, json_t *info)
{
	const char *id = json_string_value(json_object_get(info, "sandboxId"));
	char base[512];

	if (id && base_url(rt, r, base, sizeof(base)) == 0)
		json_object_set_new(info, "auditStreamUrl",
		                    json_sprintf("%s/audit?sandboxId=%s", base, id));
}

static void created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct create *c = ctx;
	json_t *info;

	if (err) {
		reply_error(c->r, err, S_SANDBOX);
	} else {
		info = json_deep_copy(reply->data);
		call_about(c->r, json_string_value(json_object_get(info, "sandboxId")));
		audit_url(c->rt, c->r, info);
		if (json_object_get(c->body, "command"))
			start_command(c, info);
		stream_sign(c->rt, info);
		if (proxy_url(c->rt, c->r, info))
			log_warn(NULL, "a sandbox's url is too long for the Host header given");
		api_ok(c->r, 201,
		       json_pack("{sOsOsO*sO*sO*sO*sO*sO*sO*}", "sandboxId",
		                 json_object_get(info, "sandboxId"), "status",
		                 json_object_get(info, "status"), "executionId",
		                 json_object_get(info, "executionId"), "stdoutStreamUrl",
		                 json_object_get(info, "stdoutStreamUrl"), "stderrStreamUrl",
		                 json_object_get(info, "stderrStreamUrl"), "url",
		                 json_object_get(info, "url"), "portUrl",
		                 json_object_get(info, "portUrl"), "urlToken",
		                 json_object_get(info, "urlToken"), "auditStreamUrl",
		                 json_object_get(info, "auditStreamUrl")));
		json_decref(info);
	}
	json_decref(c->body);
	free(c);
}

ROUTE(r_create)
{
	json_t *body = body_object(r);
	struct sbx_err err;
	struct create *c;

	(void)p;
	if (!body || body_set_org(r, body)) {
		json_decref(body);
		return;
	}
	/* Its command's streams are checked before anything is made for it. */
	if (json_object_get(body, "command") &&
	    sbx_streams_check(((struct routes *)ctx)->m, caller_org(r),
	                      json_object_get(body, "stream"), &err)) {
		reply_error(r, &err, S_STREAM);
		json_decref(body);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		json_decref(body);
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	*c = (struct create){.rt = ctx, .r = r, .body = body};
	sbx_create(c->rt->m, body, created, c);
}

/* includeDeleted=true: whether a deleted sandbox is shown (else it is not found). */
static bool include_deleted(struct http_req *r)
{
	char v[8];

	return http_query_get(r, "includeDeleted", v, sizeof(v)) > 0 && !strcmp(v, "true");
}

ROUTE(r_get)
{
	struct routes *rt = ctx;
	char wait[256], ms[32];
	struct sbx_err err;
	json_t *info = NULL;
	bool deleted_too = include_deleted(r);

	/* A deleted sandbox is out of sight unless asked for (API.md §4.1), as the reference's. */
	if (!deleted_too && sbx_get(rt->m, p[0], &info, &err) == 0 &&
	    !strcmp(json_string_value(json_object_get(info, "status")) ?: "", "deleted")) {
		api_error(r, 404, "SANDBOX_NOT_FOUND",
		          "sandbox %s was deleted (includeDeleted=true shows its record)", p[0]);
		json_decref(info);
		return;
	}
	json_decref(info);
	info = NULL;
	if (http_query_get(r, "waitForStatus", wait, sizeof(wait)) > 0) {
		uint64_t n = http_query_get(r, "waitMs", ms, sizeof(ms)) > 0
		                     ? strtoull(ms, NULL, 10)
		                     : 60000;
		wait_status(rt, r, p[0], wait, n);
		return;
	}
	if (sbx_get(rt->m, p[0], &info, &err)) {
		reply_error(r, &err, S_SANDBOX);
		return;
	}
	(void)proxy_url(rt, r, info); /* a Host too long for a url: none given */
	audit_url(rt, r, info);
	api_ok(r, 200, info);
}

ROUTE(r_status)
{
	char wait[256] = "", ms[32];
	uint64_t n = 0;

	if (http_query_get(r, "waitForStatus", wait, sizeof(wait)) > 0)
		n = http_query_get(r, "waitMs", ms, sizeof(ms)) > 0 ? strtoull(ms, NULL, 10)
		                                                    : 60000;
	wait_status(ctx, r, p[0], wait, n);
}

ROUTE(r_destroy)
{
	struct routes *rt = ctx;
	struct sbx_err err;

	if (sbx_destroy(rt->m, p[0], &err))
		reply_error(r, &err, S_SANDBOX);
	else
		api_ok(r, 200, NULL);
}

int list_query(struct http_req *r, struct list_query_bufs *b, struct sbx_list_query *q)
{
	*q = (struct sbx_list_query){.org = caller_org(r)};
	if (http_query_get(r, "name", b->name, sizeof(b->name)) > 0)
		q->name = b->name;
	if (http_query_get(r, "status", b->status, sizeof(b->status)) > 0)
		q->status = b->status;
	if (http_query_get(r, "mode", b->mode, sizeof(b->mode)) > 0) {
		if (strcmp(b->mode, "oneshot") && strcmp(b->mode, "interactive")) {
			api_error(r, 400, "BAD_REQUEST", "mode must be oneshot or interactive");
			return -1;
		}
		q->mode = b->mode;
	}
	if (http_query_get(r, "projectId", b->project, sizeof(b->project)) > 0)
		q->project_id = b->project;
	if (http_query_get(r, "snapshotId", b->snapshot, sizeof(b->snapshot)) > 0)
		q->snapshot_id = b->snapshot;
	if (http_query_get(r, "live", b->live, sizeof(b->live)) > 0)
		q->live = !strcmp(b->live, "true") ? 1 : -1;
	if (http_query_get(r, "sort", b->sort, sizeof(b->sort)) > 0)
		q->sort = b->sort;
	q->ascending = http_query_get(r, "direction", b->dir, sizeof(b->dir)) > 0 &&
	               !strcmp(b->dir, "asc");
	if (include_deleted(r))
		q->deleted = 1;
	if (http_query_get(r, "deletedOnly", b->del, sizeof(b->del)) > 0 && !strcmp(b->del, "true"))
		q->deleted = 2;
	query_page(r, 50, 100, &q->limit, &q->offset);
	return 0;
}

ROUTE(r_list)
{
	struct routes *rt = ctx;
	struct list_query_bufs b;
	struct sbx_list_query q;
	struct sbx_err err;
	json_t *out = NULL, *v;
	size_t i;

	(void)p;
	if (list_query(r, &b, &q))
		return;
	if (sbx_list(rt->m, &q, &out, &err)) {
		reply_error(r, &err, S_SANDBOX);
		return;
	}
	json_array_foreach(json_object_get(out, "sandboxes"), i, v)(void) proxy_url(rt, r, v);
	api_ok(r, 200, out);
}

/* PUT /sandbox/{id}/network: husk's own; replaces the allow and deny lists. */
ROUTE(r_net_set)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *out = NULL;
	struct sbx_err err;

	if (!body)
		return;
	if (sbx_net_set(rt->m, p[0], body, &out, &err))
		reply_error(r, &err, S_SANDBOX);
	else
		api_ok(r, 200, out);
	json_decref(body);
}

/* pause: {"success":true, "sandboxId", "status", "terminatesAt"?} at the top level. */
static void paused(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_SANDBOX);
	else
		api_ok_fields(ctx, 200, json_incref(reply->data));
}

ROUTE(r_pause)
{
	struct routes *rt = ctx;

	sbx_pause(rt->m, p[0], paused, r);
}

ROUTE(r_resume)
{
	struct routes *rt = ctx;

	sbx_resume(rt->m, p[0], done_sandbox, r);
}

ROUTE(r_events)
{
	struct routes *rt = ctx;
	char dir[8] = "";
	json_t *out = NULL;

	int limit = query_int(r, "limit", 50);

	/* As the reference: 50 unless asked, at most 100. */
	if (limit <= 0 || limit > 100)
		limit = limit <= 0 ? 50 : 100;
	http_query_get(r, "direction", dir, sizeof(dir));
	if (sbx_events(rt->m, p[0], limit, !strcmp(dir, "desc"), &out))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
	else
		api_ok(r, 200, out);
}

ROUTE(r_runtimes)
{
	struct routes *rt = ctx;
	struct sbx_err err = {.fault = SBX_INTERNAL, .msg = "cannot list runtimes"};
	char sort[32] = "", dir[8] = "";
	bool by = http_query_get(r, "sort", sort, sizeof(sort)) > 0;
	bool dir_given = http_query_get(r, "direction", dir, sizeof(dir)) > 0;
	json_t *out = NULL;
	int limit, offset, rc;

	(void)p;
	if (dir_given && strcmp(dir, "asc") && strcmp(dir, "desc")) {
		api_error(r, 400, "BAD_REQUEST", "direction must be asc or desc");
		return;
	}
	query_page(r, 50, 100, &limit, &offset);
	/* The catalog reads best by name, a to z; a sort asked for is newest or last first. */
	rc = sbx_runtimes(rt->m, by ? sort : NULL, dir_given ? !strcmp(dir, "desc") : by, limit,
	                  offset, &out);
	if (rc == -EINVAL)
		api_error(r, 400, "BAD_REQUEST", "sort must be name or created");
	else if (rc)
		reply_error(r, &err, S_SANDBOX);
	else
		api_ok(r, 200, out);
}
