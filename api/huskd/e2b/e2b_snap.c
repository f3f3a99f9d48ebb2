// SPDX-License-Identifier: MIT
/*
 * E2B's snapshots, forks and network rules (API.md §11.1) over husk's own:
 * a snapshot is a husk snapshot with memory (its id is what Sandbox.create
 * takes back as a template), deleted as E2B deletes one (DELETE
 * /templates/{id}); a fork is such a snapshot taken once and `count`
 * sandboxes started from it, each answered on its own; allowOut/denyOut
 * become the sandbox's allow and deny lists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b_int.h"
#include "e2b_routes.h"

/* Children one fork makes at most. */
#define FORK_MAX 16

/* husk's snapshot names: 1..64 of [A-Za-z0-9_-]. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "0123456789_-") == n;
}

/* A snapshot body for husk: memory kept, named (or prefix-TIME-RANDOM). */
static json_t *snap_body(const char *name, const char *prefix)
{
	char auto_name[64], when[32];
	time_t now = time(NULL);
	struct tm tm;

	if (!name) {
		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%Y%m%d-%H%M%S", &tm);
		snprintf(auto_name, sizeof(auto_name), "%s-%s-%04x", prefix, when,
		         (unsigned)(rand() & 0xffff));
	}
	return json_pack("{sssssb}", "name", name ? name : auto_name, "tag", "latest", "memory", 1);
}

static void snap_made(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct http_req *r = ctx;
	const char *name = json_string_value(json_object_get(reply ? reply->data : NULL, "name"));

	if (err)
		e2b_reply_error(r, err);
	else
		http_respond_json(r, 201,
		                  json_pack("{sOs[s]}", "snapshotID",
		                            json_object_get(reply->data, "snapshotId"), "names",
		                            name ? name : ""));
}

ROUTE(e2b_snap_create)
{
	struct routes *rt = ctx;
	json_t *body, *hb;
	const char *name;

	if (!e2b_live(rt, r, p[0], NULL) || !(body = e2b_body(r)))
		return;
	name = json_string_value(json_object_get(body, "name"));
	if (name && !name_ok(name)) {
		e2b_error(r, 400, "name must be 1 to 64 letters, digits, '_' or '-'");
	} else if (!(hb = snap_body(name, "e2b"))) {
		e2b_error(r, 503, "out of memory");
	} else {
		sbx_snap_create(rt->m, p[0], hb, snap_made, r);
		json_decref(hb);
	}
	json_decref(body);
}

ROUTE(e2b_snap_list)
{
	struct routes *rt = ctx;
	char sandbox[64] = "", name[80] = "";
	struct sbx_snap_query q = {.org = caller_org(r), .limit = 10000, .sort = "created"};
	json_t *all, *out, *v;
	struct sbx_err err;
	struct e2b_page pg;
	size_t i;
	int take;

	(void)p;
	if (http_query_get(r, "sandboxID", sandbox, sizeof(sandbox)) == -2 ||
	    http_query_get(r, "name", name, sizeof(name)) == -2) {
		e2b_error(r, 400, "sandboxID or name is too long");
		return;
	}
	if (e2b_page_of(r, &pg))
		return;
	q.sandbox_id = sandbox[0] ? sandbox : NULL;
	if (sbx_snap_list(rt->m, &q, &all, &err)) {
		e2b_reply_error(r, &err);
		return;
	}
	out = json_array();
	json_array_foreach(json_object_get(all, "snapshots"), i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name")) ?: "";

		if (name[0] && strcmp(n, name))
			continue;
		if ((take = e2b_page_next(r, &pg, json_array_size(out))) < 0)
			break;
		if (take)
			json_array_append_new(out, json_pack("{sOs[s]}", "snapshotID",
			                                     json_object_get(v, "snapshotId"),
			                                     "names", n));
	}
	json_decref(all);
	http_respond_json(r, 200, out);
}

ROUTE(e2b_snap_delete)
{
	struct routes *rt = ctx;
	struct sbx_err err;
	json_t *out = NULL;

	if (sbx_snap_delete(rt->m, caller_org(r), p[0], &out, &err))
		e2b_reply_error(r, &err);
	else
		http_respond(r, 204, NULL, NULL, 0);
	json_decref(out);
}

/* ---- fork ---- */

struct fork {
	struct routes *rt;
	struct http_req *r;
	json_t *results; /* one per child, in order */
	json_t *net;     /* the parent's network: its memory restores only with its NIC */
	unsigned count, pending;
	long long secs;
	char org[80], org_name[80];
};

struct child {
	struct fork *f;
	unsigned i;
	char id[STORE_ID_LEN];
};

/* One child (or the loop starting them) is done: the answer once none is left. */
static void fork_release(struct fork *f)
{
	if (--f->pending)
		return;
	http_respond_json(f->r, 200, json_incref(f->results));
	json_decref(f->results);
	json_decref(f->net);
	free(f);
}

