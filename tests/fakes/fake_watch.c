// SPDX-License-Identifier: MIT
/*
 * file.watch, as husk-agent answers it (guest-agent/PROTOCOL.md): a start
 * line, then a line per change the fake's own file requests make below the
 * folder (file.write: create or write; file.mkdir: create; file.rm and
 * file.rmdir: remove) until a CANCEL. Commands change no files here, so
 * they make no events.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct fwatch {
	struct req r;
	struct fwatch *next;
	char *dir;
	bool recursive;
};

/* One guest per process: its watches. */
static struct fwatch *watches;

static void unlink_watch(struct fwatch *w)
{
	for (struct fwatch **pp = &watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			return;
		}
}

static void send_line(struct fwatch *w, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	size_t n = s ? strlen(s) : 0;

	json_decref(j);
	if (!s)
		return;
	s[n] = '\n';
	conn_send(w->r.c, FRAME_DATA, 0, w->r.id, s, n + 1);
	free(s);
}

static void watch_frame(struct req *r, const struct frame *f)
{
	struct fwatch *w = (struct fwatch *)r;

	if (f->type != FRAME_CANCEL)
		return;
	unlink_watch(w);
	req_unregister(r);
	conn_send_json(r->c, FRAME_RESULT, r->id, json_pack("{s:i}", "dropped", 0));
	free(w->dir);
	free(w);
}

static void watch_drop(struct req *r)
{
	struct fwatch *w = (struct fwatch *)r;

	unlink_watch(w);
	free(w->dir);
	free(w);
}

static const struct req_ops watch_ops = {.on_frame = watch_frame, .drop = watch_drop};

void watch_start(struct conn *c, uint32_t id, const char *path, json_t *req)
{
	struct guest *g = &conn_fake(c)->g;
	struct fwatch *w;

	if (!fs_is_dir(g, path)) {
		conn_send_error(c, id, fs_is_file(g, path) ? "not_a_directory" : "not_found",
		                "cannot watch '%s'", path);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->dir = strdup(path))) {
		free(w);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	w->recursive = json_is_true(json_object_get(req, "recursive"));
	w->next = watches;
	watches = w;
	req_register(c, &w->r, id, &watch_ops);
	send_line(w, json_pack("{s:b}", "start", 1));
}

void watch_emit(const char *path, const char *type)
{
	for (struct fwatch *w = watches; w; w = w->next) {
		size_t n = strlen(w->dir);
		const char *rel = path + n + (n > 1);

		if (!fs_below(path, w->dir) || !*rel || (!w->recursive && strchr(rel, '/')))
			continue;
		send_line(w, json_pack("{s:s, s:s}", "name", rel, "type", type));
	}
}
