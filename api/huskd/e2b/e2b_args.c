// SPDX-License-Identifier: MIT
/*
 * What E2B's REST requests carry (API.md §11.1), read and checked for
 * every route of it: the JSON body, a timeout, a list's page (limit and an
 * offset token), the network lists, and the caller's live sandbox a path
 * names. A bad one is answered 400 (or 404) here, in E2B's error body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"

/* The SDK's default is 300 s; E2B's own upper bound is a day (Pro). */
#define E2B_TIMEOUT_MAX (24 * 3600)

/* The body as a JSON object (empty: {}), or NULL after a 400. */
json_t *e2b_body(struct http_req *r)
{
	size_t len = 0;
	const char *b = http_body(r, &len);
	json_error_t e;
	json_t *j = len ? json_loadb(b, len, 0, &e) : json_object();

	if (!json_is_object(j)) {
		json_decref(j);
		e2b_error(r, 400, "the body must be a JSON object");
		return NULL;
	}
	return j;
}

/* body.timeout: seconds (1..a day) into *secs; absent: def. -1 after a 400. */
int e2b_timeout_of(struct http_req *r, json_t *body, long long def, long long *secs)
{
	json_t *t = json_object_get(body, "timeout");

	*secs = def;
	if (!t || json_is_null(t))
		return 0;
	if (!json_is_integer(t) || json_integer_value(t) < 1 ||
	    json_integer_value(t) > E2B_TIMEOUT_MAX) {
		e2b_error(r, 400, "timeout must be whole seconds from 1 to %d", E2B_TIMEOUT_MAX);
		return -1;
	}
	*secs = json_integer_value(t);
	return 0;
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

/*
 * E2B's {allowOut, denyOut, allow_internet_access} as husk's lists: an
 * allow list already refuses all else, so E2B's "deny everything"
 * (0.0.0.0/0) beside it is dropped; allow_internet_access false denies all;
 * E2B's 0.0.0.0/0 means IPv6 too.
 */
json_t *e2b_net_lists(json_t *body)
{
	json_t *allow = json_object_get(body, "allowOut"), *deny = json_object_get(body, "denyOut");
	json_t *lists = json_pack("{s[]s[]}", "allow", "deny"), *v;
	size_t i;

	if (!lists)
		return NULL;
	json_array_foreach(allow, i, v) json_array_append(json_object_get(lists, "allow"), v);
	json_array_foreach(deny, i, v) if (!json_array_size(allow) ||
	                                   strcmp(json_string_value(v) ?: "", "0.0.0.0/0"))
		json_array_append(json_object_get(lists, "deny"), v);
	if (json_is_false(json_object_get(body, "allow_internet_access")))
		json_array_append_new(json_object_get(lists, "deny"), json_string("0.0.0.0/0"));
	/* E2B's "all traffic" is 0.0.0.0/0 (its sandboxes have no IPv6); here IPv6 goes too. */
	json_array_foreach(json_object_get(lists, "deny"), i,
	                   v) if (!strcmp(json_string_value(v) ?: "", "0.0.0.0/0"))
	{
		json_array_append_new(json_object_get(lists, "deny"), json_string("::/0"));
		break;
	}
	return lists;
}
