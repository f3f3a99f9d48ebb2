// SPDX-License-Identifier: MIT
/* Executions (API.md §5.2) and their output streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

ROUTE(r_execute)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *exec = NULL;
	struct sbx_exec_req req = {0};
	struct sbx_err err;
	const char *t;
	char base[512];
	bool resumed;

	if (!body)
		return;
	t = json_string_value(json_object_get(body, "timeout"));
	if (t && parse_duration_ms(t, &req.timeout_ms)) {
		api_error(r, 400, "BAD_REQUEST", "timeout '%s' is not a duration such as 30s or 5m",
		          t);
		json_decref(body);
		return;
	}
	if (base_url(rt, r, base, sizeof(base))) {
		api_error(r, 400, "BAD_REQUEST", "the Host header is too long");
		json_decref(body);
		return;
	}
	req.argv = json_object_get(body, "command");
	req.files = json_object_get(body, "files");
	req.stream = json_object_get(body, "stream");
	req.base = base;
	if (sbx_exec_start(rt->m, p[0], &req, &exec, &resumed, &err)) {
		reply_error(r, &err, S_SANDBOX);
		json_decref(body);
		return;
	}
	stream_sign(rt, exec);
	if (resumed)
		api_ok_fields(r, 200, json_pack("{so sb}", "data", exec, "autoResumed", 1));
	else
		api_ok(r, 200, exec);
	json_decref(body);
}

ROUTE(r_execution)
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

static void cancelled(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	reply_done(ctx, err, reply, S_EXECUTION);
}

/* husk's own: cancels a queued or running execution; answers its record once it ended. */
ROUTE(r_execution_cancel)
{
	struct routes *rt = ctx;

	sbx_exec_cancel(rt->m, p[0], cancelled, r);
}

ROUTE(r_executions)
{
	struct routes *rt = ctx;
	json_t *out = NULL;

	if (sbx_executions(rt->m, p[0], query_int(r, "limit", 50), &out))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
	else {
		stream_sign(rt, out);
		api_ok(r, 200, out);
	}
}

/* A signed URL; or, for a user stream, a key of its org instead of a signature. */
ROUTE(r_stream)
{
	struct routes *rt = ctx;
	const char *org = sbx_streams_org(rt->m, p[0]);
	const struct who *who;
	char sig[8];

	if (org && http_query_get(r, "sig", sig, sizeof(sig)) < 0 && (who = routes_key(rt, r)) &&
	    !strcmp(who->org_id, org)) {
		stream_serve(rt, r, p[0]);
		return;
	}
	if (stream_check(rt, r, p[0]) == 0)
		stream_serve(rt, r, p[0]);
}
