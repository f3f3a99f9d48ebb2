/* SPDX-License-Identifier: MIT */
#ifndef HUSK_E2B_ROUTES_H
#define HUSK_E2B_ROUTES_H

/* E2B's API: the route handlers routes.c lists (e2b_int.h says how they are built). */
#include "r_int.h"

/* REST under /e2b (X-API-Key). */
ROUTE(e2b_create);
ROUTE(e2b_list);
ROUTE(e2b_get);
ROUTE(e2b_kill);
ROUTE(e2b_timeout);
ROUTE(e2b_pause);
ROUTE(e2b_connect);
ROUTE(e2b_snap_create);
ROUTE(e2b_snap_list);
ROUTE(e2b_snap_delete);
ROUTE(e2b_fork);
ROUTE(e2b_network);
ROUTE(e2b_metrics);
/* envd under /e2b/envd (the sandbox's access token, no key). */
ROUTE(e2b_health);
ROUTE(e2b_rpc);
ROUTE(e2b_files_get);
ROUTE(e2b_files_post);

/*
 * E2B's SDK given only E2B_DOMAIN=D (huskd --public-domain D): its API at
 * api.D and a sandbox's envd at 49983-<sandbox id>.D are served as /e2b
 * and /e2b/envd (r's path prefixed, once). True for such a request.
 */
bool e2b_by_host(const char *domain, struct http_req *r);

#endif
