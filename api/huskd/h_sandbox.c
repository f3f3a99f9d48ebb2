// SPDX-License-Identifier: MIT
/* HTTP handlers of the sandbox lifecycle and executions (API.md §5.1, §5.2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "json_resp.h"

/* The request body as a JSON object, or an answered 400 and NULL. */
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

static void answer_error(struct http_req *r, int status, const char *err)
{
	api_error(r, status,
	          status == 404   ? "SANDBOX_NOT_FOUND"
	          : status == 409 ? "SANDBOX_BUSY"
	          : status == 501 ? "NOT_IMPLEMENTED"
	          : status == 400 ? "BAD_REQUEST"
	                          : "INTERNAL",
	          "%s", err);
}

void h_create(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	json_t *body = body_object(r), *info = NULL, *cmd, *exec = NULL;
	struct sandbox *sb = NULL;
	char err[512], base[512];
	int status;

	(void)p;
	if (!body)
		return;
	status = sbx_create(d, body, &info, &sb, err, sizeof(err));
	if (status) {
		answer_error(r, status, err);
		json_decref(body);
		return;
	}
	cmd = json_object_get(body, "command");
	if (cmd && base_url(d, r, base, sizeof(base)) == 0 &&
	    exec_start(d, sb, json_object_get(cmd, "exec"), NULL, 0,
	               json_object_get(body, "stream"), base, &exec, err, sizeof(err)) == 0) {
		for (const char *const *k = (const char *const[]){"executionId", "stdoutStreamUrl",
		                                                  "stderrStreamUrl", NULL};
		     *k; k++)
			if (json_object_get(exec, *k))
				json_object_set(info, *k, json_object_get(exec, *k));
		json_decref(exec);
	} else if (cmd) {
		huskd_log(sbx_id(sb), "its command could not start: %s", err);
	}
	json_decref(body);
	api_ok(r, 201,
	       json_pack("{sOsOsO*sO*sO*}", "sandboxId", json_object_get(info, "sandboxId"),
	                 "status", json_object_get(info, "status"), "executionId",
	                 json_object_get(info, "executionId"), "stdoutStreamUrl",
	                 json_object_get(info, "stdoutStreamUrl"), "stderrStreamUrl",
	                 json_object_get(info, "stderrStreamUrl")));
	json_decref(info);
}

void h_get(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	json_t *info = NULL;
	char wait[256], ms[32];

	if (http_query_get(r, "waitForStatus", wait, sizeof(wait)) > 0) {
		uint64_t n = http_query_get(r, "waitMs", ms, sizeof(ms)) > 0
		                     ? strtoull(ms, NULL, 10)
		                     : 60000;
		wait_status(d, r, p[0], wait, n);
		return;
	}
	if (store_sandbox_get(d->store, p[0], &info, NULL)) {
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
		return;
	}
	api_ok(r, 200, info);
}

void h_status(struct http_req *r, const char *const *p, void *ctx)
{
	char wait[256] = "", ms[32];
	uint64_t n = 0;

	if (http_query_get(r, "waitForStatus", wait, sizeof(wait)) > 0)
		n = http_query_get(r, "waitMs", ms, sizeof(ms)) > 0 ? strtoull(ms, NULL, 10)
		                                                    : 60000;
	wait_status(ctx, r, p[0], wait, n);
}