/* Child i's result. */
static void fork_slot(struct fork *f, unsigned i, const struct sbx_err *err, json_t *info)
{
	json_t *v = err ? json_pack("{s{siss}}", "error", "code", e2b_status_of(err), "message",
	                            err->msg)
	                : json_pack("{so}", "sandbox", e2b_sandbox(f->rt, info, true));

	json_array_set_new(f->results, i, v ? v : json_null());
	fork_release(f);
}

static void fork_result(struct child *c, const struct sbx_err *err, json_t *info)
{
	struct fork *f = c->f;
	unsigned i = c->i;

	free(c);
	fork_slot(f, i, err, info);
}

static void child_ready(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct child *c = ctx;
	struct sbx_err e;
	json_t *info = NULL;

	(void)reply;
	if (!err && (sbx_set_deadline(c->f->rt->m, c->id, (uint64_t)c->f->secs * 1000, -1, &e) ||
	             sbx_get(c->f->rt->m, c->id, &info, &e)))
		err = &e;
	fork_result(c, err, info);
	json_decref(info);
}

static void child_created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct child *c = ctx;

	if (err) {
		fork_result(c, err, NULL);
		return;
	}
	snprintf(c->id, sizeof(c->id), "%s",
	         json_string_value(json_object_get(reply->data, "sandboxId")) ?: "");
	sbx_wait_ready(c->f->rt->m, c->id, child_ready, c);
}

/* The snapshot is taken: every child starts from it. */
static void fork_snapped(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct fork *f = ctx;
	struct child *c;
	json_t *body;

	if (err) {
		e2b_reply_error(f->r, err);
		json_decref(f->results);
		json_decref(f->net);
		free(f);
		return;
	}
	f->pending = f->count + 1; /* held by this loop: a child may answer inside it */
	for (unsigned i = 0; i < f->count; i++) {
		body = json_pack("{sOs{ssss}}", "snapshot",
		                 json_object_get(reply->data, "snapshotId"), "org", "id", f->org,
		                 "name", f->org_name);
		c = calloc(1, sizeof(*c));
		if (body && f->net)
			json_object_set(body, "network", f->net);
		if (!body || !c) {
			struct sbx_err e = {.fault = SBX_UNAVAILABLE, .msg = "out of memory"};

			free(c);
			json_decref(body);
			fork_slot(f, i, &e, NULL);
			continue;
		}
		*c = (struct child){.f = f, .i = i};
		sbx_create(f->rt->m, body, child_created, c);
		json_decref(body);
	}
	fork_release(f);
}

ROUTE(e2b_fork)
{
	struct routes *rt = ctx;
	json_t *body, *hb, *count, *org;
	json_t *net = NULL;
	struct fork *f;
	struct sbx_err err;
	long long secs;

	if (!e2b_live(rt, r, p[0], NULL))
		return;
	if (sbx_net_config(rt->m, p[0], &net, &err)) {
		e2b_reply_error(r, &err);
		return;
	}
	if (!(body = e2b_body(r))) {
		json_decref(net);
		return;
	}
	count = json_object_get(body, "count");
	if (e2b_timeout_of(r, body, 300, &secs)) {
		json_decref(body);
		json_decref(net);
		return;
	}
	if (count && !json_is_null(count) &&
	    (!json_is_integer(count) || json_integer_value(count) < 1 ||
	     json_integer_value(count) > FORK_MAX)) {
		json_decref(body);
		json_decref(net);
		e2b_error(r, 400, "count must be 1..%d", FORK_MAX);
		return;
	}
	f = calloc(1, sizeof(*f));
	hb = snap_body(NULL, "fork");
	org = json_object();
	if (!f || !hb || !org || body_set_org(r, org)) {
		free(f);
		json_decref(net);
		json_decref(hb);
		json_decref(org);
		json_decref(body);
		e2b_error(r, 503, "out of memory");
		return;
	}
	*f = (struct fork){.rt = rt,
	                   .r = r,
	                   .count =
	                           json_is_integer(count) ? (unsigned)json_integer_value(count) : 1,
	                   .secs = secs,
	                   .net = net,
	                   .results = json_array()};
	snprintf(f->org, sizeof(f->org), "%s",
	         json_string_value(json_object_get(json_object_get(org, "org"), "id")) ?: "");
	snprintf(f->org_name, sizeof(f->org_name), "%s",
	         json_string_value(json_object_get(json_object_get(org, "org"), "name")) ?: "");
	for (unsigned i = 0; i < f->count; i++)
		json_array_append_new(f->results, json_null());
	sbx_snap_create(rt->m, p[0], hb, fork_snapped, f);
	json_decref(hb);
	json_decref(org);
	json_decref(body);
}

/* ---- network ---- */

ROUTE(e2b_network)
{
	struct routes *rt = ctx;
	json_t *body, *lists, *out = NULL;
	struct sbx_err err;

	if (!e2b_live(rt, r, p[0], NULL) || !(body = e2b_body(r)))
		return;
	lists = e2b_net_lists(body);
	if (!lists)
		e2b_error(r, 503, "out of memory");
	else if (sbx_net_set(rt->m, p[0], lists, &out, &err))
		e2b_reply_error(r, &err);
	else
		http_respond(r, 204, NULL, NULL, 0);
	json_decref(out);
	json_decref(lists);
	json_decref(body);
}
