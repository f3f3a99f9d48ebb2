// SPDX-License-Identifier: MIT
/* Snapshot endpoints (API.md §5.8 (30)-(37)); taking one is in sbx_snap.c. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "handlers.h"
#include "http.h"
#include "json_resp.h"

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

HANDLER(h_snap_create)
{
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
	sbx_snapshot_create(ctx, r, p[0], body);
	json_decref(body);
}

static void list(struct http_req *r, struct huskd *d, bool public_only)
{
	char sandbox[64] = "", sort[32] = "", dir[8] = "";
	struct store_snapshot_filter f = {.public_only = public_only};
	json_t *out = NULL;

	if (!public_only && http_query_get(r, "sandboxId", sandbox, sizeof(sandbox)) > 0)
		f.sandbox_id = sandbox;
	if (http_query_get(r, "sort", sort, sizeof(sort)) > 0)
		f.sort = sort;
	f.ascending = http_query_get(r, "direction", dir, sizeof(dir)) > 0 && !strcmp(dir, "asc");
	query_page(r, 50, public_only ? 100 : 1000, &f.limit, &f.offset);
	if (store_snapshot_list(d->store, &f, &out))
		api_error(r, 400, "BAD_REQUEST", "sort must be one of name, created, size, files");
	else
		api_ok(r, 200, out);
}

HANDLER(h_snap_list)
{
	(void)p;
	list(r, ctx, false);
}

HANDLER(h_snap_public_list)
{
	(void)p;
	list(r, ctx, true);
}

static void get(struct http_req *r, struct huskd *d, const char *ref, bool public_only)
{
	json_t *info = NULL;

	if (store_snapshot_find(d->store, ref, &info, NULL) ||
	    (public_only && !json_is_true(json_object_get(info, "public")))) {
		json_decref(info);
		api_error(r, 404, "SNAPSHOT_NOT_FOUND",
		          "snapshot %s not found; GET /sandbox/snapshots lists them", ref);
		return;
	}
	api_ok(r, 200, info);
}

HANDLER(h_snap_get)
{
	get(r, ctx, p[0], false);
}

HANDLER(h_snap_public_get)
{
	get(r, ctx, p[0], true);
}

HANDLER(h_snap_tag)
{
	struct huskd *d = ctx;
	json_t *body = body_object(r), *tag, *info = NULL, *patch;
	int rc;

	if (!body)
		return;
	tag = json_object_get(body, "tag");
	if (!tag || !(json_is_null(tag) || word_ok(tag, "."))) {
		json_decref(body);
		api_error(r, 400, "BAD_REQUEST",
		          "tag must be 1 to 64 letters, digits, '.', '_' or '-', or null to remove "
		          "it");
		return;
	}
	patch = json_pack("{sO}", "tag", tag);
	rc = store_snapshot_find(d->store, p[0], &info, NULL);
	if (!rc) {
		char id[STORE_ID_LEN];

		snprintf(id, sizeof(id), "%s",
		         json_string_value(json_object_get(info, "snapshotId")));
		json_decref(info);
		info = NULL;
		rc = store_snapshot_update(d->store, id, patch, NULL, &info);
	}
	json_decref(patch);
	json_decref(body);
	if (rc)
		api_error(r, 404, "SNAPSHOT_NOT_FOUND", "snapshot %s not found", p[0]);
	else
		api_ok(r, 200, info);
}

HANDLER(h_snap_delete)
{
	json_t *out = NULL;
	int rc = sbx_snapshot_delete(ctx, p[0], &out);

	if (rc)
		api_error(r, 404, "SNAPSHOT_NOT_FOUND", "snapshot %s not found", p[0]);
	else
		api_ok(r, 200, out);
}

HANDLER(h_snap_lineage)
{
	struct huskd *d = ctx;
	char ref[200] = "", name[80] = "", tag[80] = "";
	json_t *info = NULL, *out = NULL;
	int limit = query_int(r, "limit", 100), rc;

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
	rc = store_snapshot_find(d->store, ref, &info, NULL);
	if (!rc)
		rc = store_snapshot_lineage(d->store,
		                            json_string_value(json_object_get(info, "snapshotId")),
		                            limit, &out);
	json_decref(info);
	if (rc)
		api_error(r, 404, "SNAPSHOT_NOT_FOUND", "snapshot %s not found", ref);
	else
		api_ok(r, 200, out);
}
