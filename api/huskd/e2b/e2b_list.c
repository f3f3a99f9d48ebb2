// SPDX-License-Identifier: MIT
/*
 * A husk sandbox as E2B's REST API shows it (API.md §11.1): its record as
 * E2B's Sandbox and ListedSandbox, and GET /v2/sandboxes (the org's running
 * and paused ones, filtered by metadata and state, paged by an offset token).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"

/* "512Mi" -> 512, "2Gi" -> 2048 (MiB); "500m" -> 1, "2" -> 2 (whole CPUs, rounded up). */
static long long size_mib(const char *s)
{
	char *end;
	long long v = s ? strtoll(s, &end, 10) : 0;

	if (!s)
		return 0;
	if (!strcmp(end, "Gi"))
		return v * 1024;
	if (!strcmp(end, "Ki"))
		return v / 1024;
	return v;
}

static long long cpus(const char *s)
{
	char *end;
	long long v = s ? strtoll(s, &end, 10) : 0;

	if (s && *end == 'm')
		return (v + 999) / 1000;
	return v;
}

/* "running" or "paused" (E2B's states); NULL for a sandbox that has ended. */
const char *e2b_state(json_t *info)
{
	const char *st = json_string_value(json_object_get(info, "status"));

	if (!st)
		return NULL;
	if (!strcmp(st, "paused") || !strcmp(st, "suspended"))
		return "paused";
	if (!strcmp(st, "terminated") || !strcmp(st, "failed") || !strcmp(st, "deleted") ||
	    !strcmp(st, "stopping"))
		return NULL;
	return "running";
}

/* A SandboxInfo as E2B's Sandbox / ListedSandbox (with the token: a detail's or a create's). */
json_t *e2b_sandbox(const struct routes *rt, json_t *info, bool token)
{
	const char *id = json_string_value(json_object_get(info, "sandboxId"));
	json_t *res = json_object_get(info, "resources"), *meta = json_object_get(info, "metadata");
	json_t *snap = json_object_get(info, "snapshotId"), *out;
	const char *tmpl = json_string_value(
		snap ? snap : json_object_get(json_object_get(info, "runtime"), "name"));
	const char *created = json_string_value(json_object_get(info, "createdAt"));
	const char *end = json_string_value(json_object_get(info, "deadlineAt"));
	const char *state = e2b_state(info);
	char tok[E2B_TOKEN_HEX + 1];

	out = json_pack(
		"{sssssssssssssssIsIsIss}", "sandboxID", id, "templateID", tmpl ? tmpl : "",
		"clientID", "husk", "envdVersion", E2B_ENVD_VERSION, "startedAt",
		created ? created : "", "endAt", end ? end : (created ? created : ""), "state",
		state ? state : "killed", "cpuCount",
		(json_int_t)cpus(json_string_value(json_object_get(res, "cpu"))), "memoryMB",
		(json_int_t)size_mib(json_string_value(json_object_get(res, "memory"))),
		"diskSizeMB", (json_int_t)size_mib(json_string_value(json_object_get(res, "disk"))),
		"alias", json_string_value(json_object_get(info, "name")) ?: "");
	if (!out)
		return NULL;
	if (!json_string_length(json_object_get(out, "alias")))
		json_object_del(out, "alias");
	json_object_set_new(out, "metadata",
	                    json_is_object(meta) ? json_copy(meta) : json_object());
	if (token) {
		e2b_token(rt, id, tok);
		json_object_set_new(out, "envdAccessToken", json_string(tok));
		/* What getHost(port) puts after "<port>-<sandbox id>.": needs DNS for it. */
		json_object_set_new(out, "domain",
		                    rt->cfg.public_domain ? json_string(rt->cfg.public_domain)
		                                          : json_null());
		if (json_is_true(json_object_get(info, "urlTokenRequired"))) {
			char traffic[ROUTES_TOKEN_HEX + 1];

			routes_token(rt, "url", id, traffic);
			json_object_set_new(out, "trafficAccessToken", json_string(traffic));
		}
	}
	return out;
}

