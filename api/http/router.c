// SPDX-License-Identifier: MIT
/* Route table matching (see router.h for the rules). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "json_resp.h"
#include "router.h"

/* Deeper paths than this match no route (huskd's deepest has 5 segments). */
#define MAX_SEGS 12

struct split {
	int n;
	bool bad[MAX_SEGS]; /* too long, or a NUL byte: matches nothing */
	char seg[MAX_SEGS][ROUTER_PARAM_LEN];
};

/* Splits and decodes path; -1 if it has too many segments. */
static int split_path(const char *path, struct split *sp)
{
	sp->n = 0;
	while (*path == '/')
		path++;
	if (!*path)
		return 0; /* "/" */
	for (;;) {
		const char *end = strchr(path, '/');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		int d;

		if (sp->n == MAX_SEGS)
			return -1;
		d = http_pct_decode(path, len, sp->seg[sp->n], ROUTER_PARAM_LEN, 0);
		sp->bad[sp->n] = d < 0 || memchr(sp->seg[sp->n], '\0', (size_t)d);
		sp->n++;
		if (!end)
			return 0;
		path = end + 1;
	}
}

/*
 * Whether pattern matches sp; *shape gets one bit per literal segment, the
 * first segment highest, so a larger shape is the more literal route.
 */
static bool pattern_match(const char *pattern, const struct split *sp, unsigned *shape)
{
	int i = 0;

	*shape = 0;
	while (*pattern == '/')
		pattern++;
	while (*pattern) {
		const char *end = strchr(pattern, '/');
		size_t len = end ? (size_t)(end - pattern) : strlen(pattern);

		if (i == sp->n || sp->bad[i])
			return false;
		if (pattern[0] == ':') {
			if (!sp->seg[i][0])
				return false;
		} else if (strlen(sp->seg[i]) != len || memcmp(sp->seg[i], pattern, len)) {
			return false;
		} else {
			*shape |= 1u << (MAX_SEGS - 1 - i);
		}
		i++;
		pattern += len + (end ? 1 : 0);
	}
	return i == sp->n;
}

/* The best shape among routes matching sp; -1 if none matches. */
static long best_shape(const struct route *routes, size_t n, const struct split *sp)
{
	long best = -1;
	unsigned shape;

	for (size_t i = 0; i < n; i++)
		if (pattern_match(routes[i].pattern, sp, &shape) && (long)shape > best)
			best = shape;
	return best;
}

static const struct route *find_method(const struct route *routes, size_t n, const struct split *sp,
                                       long best, const char *method)
{
	unsigned shape;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(routes[i].method, method) &&
		    pattern_match(routes[i].pattern, sp, &shape) && shape == best)
			return &routes[i];
	return NULL;
}

int router_match(const struct route *routes, size_t n, const char *method, const char *path,
                 const struct route **out, char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_LEN])
{
	struct split sp;
	const struct route *rt;
	const char *p;
	long best;
	int np = 0;

	for (int i = 0; i < ROUTER_MAX_PARAMS; i++)
		params[i][0] = '\0';
	if (split_path(path, &sp) < 0)
		return -ENOENT;
	best = best_shape(routes, n, &sp);
	if (best < 0)
		return -ENOENT;
	rt = find_method(routes, n, &sp, best, method);
	if (!rt && !strcmp(method, "HEAD"))
		rt = find_method(routes, n, &sp, best, "GET");
	if (!rt)
		return -EPERM;
	p = rt->pattern;
	for (int i = 0; *p; i++) {
		while (*p == '/')
			p++;
		if (*p == ':' && np < ROUTER_MAX_PARAMS)
			strcpy(params[np++], sp.seg[i]);
		p += strcspn(p, "/");
	}
	*out = rt;
	return 0;
}

int router_allow(const struct route *routes, size_t n, const char *path, char *out, size_t outlen)
{
	struct split sp;
	unsigned shape;
	size_t len = 0;
	long best;
	int count = 0;

	if (outlen)
		out[0] = '\0';
	if (split_path(path, &sp) < 0 || (best = best_shape(routes, n, &sp)) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		size_t ml = strlen(routes[i].method);

		if (!pattern_match(routes[i].pattern, &sp, &shape) || shape != best ||
		    find_method(routes, i, &sp, best, routes[i].method))
			continue; /* not this shape, or its method already listed */
		if (len + ml + 3 > outlen)
			break;
		if (count++) {
			memcpy(out + len, ", ", 2);
			len += 2;
		}
		memcpy(out + len, routes[i].method, ml + 1);
		len += ml;
	}
	return count;
}

void router_dispatch(struct http_req *r, const struct route *routes, size_t n, void *ctx)
{
	router_dispatch_guarded(r, routes, n, NULL, ctx);
}

void router_dispatch_guarded(struct http_req *r, const struct route *routes, size_t n,
                             router_guard guard, void *ctx)
{
	char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_LEN], allow[128];
	const char *ptrs[ROUTER_MAX_PARAMS];
	const struct route *rt;
	int err = router_match(routes, n, http_method(r), http_path(r), &rt, params);

	for (int i = 0; i < ROUTER_MAX_PARAMS; i++)
		ptrs[i] = params[i];
	if (guard && guard(r, err ? NULL : rt, ptrs, ctx))
		return;
	if (err == -EPERM) {
		router_allow(routes, n, http_path(r), allow, sizeof(allow));
		if (http_add_header(r, "Allow", allow) < 0) {
			api_error(r, 500, "INTERNAL", "out of memory");
			return;
		}
		api_error(r, 405, "METHOD_NOT_ALLOWED", "%s is not allowed on %s (allowed: %s)",
		          http_method(r), http_path(r), allow);
		return;
	}
	if (err) {
		api_error(r, 404, "NOT_FOUND", "no route for %s %s", http_method(r), http_path(r));
		return;
	}
	rt->fn(r, ptrs, ctx);
}
