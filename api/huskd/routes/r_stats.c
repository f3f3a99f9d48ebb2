// SPDX-License-Identifier: MIT
/*
 * Usage statistics over a time window: GET /sandbox/stats?start=&end= (ours,
 * with a per-sandbox breakdown) and GET /services/stats/{orgId}?service=
 * sandbox&start=&end= (the shape the CLI reference's `sandbox stats` reads).
 * Times are ISO 8601 UTC; the window defaults to the last 24 hours.
 */
#include <string.h>
#include <time.h>

#include "r_int.h"

#define DAY_MS (24ll * 3600 * 1000)

/* "2026-04-01T00:00:00Z", optional ".mmm" and "Z"; -1 if not that. */
static int64_t parse_iso(const char *s)
{
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t ms = 0, scale = 100;

	if (!rest)
		return -1;
	if (*rest == '.')
		for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10)
			ms += scale * (*rest - '0');
	if (*rest == 'Z')
		rest++;
	if (*rest)
		return -1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/* The window from ?start= and ?end=, or answers 400 and returns -1. */
static int window(struct http_req *r, int64_t *from, int64_t *to)
{
	char start[64] = "", end[64] = "";

	http_query_get(r, "start", start, sizeof(start));
	http_query_get(r, "end", end, sizeof(end));
	*to = *end ? parse_iso(end) : sbx_now_ms();
	*from = *start ? parse_iso(start) : *to - DAY_MS;
	if (*from < 0 || *to < 0) {
		api_error(r, 400, "INVALID_REQUEST",
		          "start and end must be ISO 8601 UTC times, e.g. 2026-04-01T00:00:00Z");
		return -1;
	}
	if (*to < *from) {
		api_error(r, 400, "INVALID_REQUEST", "end is before start: swap them");
		return -1;
	}
	return 0;
}

static void usage_failed(struct http_req *r)
{
	struct sbx_err err = {.fault = SBX_INTERNAL, .msg = "cannot read usage statistics"};

	reply_error(r, &err, S_SANDBOX);
}

ROUTE(r_stats)
{
	struct routes *rt = ctx;
	int64_t from, to;
	json_t *out = NULL;

	(void)p;
	if (window(r, &from, &to))
		return;
	if (sbx_usage(rt->m, caller_org(r), from, to, &out))
		usage_failed(r);
	else
		api_ok(r, 200, out);
}

ROUTE(r_service_stats)
{
	struct routes *rt = ctx;
	char service[32] = "";
	int64_t from, to;
	json_t *s = NULL, *live, *tot, *out;

	/* The path's org is the caller's (by id or name); another is not there. */
	if (strcmp(p[0], caller(r)->org_id) && strcmp(p[0], caller(r)->org_name)) {
		api_error(r, 404, "NOT_FOUND",
		          "org '%s' not found: this key belongs to org '%s' (%s)", p[0],
		          caller(r)->org_name, caller(r)->org_id);
		return;
	}
	http_query_get(r, "service", service, sizeof(service));
	if (*service && strcmp(service, "sandbox")) {
		api_error(r, 400, "INVALID_REQUEST", "service '%s': huskd has only 'sandbox'",
		          service);
		return;
	}
	if (window(r, &from, &to))
		return;
	if (sbx_usage(rt->m, caller_org(r), from, to, &s)) {
		usage_failed(r);
		return;
	}
	live = json_object_get(s, "live");
	tot = json_object_get(s, "total");
	out = json_pack("{s:{s:{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:i}}, s:O, s:O}", "services",
	                "sandbox", "totalActive", json_object_get(live, "totalActive"), "running",
	                json_object_get(live, "running"), "idle", json_object_get(live, "idle"),
	                "creating", json_object_get(live, "creating"), "totalExecutions",
	                json_object_get(tot, "executions"), "totalCpuTimeMs",
	                json_object_get(tot, "cpuTimeMs"), "totalMemoryByteSec",
	                json_object_get(tot, "memoryByteSec"), "totalNetworkEgressBytes", 0, "from",
	                json_object_get(s, "from"), "to", json_object_get(s, "to"));
	json_decref(s);
	if (!out)
		usage_failed(r);
	else
		api_ok(r, 200, out);
}