/*
 * The caller's live sandbox id: its state ("running", "paused"; info, if
 * asked for, its record), or NULL after a 404 (another org's is not there
 * for it, an ended one is gone, as on E2B).
 */
const char *e2b_live(struct routes *rt, struct http_req *r, const char *id, json_t **info)
{
	struct sbx_err err;
	const char *st = NULL;
	json_t *rec = NULL;

	if (sbx_owned(rt->m, SBX_KIND_SANDBOX, id, caller_org(r)) != 0) {
		e2b_error(r, 404, "sandbox %s not found", id);
		return NULL;
	}
	if (sbx_get(rt->m, id, &rec, &err)) {
		e2b_reply_error(r, &err);
		return NULL;
	}
	st = e2b_state(rec);
	if (!st)
		e2b_error(r, 404, "sandbox %s not found (it has ended)", id);
	if (st && info)
		*info = rec;
	else
		json_decref(rec);
	return st;
}

/* The metadata filter "k=v&k2=v2" (each part URL-encoded) against info's metadata. */
static bool meta_matches(const char *filter, json_t *meta)
{
	char part[512], key[256], val[256];
	const char *p = filter, *eq;
	size_t n;

	while (*p) {
		n = strcspn(p, "&");
		if (n < sizeof(part)) {
			memcpy(part, p, n);
			part[n] = '\0';
			eq = strchr(part, '=');
			if (!eq ||
			    http_pct_decode(part, (size_t)(eq - part), key, sizeof(key), 0) < 0 ||
			    http_pct_decode(eq + 1, strlen(eq + 1), val, sizeof(val), 0) < 0 ||
			    strcmp(json_string_value(json_object_get(meta, key)) ?: "\x01", val))
				return false;
		} else {
			return false;
		}
		p += n + (p[n] == '&');
	}
	return true;
}

int e2b_page_of(struct http_req *r, struct e2b_page *pg)
{
	char tok[24] = "";

	*pg = (struct e2b_page){.limit = query_int(r, "limit", 100)};
	if (http_query_get(r, "nextToken", tok, sizeof(tok)) == -2 ||
	    (tok[0] && (pg->from = strtoll(tok, NULL, 10)) < 0) || pg->limit < 1 ||
	    pg->limit > 1000) {
		e2b_error(r, 400, "limit must be 1..1000 and nextToken one this API gave");
		return -1;
	}
	return 0;
}

int e2b_page_next(struct http_req *r, struct e2b_page *pg, size_t have)
{
	char next[24];

	if (pg->seen++ < pg->from)
		return 0;
	if ((long long)have < pg->limit)
		return 1;
	snprintf(next, sizeof(next), "%lld", pg->from + pg->limit);
	if (http_add_header(r, "x-next-token", next))
		log_warn(NULL, "cannot add x-next-token");
	return -1;
}

ROUTE(e2b_list)
{
	struct routes *rt = ctx;
	struct sbx_list_query q = {.org = caller_org(r), .live = 1, .limit = 10000};
	char meta[2048] = "", states[64] = "";
	json_t *all, *out, *v, *e;
	struct sbx_err err;
	struct e2b_page pg;
	size_t i;
	int take;

	(void)p;
	if (http_query_get(r, "metadata", meta, sizeof(meta)) == -2 ||
	    http_query_get(r, "state", states, sizeof(states)) == -2) {
		e2b_error(r, 400, "metadata or state is too long");
		return;
	}
	if (e2b_page_of(r, &pg))
		return;
	if (sbx_list(rt->m, &q, &all, &err)) {
		e2b_reply_error(r, &err);
		return;
	}
	out = json_array();
	json_array_foreach(json_object_get(all, "sandboxes"), i, v)
	{
		const char *st = e2b_state(v);

		if (!st || (states[0] && !strstr(states, st)) ||
		    (meta[0] && !meta_matches(meta, json_object_get(v, "metadata"))))
			continue;
		if ((take = e2b_page_next(r, &pg, json_array_size(out))) < 0)
			break;
		if (take && (e = e2b_sandbox(rt, v, false)))
			json_array_append_new(out, e);
	}
	json_decref(all);
	http_respond_json(r, 200, out);
}
