// SPDX-License-Identifier: MIT
/*
 * A sandbox's exposed ports as the proxy sees them: the Unix socket its
 * VMM's user-mode stack listens on for a guest port, once the sandbox is up
 * (a paused one is resumed for the request). network.port is served from
 * the VMM's start; with network.allPorts any other port is asked of the
 * running VMM (its control command "expose") at its first request, and
 * again after the VMM is replaced (a resume starts a new one).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "sbx_int.h"
#include "vmm_ctl_uv.h"

struct port_wait {
	sbx_port_fn fn;
	void *ctx;
	struct sandbox *sb;
	unsigned port;        /* 0: network.port */
	struct vmm_proc *vmm; /* the VMM asked to expose it */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static void port_done(struct port_wait *w, const struct sbx_err *err)
{
	struct sandbox *sb = w->sb;

	if (!err)
		sbx_touch(sb);
	w->fn(w->ctx, err, err ? NULL : w->path, w->port ? w->port : sb->port);
	free(w);
	sbx_drop(sb);
}

static bool port_exposed(const struct sandbox *sb, unsigned port)
{
	for (unsigned i = 0; i < sb->nr_exposed; i++)
		if (sb->exposed[i] == port)
			return true;
	return false;
}

static void port_answered(void *arg, int rc, const char *reply)
{
	struct port_wait *w = arg;
	struct sandbox *sb = w->sb;
	struct sbx_err err;

	if (sb->m->closing) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ESHUTDOWN, "huskd is stopping");
		port_done(w, &err);
		return;
	}
	if (rc) {
		log_warn(sb->id, "its VMM did not expose port %u: %s", w->port, reply);
		sbx_fail(&err, SBX_UNREACHABLE, rc, "sandbox %s cannot serve port %u: %s", sb->id,
		         w->port, reply);
		port_done(w, &err);
		return;
	}
	/* Recorded for the VMM that said so; a new one starts with none. */
	if (sb->vmm == w->vmm && !port_exposed(sb, w->port) && sb->nr_exposed < SBX_EXPOSED_MAX)
		sb->exposed[sb->nr_exposed++] = (uint16_t)w->port;
	port_done(w, NULL);
}

static void port_ready(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct port_wait *w = arg;
	struct sbx_err e;
	char ctl[4200], cmd[256];
	int rc;

	if (err || !w->port || port_exposed(sb, w->port)) {
		port_done(w, err);
		return;
	}
	if (sb->nr_exposed == SBX_EXPOSED_MAX) {
		sbx_fail(&e, SBX_STATE, -ENOSPC,
		         "sandbox %s serves %d ports already, the most it may: port %u is not "
		         "served until it is restarted (pause and resume it)",
		         sb->id, SBX_EXPOSED_MAX, w->port);
		port_done(w, &e);
		return;
	}
	snprintf(ctl, sizeof(ctl), "%s/control.sock", sb->dir);
	snprintf(cmd, sizeof(cmd), "expose %u %s", w->port, w->path);
	w->vmm = sb->vmm;
	rc = vmm_ctl_send(sb->m->loop, ctl, cmd, SBX_CTL_TIMEOUT_MS, port_answered, w, NULL);
	if (rc) {
		sbx_fail(&e, SBX_UNREACHABLE, rc, "sandbox %s's VMM cannot be reached: %s", sb->id,
		         uv_strerror(rc));
		port_done(w, &e);
	}
}

/* The sandbox with port (0: its network.port) to serve, or NULL with err set. */
static struct sandbox *port_sandbox(struct sbx_mgr *m, const char *id, unsigned port,
                                    struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);

	if (!sb || (port == 0 && sb->port) || (port && (port == sb->port || sb->all_ports)))
		return sb;
	if (sb->all_ports)
		sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		         "sandbox %s serves every port: name one (/p/%s:PORT/ or "
		         "PORT-%s.<domain>)",
		         id, id, id);
	else if (sb->port)
		sbx_fail(err, SBX_NO_SANDBOX, -ENOENT, "sandbox %s serves port %u, not %u", id,
		         sb->port, port);
	else
		sbx_fail(err, SBX_NO_SANDBOX, -ENOENT,
		         "sandbox %s serves no port (create it with network.port, or "
		         "network.allPorts for all of them)",
		         id);
	return NULL;
}

void sbx_port_open(struct sbx_mgr *m, const char *id, unsigned port, sbx_port_fn fn, void *ctx)
{
	struct sandbox *sb;
	struct port_wait *w = NULL;
	struct sbx_err err;
	int n = 0;

	sb = port_sandbox(m, id, port, &err);
	if (sb && port == sb->port)
		port = 0;
	if (sb && !(w = calloc(1, sizeof(*w))))
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	if (w)
		n = snprintf(w->path, sizeof(w->path), port ? "%s/port-%u.sock" : "%s/port.sock",
		             sb->dir, port);
	if (w && (n < 0 || (size_t)n >= sizeof(w->path))) {
		sbx_fail(&err, SBX_INTERNAL, -ENAMETOOLONG,
		         "sandbox %s's port socket path is too long for a Unix socket: give "
		         "huskd a shorter --data-dir",
		         id);
		free(w);
		w = NULL;
	}
	if (!w) {
		fn(ctx, &err, NULL, 0);
		return;
	}
	w->fn = fn;
	w->ctx = ctx;
	w->sb = sb;
	w->port = port;
	sbx_hold(sb);
	sbx_when_ready(sb, port_ready, w);
}

void sbx_port_touch(struct sbx_mgr *m, const char *id)
{
	struct sandbox *sb = sbx_find(m, id);

	if (sb)
		sbx_touch(sb);
}