void h_destroy(struct http_req *r, const char *const *p, void *ctx)
{
	char err[256];
	int status = sbx_destroy(ctx, p[0], err, sizeof(err));

	if (status)
		answer_error(r, status, err);
	else
		api_ok(r, 200, NULL);
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

void h_list(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	char name[256] = "", status[32] = "", live[8] = "", sort[32] = "", dir[8] = "", del[8] = "";
	struct store_sandbox_filter f = {0};
	json_t *out = NULL;

	(void)p;
	if (http_query_get(r, "name", name, sizeof(name)) > 0)
		f.name = name;
	if (http_query_get(r, "status", status, sizeof(status)) > 0)
		f.status = status;
	if (http_query_get(r, "live", live, sizeof(live)) > 0)
		f.live = !strcmp(live, "true") ? STORE_ONLY : STORE_EXCLUDE;
	if (http_query_get(r, "sort", sort, sizeof(sort)) > 0)
		f.sort = sort;
	f.ascending = http_query_get(r, "direction", dir, sizeof(dir)) > 0 && !strcmp(dir, "asc");
	if (http_query_get(r, "deletedOnly", del, sizeof(del)) > 0 && !strcmp(del, "true"))
		f.deleted = STORE_DELETED_ONLY;
	query_page(r, 50, 100, &f.limit, &f.offset);
	if (store_sandbox_list(d->store, &f, &out)) {
		api_error(r, 400, "BAD_REQUEST", "bad list query (sort or status)");
		return;
	}
	api_ok(r, 200, out);
}

void h_execute(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	struct sandbox *sb = sbx_find(d, p[0]);
	json_t *body, *exec = NULL;
	const char *t;
	char err[512], base[512];
	uint64_t ms = 0;
	bool resumed;
	int status;

	if (!sb) {
		json_t *info = NULL;
		if (store_sandbox_get(d->store, p[0], &info, NULL))
			api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
		else
			api_error(r, 409, "SANDBOX_TERMINATED", "sandbox %s is %s", p[0],
			          json_string_value(json_object_get(info, "status")));
		json_decref(info);
		return;
	}
	body = body_object(r);
	if (!body)
		return;
	t = json_string_value(json_object_get(body, "timeout"));
	if (t && parse_duration_ms(t, &ms)) {
		api_error(r, 400, "BAD_REQUEST", "timeout '%s' is not a duration such as 30s or 5m",
		          t);
		json_decref(body);
		return;
	}
	if (base_url(d, r, base, sizeof(base))) {
		api_error(r, 400, "BAD_REQUEST", "the Host header is too long");
		json_decref(body);
		return;
	}
	resumed = sbx_paused(sb);
	status = exec_start(d, sb, json_object_get(body, "command"), json_object_get(body, "files"),
	                    ms, json_object_get(body, "stream"), base, &exec, err, sizeof(err));
	json_decref(body);
	if (status)
		answer_error(r, status, err);
	else if (resumed)
		api_ok_fields(r, 200, json_pack("{so sb}", "data", exec, "autoResumed", 1));
	else
		api_ok(r, 200, exec);
}

void h_pause(struct http_req *r, const char *const *p, void *ctx)
{
	sbx_pause(ctx, r, p[0]);
}

void h_resume(struct http_req *r, const char *const *p, void *ctx)
{
	sbx_resume(ctx, r, p[0]);
}

void h_execution(struct http_req *r, const char *const *p, void *ctx)
{
	char wait[64];
	uint64_t ms = 0;

	if (http_query_get(r, "wait", wait, sizeof(wait)) > 0 && parse_duration_ms(wait, &ms)) {
		api_error(r, 400, "BAD_REQUEST", "wait '%s' is not a duration such as 30s or 5m",
		          wait);
		return;
	}
	wait_execution(ctx, r, p[0], ms);
}

void h_executions(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	json_t *out = NULL;

	if (store_execution_list(d->store, p[0], query_int(r, "limit", 50), &out))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
	else
		api_ok(r, 200, out);
}

void h_events(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	char dir[8] = "";
	json_t *out = NULL;

	http_query_get(r, "direction", dir, sizeof(dir));
	if (store_event_list(d->store, p[0], query_int(r, "limit", 100), !strcmp(dir, "desc"),
	                     &out))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
	else
		api_ok(r, 200, out);
}

void h_runtimes(struct http_req *r, const char *const *p, void *ctx)
{
	struct huskd *d = ctx;
	json_t *out = NULL;

	(void)p;
	if (store_runtime_list(d->store, NULL, false, query_int(r, "limit", 100),
	                       query_int(r, "offset", 0), &out))
		api_error(r, 500, "INTERNAL", "cannot list runtimes");
	else
		api_ok(r, 200, out);
}

void h_stream(struct http_req *r, const char *const *p, void *ctx)
{
	exec_serve_stream(ctx, r, p[0]);
}

void h_not_yet(struct http_req *r, const char *const *p, void *ctx)
{
	(void)p;
	(void)ctx;
	api_error(r, 501, "NOT_IMPLEMENTED",
	          "%s %s is not implemented yet in huskd (pause/resume, snapshots and checkpoints "
	          "come with the snapshot work)",
	          http_method(r), http_path(r));
}
