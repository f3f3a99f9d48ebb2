// SPDX-License-Identifier: MIT
/*
 * Imported runtimes (husk's own routes, API.md §6): begin an import, upload
 * the archive in parts, convert it (progress streamed as NDJSON, one JSON
 * object a line, the last {"done": true, "runtime": ...} or {"error": ...}),
 * look at an import, delete an imported runtime.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

ROUTE(r_import_init)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *out = NULL;
	struct sbx_err err;

	(void)p;
	if (!body)
		return;
	if (sbx_import_init(rt->m, body, &out, &err))
		reply_error(r, &err, S_RUNTIME);
	else
		api_ok(r, 201, out);
	json_decref(body);
}

static void uploaded(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	reply_done(ctx, err, reply, S_RUNTIME);
}

ROUTE(r_import_upload)
{
	struct routes *rt = ctx;
	char off[32] = "", *end;
	unsigned long long offset;
	size_t len = 0;
	const void *body = http_body(r, &len);

	if (http_query_get(r, "offset", off, sizeof(off)) <= 0) {
		api_error(r, 400, "BAD_REQUEST", "give the part's place in the archive: ?offset=N");
		return;
	}
	errno = 0;
	offset = strtoull(off, &end, 10);
	if (errno || *end || off[0] == '-') {
		api_error(r, 400, "BAD_REQUEST", "offset must be a byte count, not '%s'", off);
		return;
	}
	sbx_import_upload(rt->m, p[0], offset, body, len, uploaded, r);
}

struct run {
	struct routes *rt;
	struct http_req *r;
	char id[64];
	bool streaming;
	bool starting; /* inside sbx_import_run: run_done leaves the freeing to it */
	bool ended;
};

static void run_line(struct run *run, json_t *obj)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

	if (!text)
		return;
	if (!run->streaming) {
		http_stream_begin(run->r, 200, "application/x-ndjson");
		run->streaming = true;
	}
	/* -EPIPE: the client went; run_gone has detached us. */
	if (http_stream_write(run->r, text, strlen(text)) == 0 &&
	    http_stream_write(run->r, "\n", 1) < 0)
		log_debug(NULL, "import %s: its client went away", run->id);
	free(text);
}

static void run_progress(void *ctx, json_t *event)
{
	run_line(ctx, event);
}

static void run_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct run *run = ctx;

	if (!run->streaming && err) {
		/* Refused before any step: an answer with a status of its own. */
		reply_error(run->r, err, S_RUNTIME);
	} else {
		json_t *last = err ? json_pack("{s:b, s:{s:s, s:s}}", "done", 0, "error", "code",
		                               err->fault == SBX_STEP_FAILED ? "IMPORT_FAILED"
		                                                             : "INTERNAL",
		                               "message", err->msg)
		                   : json_pack("{s:b, s:O}", "done", 1, "runtime", reply->data);

		run_line(run, last);
		json_decref(last);
		http_stream_end(run->r);
	}
	run->ended = true;
	if (!run->starting)
		free(run);
}

static void run_gone(struct http_req *r, void *arg)
{
	struct run *run = arg;

	(void)r;
	sbx_import_detach(run->rt->m, run->id);
	if (run->streaming)
		http_stream_end(run->r);
	else
		http_respond(run->r, 499, "text/plain", "", 0);
	free(run);
}

ROUTE(r_import_run)
{
	struct routes *rt = ctx;
	struct run *run = calloc(1, sizeof(*run));

	if (!run) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	run->rt = rt;
	run->r = r;
	snprintf(run->id, sizeof(run->id), "%s", p[0]);
	run->starting = true;
	sbx_import_run(rt->m, p[0], run_progress, run_done, run);
	run->starting = false;
	if (run->ended)
		free(run);
	else
		http_on_close(r, run_gone, run);
}

ROUTE(r_import_get)
{
	struct routes *rt = ctx;
	struct sbx_err err;
	json_t *out = NULL;

	if (sbx_import_get(rt->m, p[0], &out, &err))
		reply_error(r, &err, S_RUNTIME);
	else
		api_ok(r, 200, out);
}

ROUTE(r_runtime_delete)
{
	struct routes *rt = ctx;
	char ref[256];
	struct sbx_err err;

	if (http_pct_decode(p[0], strlen(p[0]), ref, sizeof(ref), 0) < 0) {
		api_error(r, 400, "BAD_REQUEST", "runtime name too long");
		return;
	}
	if (sbx_runtime_delete(rt->m, ref, &err))
		reply_error(r, &err, S_RUNTIME);
	else
		api_ok(r, 200, NULL);
}
