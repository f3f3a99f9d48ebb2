// SPDX-License-Identifier: MIT
/*
 * A folder's changes as they happen (E2B's WatchDir, API.md §11.2): the
 * agent's file.watch held open on the sandbox's session, its JSON lines
 * handed to the caller one by one until the caller closes it, the folder
 * goes or the sandbox stops (a pause ends it, as it ends the guest's
 * processes). Watching does not count as use: it keeps no sandbox awake.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "sbx_int.h"

/* A line the agent sends is at most this long (a name is at most PATH_MAX). */
#define WATCH_LINE_MAX 8192

struct sbx_watch {
	struct sandbox *sb;
	const struct sbx_watch_ops *ops;
	void *arg;
	json_t *req;
	struct agent_call *call;
	char line[WATCH_LINE_MAX];
	size_t len;
	bool detached, started;
};

static void watch_free(struct sbx_watch *w)
{
	json_decref(w->req);
	sbx_drop(w->sb);
	free(w);
}

static bool watch_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct sbx_watch *w = arg;
	const char *s = p;
	json_t *ev;

	if (type != FRAME_DATA || w->detached)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '\n') {
			if (w->len < sizeof(w->line) - 1)
				w->line[w->len++] = s[i];
			continue;
		}
		w->line[w->len] = '\0';
		ev = json_loads(w->line, 0, NULL);
		w->len = 0;
		if (json_is_true(json_object_get(ev, "start")))
			w->ops->started(w->arg);
		else if (json_is_string(json_object_get(ev, "name")))
			w->ops->event(w->arg, json_string_value(json_object_get(ev, "name")),
			              json_string_value(json_object_get(ev, "type")) ?: "");
		json_decref(ev);
		if (w->detached)
			break;
	}
	return false;
}

static void watch_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct sbx_watch *w = arg;
	struct sbx_err e;

	w->call = NULL;
	if (!w->detached) {
		if (rc > 0) {
			sbx_agent_error(reply, &e, "the folder cannot be watched");
			err = &e;
		}
		w->ops->ended(w->arg, rc ? err : NULL);
	}
	watch_free(w);
}

static const struct sbx_call_ops watch_call_ops = {
	.data = watch_data, .done = watch_done, .no_deadline = true};

static void watch_go(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct sbx_watch *w = arg;
	struct agent_call *call;

	(void)sb;
	if (err || w->detached) {
		if (!w->detached)
			w->ops->ended(w->arg, err);
		watch_free(w);
		return;
	}
	w->started = true;
	call = sbx_call_now(w->sb, w->req, NULL, &watch_call_ops, w);
	if (call)
		w->call = call;
}

int sbx_watch_start(struct sbx_mgr *m, const char *id, const char *path, bool recursive,
                    const struct sbx_watch_ops *ops, void *arg, struct sbx_watch **out,
                    struct sbx_err *err)
{
	struct sandbox *sb;
	struct sbx_watch *w;
	char abs[4096];

	*out = NULL;
	if (!path || !*path)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "path must name a folder");
	sb = sbx_lookup(m, id, err);
	if (!sb)
		return -ENOENT;
	workspace_path(sbx_workspace(sb), path, abs, sizeof(abs));
	w = calloc(1, sizeof(*w));
	if (!w || !(w->req = json_pack("{sssssb}", "op", "file.watch", "path", abs, "recursive",
	                               recursive))) {
		free(w);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	w->sb = sb;
	w->ops = ops;
	w->arg = arg;
	sbx_hold(sb);
	*out = w;
	sbx_when_ready(sb, watch_go, w);
	return 0;
}

void sbx_watch_close(struct sbx_watch *w)
{
	w->detached = true;
	if (w->call)
		agent_call_cancel(w->call); /* its done() frees it */
					    /* Not started yet: watch_go frees it. */
}
