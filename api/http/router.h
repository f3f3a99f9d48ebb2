/* SPDX-License-Identifier: MIT */
#ifndef HUSK_ROUTER_H
#define HUSK_ROUTER_H

/*
 * A table router for huskd's routes (API.md §8). A pattern is literal
 * segments and ":name" parameters, "/sandbox/:id/execute". Among the routes
 * whose pattern matches a path, the one with a literal in the first position
 * where they differ wins ("/sandbox/runtimes" over "/sandbox/:id"); the
 * method is chosen among the routes of that same shape only, so
 * DELETE /sandbox/runtimes is a 405, not a sandbox named "runtimes".
 * Segments are percent-decoded after splitting ("%2F" stays inside a
 * parameter) and leading slashes collapse ("//sandbox" is "/sandbox").
 */
#include <stddef.h>

#include "http.h"

#define ROUTER_MAX_PARAMS 4
#define ROUTER_PARAM_LEN 256

struct route {
	const char *method;  /* "GET", ... */
	const char *pattern; /* "/sandbox/:id/execute" */
	/* params: the decoded parameters in pattern order, valid during the call only. */
	void (*fn)(struct http_req *r, const char *const *params, void *ctx);
	unsigned flags; /* the caller's: the router only hands it to the guard */
};

/*
 * Runs before a route (route NULL: none matched, before the 404 or 405):
 * returns 0 to go on, or anything else once it has answered r itself.
 */
typedef int (*router_guard)(struct http_req *r, const struct route *route,
                            const char *const *params, void *ctx);

/*
 * Finds the route among routes[0..n) for method and path (raw, without the
 * query). HEAD falls back to GET routes. Returns 0 with *out set and the
 * decoded parameters (NUL-terminated) in params; -ENOENT if no pattern
 * matches path (404); -EPERM if one does but not for method (405).
 */
int router_match(const struct route *routes, size_t n, const char *method, const char *path,
                 const struct route **out, char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_LEN])
	__attribute__((warn_unused_result));

/*
 * Writes the methods path allows, "GET, DELETE", into out (outlen bytes):
 * the Allow header of a 405. Returns the number of methods (0: no route).
 */
int router_allow(const struct route *routes, size_t n, const char *path, char *out, size_t outlen);

/*
 * Routes r: calls the matching route's fn(r, params, ctx), or answers a JSON
 * 404 (NOT_FOUND) or 405 (METHOD_NOT_ALLOWED, with Allow) itself.
 */
void router_dispatch(struct http_req *r, const struct route *routes, size_t n, void *ctx);
/* router_dispatch with guard (may be NULL) asked first. */
void router_dispatch_guarded(struct http_req *r, const struct route *routes, size_t n,
                             router_guard guard, void *ctx);

#endif
