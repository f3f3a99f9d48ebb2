// SPDX-License-Identifier: MIT
/*
 * A sandbox's exposed port (network.port) as the proxy sees it: the Unix
 * socket its VMM's user-mode stack listens on for that guest port, once
 * the sandbox is up (a paused one is resumed for the request).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sbx_int.h"

struct port_wait {
	sbx_port_fn fn;
	void *ctx;
};

static void port_ready(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct port_wait *w = arg;
	char path[4200];

	if (!err) {
		snprintf(path, sizeof(path), "%s/port.sock", sb->dir);
		sbx_touch(sb);
	}
	w->fn(w->ctx, err, err ? NULL : path, sb->port);
	free(w);
	sbx_drop(sb);
}

void sbx_port_open(struct sbx_mgr *m, const char *id, unsigned port, sbx_port_fn fn, void *ctx)
{
	struct sandbox *sb;
	struct port_wait *w;
	struct sbx_err err;

	sb = sbx_lookup(m, id, &err);
	if (sb && (!sb->port || (port && sb->port != port))) {
		sbx_fail(&err, SBX_NO_SANDBOX, -ENOENT,
		         sb->port ? "sandbox %s serves port %u, not %u"
		                  : "sandbox %s serves no port (create it with network.port)",
		         id, sb->port, port);
		sb = NULL;
	}
	w = sb ? calloc(1, sizeof(*w)) : NULL;
	if (sb && !w)
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	if (!w) {
		fn(ctx, &err, NULL, 0);
		return;
	}
	w->fn = fn;
	w->ctx = ctx;
	sbx_hold(sb);
	sbx_when_ready(sb, port_ready, w);
}

void sbx_port_touch(struct sbx_mgr *m, const char *id)
{
	struct sandbox *sb = sbx_find(m, id);

	if (sb)
		sbx_touch(sb);
}
