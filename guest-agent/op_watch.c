// SPDX-License-Identifier: MIT
/*
 * file.watch: a folder's changes as they happen (inotify), as DATA frames
 * of JSON lines - first {"start":true} once the watch is set, then
 * {"name": path below the folder, "type": create|write|remove|rename|chmod}
 * - until a CANCEL (RESULT {"dropped": n}) or the folder goes (ERROR
 * not_found). With "recursive" the folders below are watched too, new ones
 * as they appear. While the connection's queue is past OUTQ_HIGH events
 * are dropped and counted, never queued without end.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent.h"
#include "evloop.h"
#include "proto.h"

/* Folders one recursive watch follows at most. */
#define WATCH_DIRS_MAX 4096
#define WATCH_MASK                                                                     \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
	 IN_DELETE_SELF | IN_MOVE_SELF)

struct watch_dir {
	int wd;
	char *rel; /* "" for the folder itself */
};

struct watch {
	struct req r;
	struct agent *a;
	int fd;
	bool added; /* fd is in the loop */
	bool recursive;
	char *root;
	struct watch_dir *dirs;
	size_t n;
	unsigned long long dropped;
};

static void watch_free(struct watch *w)
{
	if (w->added)
		evloop_del(w->a->loop, w->fd);
	if (w->fd >= 0)
		close(w->fd);
	for (size_t i = 0; i < w->n; i++)
		free(w->dirs[i].rel);
	free(w->dirs);
	free(w->root);
	free(w);
}

static int add_dir(struct watch *w, const char *rel)
{
	char path[4096];
	struct watch_dir *d;
	int wd;

	if (w->n >= WATCH_DIRS_MAX)
		return -ENOSPC;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", w->root, *rel ? "/" : "", rel) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	wd = inotify_add_watch(w->fd, path, WATCH_MASK | (*rel ? 0 : IN_ONLYDIR));
	if (wd < 0)
		return -errno;
	d = realloc(w->dirs, (w->n + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	w->dirs = d;
	w->dirs[w->n].wd = wd;
	w->dirs[w->n].rel = strdup(rel);
	if (!w->dirs[w->n].rel)
		return -ENOMEM;
	w->n++;
	return 0;
}

static struct watch *walking; /* nftw has no context argument */

static int walk_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	if (flag != FTW_D || ftw->level == 0)
		return 0;
	return add_dir(walking, path + strlen(walking->root) + 1) == -ENOSPC;
}

static const char *dir_of(const struct watch *w, int wd)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->dirs[i].wd == wd)
			return w->dirs[i].rel;
	return NULL;
}

static void send_line(struct watch *w, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) : 0;

	json_decref(j);
	if (!s)
		return;
	if (conn_queued(w->r.conn) > OUTQ_HIGH) {
		w->dropped++;
	} else {
		s[n] = '\n'; /* over the NUL: the line is sent with its length */
		conn_send(w->r.conn, FRAME_DATA, 0, w->r.id, s, n + 1);
	}
	free(s);
}

static void watch_end(struct watch *w, int err)
{
	req_unregister(&w->r);
	if (err)
		conn_send_error(w->r.conn, w->r.id, errno_code(err), "cannot watch '%s': %s",
		                w->root, strerror(err));
	else
		conn_send_json(w->r.conn, FRAME_RESULT, w->r.id,
		               json_pack("{s:I}", "dropped", (json_int_t)w->dropped));
	watch_free(w);
}

static const char *event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return "create";
	if (mask & IN_MODIFY)
		return "write";
	if (mask & IN_DELETE)
		return "remove";
	if (mask & IN_MOVED_FROM)
		return "rename";
	if (mask & IN_ATTRIB)
		return "chmod";
	return NULL;
}

static void watch_event(void *ctx, uint32_t events)
{
	struct watch *w = ctx;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	char name[4096];
	ssize_t len;

	(void)events;
	while ((len = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			const char *dir = dir_of(w, ev->wd), *type = event_type(ev->mask);

			p += sizeof(*ev) + ev->len;
			if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && dir && !*dir) {
				watch_end(w, ENOENT); /* the folder itself went */
				return;
			}
			if (!dir || !type || !ev->len)
				continue;
			snprintf(name, sizeof(name), "%s%s%s", dir, *dir ? "/" : "", ev->name);
			if (w->recursive && (ev->mask & IN_ISDIR) &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO)) && add_dir(w, name) == -ENOSPC)
				w->dropped++;
			send_line(w, json_pack("{s:s, s:s}", "name", name, "type", type));
		}
	}
}

static void watch_frame(struct req *r, const struct frame *f)
{
	if (f->type == FRAME_CANCEL)
		watch_end((struct watch *)r, 0);
}

static void watch_conn_lost(struct req *r)
{
	watch_free((struct watch *)r);
}

static const struct req_ops watch_ops = {.on_frame = watch_frame, .on_conn_lost = watch_conn_lost};

void op_watch(struct conn *c, uint32_t id, json_t *req)
{
	const char *path = json_string_value(json_object_get(req, "path"));
	struct watch *w;
	int ret;

	if (!path || *path != '/') {
		conn_send_error(c, id, "bad_request", "path must be an absolute folder");
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->root = strdup(path))) {
		free(w);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	w->a = conn_agent(c);
	w->recursive = json_is_true(json_object_get(req, "recursive"));
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ret = w->fd < 0 ? -errno : add_dir(w, "");
	if (!ret && w->recursive) {
		walking = w;
		if (nftw(path, walk_one, 16, FTW_PHYS) != 0)
			ret = -ENOSPC;
	}
	if (!ret && !(ret = evloop_add(w->a->loop, w->fd, EPOLLIN, watch_event, w)))
		w->added = true;
	if (ret) {
		conn_send_error(c, id, errno_code(-ret), "cannot watch '%s': %s", path,
		                strerror(-ret));
		watch_free(w);
		return;
	}
	req_register(c, &w->r, id, &watch_ops);
	send_line(w, json_pack("{s:b}", "start", 1));
}
