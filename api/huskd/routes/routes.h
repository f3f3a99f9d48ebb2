/* SPDX-License-Identifier: MIT */
#ifndef HUSK_ROUTES_H
#define HUSK_ROUTES_H

/*
 * huskd's API (api/API.md) on the HTTP server: the only code that sees
 * requests, JSON bodies, HTTP statuses and error codes. It calls the
 * sandbox manager's public functions (sandbox/sbx.h) and nothing below.
 */
#include <stdio.h>

#include "http.h"
#include "sbx.h"
#include "tenant.h"

struct routes;

struct routes_config {
	uv_loop_t *loop;
	struct tenants *tenants;      /* who each key is (borrowed) */
	struct keystore *keystore;    /* org keys (borrowed): DELETE /orgs/:org/key */
	unsigned char stream_key[32]; /* signs output stream URLs */
	uint64_t stream_ttl_ms;       /* how long a signed stream URL works */
	bool tls;                     /* served over HTTPS: the URLs it gives say so */
	const char *state;            /* the state folder, named in the 401 message */
	const char *public_url;       /* base of stream URLs; NULL: from each request's Host */
	/* Sandbox urls by host name, sbx-<id>-<port>.<public_domain>; NULL: by path on huskd's
	 * own address. */
	const char *public_domain;
};

int routes_open(struct sbx_mgr *m, const struct routes_config *cfg, struct routes **out)
	__attribute__((warn_unused_result));
/* The http_admit_fn (the key, checked before a body is read): ctx is the struct routes. */
int routes_admit(struct http_req *r, void *ctx, struct http_refusal *out);
/* The http_config's served (with --log-level debug): each request's answer and its time. */
void routes_served(const struct http_req *r, uint64_t ns);
/*
 * Prints every route as a JSON line {"method", "pattern", "scope"}: scope is
 * "open" (no key), "sandbox", "execution" or "build" (the first parameter is
 * one of the caller's org), "admin", "operator", or "caller" (the route scopes
 * what it answers by the caller's org itself). For the tests that try every
 * route with another org's ids.
 */
void routes_print(FILE *f);
/* The http_handler: ctx is the struct routes. */
void routes_handle(struct http_req *r, void *ctx);
/* huskd is stopping: answers the long-polls still held. */
void routes_close(struct routes *rt);
/* Once the loop has drained (answers to the last requests may still come until then). */
void routes_free(struct routes *rt);

#endif
