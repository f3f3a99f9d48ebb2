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

#endif
