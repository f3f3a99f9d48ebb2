// SPDX-License-Identifier: MIT
/*
 * E2B's REST API under /e2b (API.md §11.1), as e2b@2.51.0's SDK calls it
 * (E2B_API_URL=<huskd>/e2b, the key in X-API-Key): sandboxes created,
 * read, listed, killed, paused, connected to (a paused one resumes) and
 * given a new timeout. An E2B sandbox is a husk sandbox: the same id,
 * keys, orgs and records as the reference's API; its template is a husk
 * runtime ("base" is base:latest) or snapshot, and its timeout is the
 * manager's lifetime deadline (autoPause: paused, not killed, then).
 * Errors are E2B's {code, message}.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"

/* A create's, a connect's or a resume's answer, once the sandbox is ready. */
struct ready {
	struct routes *rt;
	struct http_req *r;
	int status;
	long long secs; /* its deadline from now, 0: unchanged */
	int pause;      /* at it: 1 paused, 0 killed, -1 as it was */
};

static void answer_ready(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct ready *w = ctx;
	json_t *info = NULL;
	const char *id;
	struct sbx_err e;

	if (err) {
		e2b_reply_error(w->r, err);
		free(w);
		return;
	}
	id = json_string_value(json_object_get(reply->data, "sandboxId"));
	if ((w->secs && sbx_set_deadline(w->rt->m, id, (uint64_t)w->secs * 1000, w->pause, &e)) ||
	    sbx_get(w->rt->m, id, &info, &e))
		e2b_reply_error(w->r, &e);
	else
		http_respond_json(w->r, w->status, e2b_sandbox(w->rt, info, true) ?: json_object());
	json_decref(info);
	free(w);
}

static void created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct ready *w = ctx;
	const char *id;

	if (err) {
		e2b_reply_error(w->r, err);
		free(w);
		return;
	}
	id = json_string_value(json_object_get(reply->data, "sandboxId"));
	call_about(w->r, id);
	sbx_wait_ready(w->rt->m, id, answer_ready, w);
}

/*
 * templateID: a runtime's name or id ("base" for base:latest, E2B's
 * default) or a snapshot of the caller's org (or a public one): 0, or
 * -ENOENT when it is neither, -ENOMEM.
 */
static int set_template(struct routes *rt, struct http_req *r, json_t *hb, const char *tmpl)
{
	json_t *list = NULL, *v, *snap = NULL;
	struct sbx_err err;
	bool runtime = false;
	size_t i;

	if (!tmpl || !strcmp(tmpl, "base"))
		return json_object_set_new(hb, "runtime", json_string("base:latest")) ? -ENOMEM : 0;
	if (sbx_runtimes(rt->m, NULL, false, 0, 0, &list) == 0)
		json_array_foreach(
			json_object_get(list, "runtimes"), i,
			v) if (!strcmp(json_string_value(json_object_get(v, "name")) ?: "", tmpl) ||
		               !strcmp(json_string_value(json_object_get(v, "id")) ?: "", tmpl))
			runtime = true;
	json_decref(list);
	if (!runtime && sbx_snap_get(rt->m, caller_org(r), tmpl, false, &snap, &err))
		return -ENOENT;
	json_decref(snap);
	return json_object_set_new(hb, runtime ? "runtime" : "snapshot", json_string(tmpl))
	               ? -ENOMEM
	               : 0;
}

