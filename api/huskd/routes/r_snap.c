// SPDX-License-Identifier: MIT
/* Snapshots, builds and disk checkpoints (API.md §5.7, §5.8). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "r_int.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

/* Names and tags are looked up as name:tag: no ':' and nothing odd in them. */
static bool word_ok(json_t *v, const char *extra)
{
	const char *s = json_string_value(v);
	size_t len = s ? strlen(s) : 0;
	char allowed[96];

	snprintf(allowed, sizeof(allowed), "%s%s", NAME_CHARS, extra);
	return len > 0 && len <= 64 && strspn(s, allowed) == len;
}

/* 400 naming the field and what it takes, or 0. */
static int check_create(struct http_req *r, json_t *body)
{
	static const char *const strings[] = {"name", "tag", "description"};
	json_t *v;

	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
		v = json_object_get(body, strings[i]);
		if (v && !json_is_null(v) && !json_is_string(v)) {
			api_error(r, 400, "BAD_REQUEST", "%s must be a string", strings[i]);
			return 400;
		}
	}
	for (const char *const *k = (const char *const[]){"public", "memory", NULL}; *k; k++) {
		v = json_object_get(body, *k);
		if (v && !json_is_boolean(v)) {
			api_error(r, 400, "BAD_REQUEST", "%s must be true or false", *k);
			return 400;
		}
	}
	v = json_object_get(body, "name");
	if (json_is_string(v) && !word_ok(v, "")) {
		api_error(
			r, 400, "BAD_REQUEST",
			"name must be 1 to 64 letters, digits, '_' or '-', e.g. python-with-numpy");
		return 400;
	}
	v = json_object_get(body, "tag");
	if (json_is_string(v) && !word_ok(v, ".")) {
		api_error(r, 400, "BAD_REQUEST",
		          "tag must be 1 to 64 letters, digits, '.', '_' or '-', e.g. v1.2");
		return 400;
	}
	return 0;
}

static void snap_created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_SANDBOX);
	else
		api_ok(ctx, 201, json_incref(reply->data));
}

ROUTE(r_snap_create)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r);
	char name[64];
	time_t now = time(NULL);
	struct tm tm;

	if (!body || check_create(r, body)) {
		json_decref(body);
		return;
	}
	if (!json_is_string(json_object_get(body, "name"))) {
		gmtime_r(&now, &tm);
		strftime(name, sizeof(name), "snapshot-%Y%m%d-%H%M%S", &tm);
		json_object_set_new(body, "name", json_string(name));
	}
	if (!json_is_string(json_object_get(body, "tag")))
		json_object_set_new(body, "tag", json_string("latest"));
	if (json_is_null(json_object_get(body, "description")))
		json_object_del(body, "description");
	/* Only these reach the snapshot: a client cannot set the build's private fields. */
	for (const char *const *k = (const char *const[]){"keepPaused", "contentHash", "env",
	                                                  "files", "message", "userMetadata", NULL};
	     *k; k++)
		json_object_del(body, *k);
	sbx_snap_create(rt->m, p[0], body, snap_created, r);
	json_decref(body);
}

static void list(struct http_req *r, struct routes *rt, bool public_only)
{
	char sandbox[64] = "", sort[32] = "", dir[8] = "";
	struct sbx_snap_query q = {.public_only = public_only, .org = caller_org(r)};
	struct sbx_err err;
	json_t *out = NULL;

	if (!public_only && http_query_get(r, "sandboxId", sandbox, sizeof(sandbox)) > 0)
		q.sandbox_id = sandbox;
	if (http_query_get(r, "sort", sort, sizeof(sort)) > 0)
		q.sort = sort;
	q.ascending = http_query_get(r, "direction", dir, sizeof(dir)) > 0 && !strcmp(dir, "asc");
	query_page(r, 50, public_only ? 100 : 1000, &q.limit, &q.offset);
	if (sbx_snap_list(rt->m, &q, &out, &err))
		reply_error(r, &err, S_SNAPSHOT);
	else
		api_ok(r, 200, out);
}

ROUTE(r_snap_list)
{
	(void)p;
	list(r, ctx, false);
}

ROUTE(r_snap_public_list)
{
	(void)p;
	list(r, ctx, true);
}

static void get(struct http_req *r, struct routes *rt, const char *ref, bool public_only)
{
	struct sbx_err err;
	json_t *info = NULL;

	if (sbx_snap_get(rt->m, caller_org(r), ref, public_only, &info, &err))
		reply_error(r, &err, S_SNAPSHOT);
	else
		api_ok(r, 200, info);
}

ROUTE(r_snap_get)
{
	get(r, ctx, p[0], false);
}

ROUTE(r_snap_public_get)
{
	get(r, ctx, p[0], true);
}

