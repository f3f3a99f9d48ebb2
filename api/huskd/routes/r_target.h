/* SPDX-License-Identifier: MIT */
#ifndef HUSK_R_TARGET_H
#define HUSK_R_TARGET_H

/*
 * Which sandbox port a request is for (r_proxy.c), from the client's Host
 * header, path and query alone: "sbx-<rand>-<port>.<domain>" or E2B's
 * "<port>-sbx_<rand>.<domain>" (any port on the Host, any case), or the
 * path "/p/<sandbox id>/..." (its network.port) or "/p/<sandbox id>:<port>/...".
 * Pure, for the fuzz target.
 */
#include <stdbool.h>
#include <stddef.h>

#define PROXY_PATH_PREFIX "/p/"
/* The query parameter that may carry a url's token (network.urlToken). */
#define PROXY_TOKEN_PARAM "husk_token"

struct proxy_target {
	char id[64];     /* "sbx_<rand>" */
	unsigned port;   /* the port named (1-65535); 0: the sandbox's own (network.port) */
	bool by_path;    /* the path form (its prefix dropped from path) */
	char path[8192]; /* what the guest's server is asked for, query included */
};

/*
 * 1 with t filled for a request to a sandbox's port, 0 for any other
 * request, -ENAMETOOLONG for one whose path and query do not fit.
 * host may be NULL; domain NULL: no names (the path form only).
 */
int proxy_target(const char *host, const char *path, const char *query, const char *domain,
                 struct proxy_target *t);

/*
 * E2B's SDK given only E2B_DOMAIN (domain): "/e2b" for the Host
 * "api.<domain>", "/e2b/envd" for "49983-<anything>.<domain>" (envd's port),
 * NULL for any other (or NULL) host or domain: the path prefix that serves it.
 */
const char *proxy_e2b_prefix(const char *host, const char *domain);

/*
 * Takes ?husk_token=VALUE out of t->path's query (the guest's server never
 * sees it): 1 with out set, 0 if there is none, -ENAMETOOLONG for a value
 * of outlen bytes or more.
 */
int proxy_take_token(struct proxy_target *t, char *out, size_t outlen);

#endif