ROUTE(e2b_create)
{
	struct routes *rt = ctx;
	json_t *body = e2b_body(r), *hb, *v;
	struct ready *w;
	long long secs;
	const char *k;
	int rc;

	(void)p;
	if (!body || e2b_timeout_of(r, body, 300, &secs)) {
		json_decref(body);
		return;
	}
	v = json_object_get(body, "templateID");
	if (v && !json_is_string(v)) {
		json_decref(body);
		e2b_error(r, 400, "templateID must be a string: a husk runtime or snapshot");
		return;
	}
	hb = json_object();
	rc = hb ? set_template(rt, r, hb, json_string_value(v)) : -ENOMEM;
	if (rc) {
		if (rc == -ENOENT)
			e2b_error(r, 404,
			          "template '%s' is neither a husk runtime (GET /sandbox/runtimes) "
			          "nor a "
			          "snapshot of this org (GET /sandbox/snapshots)",
			          json_string_value(v));
		else
			e2b_error(r, 503, "out of memory");
		json_decref(hb);
		json_decref(body);
		return;
	}
	json_object_foreach(body, k, v)
	{
		if (!strcmp(k, "envVars") && !json_is_null(v))
			json_object_set(hb, "env", v);
		else if (!strcmp(k, "metadata") && !json_is_null(v))
			json_object_set(hb, k, v);
	}
	/* husk's network is off by default (E2B's is on): asked for, it is the public internet. */
	if (json_is_true(json_object_get(body, "allow_internet_access")) ||
	    json_object_get(json_object_get(body, "network"), "allowOut") ||
	    json_object_get(json_object_get(body, "network"), "denyOut")) {
		json_t *lists = e2b_net_lists(json_object_get(body, "network"));

		if (lists)
			json_object_set_new(lists, "enabled", json_true());
		if (lists && !json_array_size(json_object_get(lists, "allow")))
			json_object_del(lists, "allow");
		if (lists && !json_array_size(json_object_get(lists, "deny")))
			json_object_del(lists, "deny");
		json_object_set_new(hb, "network", lists ? lists : json_pack("{sb}", "enabled", 1));
	}
	/*
	 * As on E2B, every port is served (sandbox.getHost(port), with huskd
	 * --public-domain), behind the traffic token when public traffic is off.
	 */
	if (sbx_can_network(rt->m)) {
		json_t *net = json_object_get(hb, "network");

		if (!net)
			json_object_set_new(hb, "network", net = json_object());
		json_object_set_new(net, "allPorts", json_true());
		if (json_is_false(json_object_get(json_object_get(body, "network"),
		                                  "allowPublicTraffic")))
			json_object_set_new(net, "urlToken", json_true());
	}
	w = calloc(1, sizeof(*w));
	if (!w || body_set_org(r, hb)) {
		free(w);
		json_decref(hb);
		json_decref(body);
		if (!w)
			e2b_error(r, 503, "out of memory");
		return;
	}
	*w = (struct ready){.rt = rt,
	                    .r = r,
	                    .status = 201,
	                    .secs = secs,
	                    .pause = json_is_true(json_object_get(body, "autoPause"))};
	json_decref(body);
	sbx_create(rt->m, hb, created, w);
	json_decref(hb);
}

ROUTE(e2b_get)
{
	struct routes *rt = ctx;
	json_t *info;

	if (!e2b_live(rt, r, p[0], &info))
		return;
	http_respond_json(r, 200, e2b_sandbox(rt, info, true) ?: json_object());
	json_decref(info);
}

ROUTE(e2b_kill)
{
	struct routes *rt = ctx;
	struct sbx_err err;

	if (!e2b_live(rt, r, p[0], NULL))
		return;
	if (sbx_destroy(rt->m, p[0], &err))
		e2b_reply_error(r, &err);
	else
		http_respond(r, 204, NULL, NULL, 0);
}

ROUTE(e2b_timeout)
{
	struct routes *rt = ctx;
	json_t *body;
	struct sbx_err err;
	long long secs;

	if (!e2b_live(rt, r, p[0], NULL) || !(body = e2b_body(r)))
		return;
	if (!json_object_get(body, "timeout"))
		e2b_error(r, 400, "timeout (seconds) is required");
	else if (e2b_timeout_of(r, body, 0, &secs) == 0) {
		if (sbx_set_deadline(rt->m, p[0], (uint64_t)secs * 1000, -1, &err))
			e2b_reply_error(r, &err);
		else
			http_respond(r, 204, NULL, NULL, 0);
	}
	json_decref(body);
}

static void paused(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct http_req *r = ctx;

	(void)reply;
	if (err)
		e2b_reply_error(r, err);
	else
		http_respond(r, 204, NULL, NULL, 0);
}

ROUTE(e2b_pause)
{
	struct routes *rt = ctx;
	const char *st = e2b_live(rt, r, p[0], NULL);

	if (st && !strcmp(st, "paused"))
		e2b_error(r, 409, "sandbox %s is already paused", p[0]);
	else if (st)
		sbx_pause(rt->m, p[0], paused, r);
}

/* POST /v2/sandboxes/{id}/connect: a running one 200, a paused one resumed 201. */
ROUTE(e2b_connect)
{
	struct routes *rt = ctx;
	const char *st = e2b_live(rt, r, p[0], NULL);
	struct ready *w;
	long long secs;
	json_t *body;
	int rc;

	if (!st || !(body = e2b_body(r)))
		return;
	rc = e2b_timeout_of(r, body, 0, &secs);
	json_decref(body);
	if (rc)
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		e2b_error(r, 503, "out of memory");
		return;
	}
	/* A paused one without a timeout gets E2B's default: its deadline was dropped. */
	*w = (struct ready){.rt = rt,
	                    .r = r,
	                    .status = strcmp(st, "paused") ? 200 : 201,
	                    .secs = secs                   ? secs
	                            : strcmp(st, "paused") ? 0
	                                                   : 300,
	                    .pause = -1};
	/* A paused one resumes on the way: the manager's readiness wait resumes it. */
	sbx_wait_ready(rt->m, p[0], answer_ready, w);
}