ROUTE(r_snap_tag)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *tag, *info = NULL;
	struct sbx_err err;

	if (!body)
		return;
	tag = json_object_get(body, "tag");
	if (!tag || !(json_is_null(tag) || word_ok(tag, ".")))
		api_error(r, 400, "BAD_REQUEST",
		          "tag must be 1 to 64 letters, digits, '.', '_' or '-', or null to remove "
		          "it");
	else if (sbx_snap_tag(rt->m, caller_org(r), p[0], tag, &info, &err))
		reply_error(r, &err, S_SNAPSHOT);
	else
		api_ok(r, 200, info);
	json_decref(body);
}

ROUTE(r_snap_delete)
{
	struct routes *rt = ctx;
	struct sbx_err err;
	json_t *out = NULL;

	if (sbx_snap_delete(rt->m, caller_org(r), p[0], &out, &err))
		reply_error(r, &err, S_SNAPSHOT);
	else
		api_ok(r, 200, out);
}

ROUTE(r_snap_lineage)
{
	struct routes *rt = ctx;
	char ref[200] = "", name[80] = "", tag[80] = "";
	int limit = query_int(r, "limit", 100);
	struct sbx_err err;
	json_t *out = NULL;

	(void)p;
	if (http_query_get(r, "snapshot", ref, sizeof(ref)) <= 0 &&
	    http_query_get(r, "name", name, sizeof(name)) > 0) {
		if (http_query_get(r, "tag", tag, sizeof(tag)) > 0)
			snprintf(ref, sizeof(ref), "%s:%s", name, tag);
		else
			snprintf(ref, sizeof(ref), "%s", name);
	}
	if (!ref[0]) {
		api_error(r, 400, "BAD_REQUEST",
		          "give snapshot=ID (or name:tag), or name= (and tag=) to start from");
		return;
	}
	if (limit <= 0 || limit > 1000)
		limit = limit <= 0 ? 100 : 1000;
	if (sbx_snap_lineage(rt->m, caller_org(r), ref, limit, &out, &err))
		reply_error(r, &err, S_SNAPSHOT);
	else
		api_ok(r, 200, out);
}

ROUTE(r_build_init)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *out = NULL;
	struct sbx_err err;

	(void)p;
	if (!body || body_set_org(r, body)) {
		json_decref(body);
		return;
	}
	if (sbx_build_init(rt->m, body, &out, &err))
		reply_error(r, &err, S_BUILD);
	else
		api_ok(r, 200, out);
	json_decref(body);
}

ROUTE(r_build_upload)
{
	struct routes *rt = ctx;
	size_t len = 0;
	const void *body = http_body(r, &len);
	struct sbx_err err;

	if (sbx_build_upload(rt->m, p[0], body, len, &err))
		reply_error(r, &err, S_BUILD);
	else
		api_ok(r, 200, json_pack("{sbsb}", "success", 1, "scanned", 0));
}

static void built(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	reply_done(ctx, err, reply, S_BUILD);
}

ROUTE(r_build_finalize)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r);

	if (!body)
		return;
	sbx_build_finalize(rt->m, p[0], body, built, r);
	json_decref(body);
}

/* ---- checkpoints ---- */

/* Names end up in file listings and logs: keep them plain. */
static bool ckpt_name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;

	return len > 0 && len <= 64 && strspn(n, NAME_CHARS ".") == len;
}

static void ckpt_created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	if (err)
		reply_error(ctx, err, S_CHECKPOINT);
	else
		api_ok(ctx, 201, json_incref(reply->data));
}

ROUTE(r_ckpt_create)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r);
	const char *name;

	if (!body)
		return;
	name = json_string_value(json_object_get(body, "name"));
	if (!ckpt_name_ok(name))
		api_error(r, 400, "BAD_REQUEST",
		          "name must be 1 to 64 letters, digits, '.', '_' or '-', e.g. "
		          "before-upgrade");
	else
		sbx_ckpt_create(rt->m, p[0], name, ckpt_created, r);
	json_decref(body);
}

ROUTE(r_ckpt_list)
{
	struct routes *rt = ctx;
	struct sbx_err err;
	json_t *out = NULL;

	if (sbx_ckpt_list(rt->m, p[0], &out, &err))
		reply_error(r, &err, S_CHECKPOINT);
	else
		api_ok(r, 200, out);
}

static void ckpt_restored(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	(void)reply;
	if (err)
		reply_error(ctx, err, S_CHECKPOINT);
	else
		api_ok(ctx, 200, NULL);
}

ROUTE(r_ckpt_restore)
{
	struct routes *rt = ctx;

	sbx_ckpt_restore(rt->m, p[0], p[1], ckpt_restored, r);
}

ROUTE(r_ckpt_delete)
{
	struct routes *rt = ctx;
	struct sbx_err err;

	if (sbx_ckpt_delete(rt->m, p[0], p[1], &err))
		reply_error(r, &err, S_CHECKPOINT);
	else
		api_ok(r, 200, NULL);
}
