// SPDX-License-Identifier: MIT
/*
 * GET /v2/sandboxes of E2B's REST API (API.md §11.1): the org's running and
 * paused sandboxes, filtered by metadata and state, paged by an offset token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"

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
