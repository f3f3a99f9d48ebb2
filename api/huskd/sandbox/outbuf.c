// SPDX-License-Identifier: MIT
/* Captured output streams: a file per stream, watched by its readers. */
#include "outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct watch {
	void (*fn)(void *arg);
	void *arg;
	struct watch *next;
};

struct outbuf {
	char path[4200];
	char id[64];
	int fd;
	uint64_t len, limit;
	bool truncated, closed, failed;
	unsigned refs;
	struct watch *watches;
};

int outbuf_file(const char *dir, const char *id, char *out, size_t outlen)
{
	/* Ids are ours ([a-z0-9_]); anything else never names a file. */
	if (!*id || strlen(id) >= 64)
		return -ENOENT;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			return -ENOENT;
	if ((size_t)snprintf(out, outlen, "%s/%s", dir, id) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

static int outbuf_open(const char *dir, const char *id, uint64_t limit, bool append,
                       struct outbuf **out);

int outbuf_create(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
{
	return outbuf_open(dir, id, limit, false, out);
}

int outbuf_reopen(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
{
	return outbuf_open(dir, id, limit, true, out);
}

int outbuf_create_anon(const char *dir, uint64_t limit, struct outbuf **out, int *read_fd)
{
	struct outbuf *ob = calloc(1, sizeof(*ob));
	int rc;

	if (!ob)
		return -ENOMEM;
	ob->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	*read_fd = ob->fd < 0 ? -1 : fcntl(ob->fd, F_DUPFD_CLOEXEC, 0);
	if (*read_fd < 0) {
		rc = -errno;
		if (ob->fd >= 0)
			close(ob->fd);
		free(ob);
		return rc;
	}
	ob->limit = limit;
	ob->refs = 1;
	*out = ob;
	return 0;
}

void outbuf_fail(struct outbuf *ob)
{
	ob->failed = true;
	outbuf_close(ob);
}

bool outbuf_failed(const struct outbuf *ob)
{
	return ob->failed;
}

uint64_t outbuf_len(const struct outbuf *ob)
{
	return ob->len;
}

static int outbuf_open(const char *dir, const char *id, uint64_t limit, bool append,
                       struct outbuf **out)
{
	struct stat st;
	struct outbuf *ob = calloc(1, sizeof(*ob));
	int rc;

	if (!ob)
		return -ENOMEM;
	rc = outbuf_file(dir, id, ob->path, sizeof(ob->path));
	if (rc) {
		free(ob);
		return rc == -ENOENT ? -EINVAL : rc;
	}
	snprintf(ob->id, sizeof(ob->id), "%s", id);
	ob->fd = open(ob->path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC),
	              0600);
	if (ob->fd < 0 || fstat(ob->fd, &st)) {
		rc = -errno;
		if (ob->fd >= 0)
			close(ob->fd);
		free(ob);
		return rc;
	}
	ob->len = (uint64_t)st.st_size;
	ob->truncated = ob->len >= limit;
	ob->limit = limit;
	ob->refs = 1;
	*out = ob;
	return 0;
}

static void tell(struct outbuf *ob)
{
	struct watch *w, *next;

	/* A watcher may unwatch itself (or others) from its callback. */
	outbuf_ref(ob);
	for (w = ob->watches; w; w = next) {
		next = w->next;
		w->fn(w->arg);
	}
	outbuf_unref(ob);
}

void outbuf_append(struct outbuf *ob, const void *data, size_t len)
{
	size_t keep = len;

	if (ob->closed)
		return;
	if (ob->len + keep > ob->limit) {
		keep = ob->len < ob->limit ? (size_t)(ob->limit - ob->len) : 0;
		ob->truncated = true;
	}
	if (keep && write(ob->fd, data, keep) == (ssize_t)keep)
		ob->len += keep;
	else if (keep)
		ob->truncated = true; /* the host's disk is full: say so rather than fail */
	if (keep)
		tell(ob);
}

/* The file is complete: closed (readers see its end through the execution's record). */
static void finish(struct outbuf *ob)
{
	ob->closed = true;
	close(ob->fd);
	ob->fd = -1;
}

void outbuf_close(struct outbuf *ob)
{
	if (ob->closed)
		return;
	finish(ob);
	tell(ob);
}

bool outbuf_closed(const struct outbuf *ob)
{
	return ob->closed;
}

bool outbuf_truncated(const struct outbuf *ob)
{
	return ob->truncated;
}

const char *outbuf_id(const struct outbuf *ob)
{
	return ob->id;
}

const char *outbuf_path(const struct outbuf *ob)
{
	return ob->path;
}

void outbuf_ref(struct outbuf *ob)
{
	ob->refs++;
}

void outbuf_unref(struct outbuf *ob)
{
	if (!ob || --ob->refs)
		return;
	/* Readers hold references: with none left, nobody watches. */
	if (!ob->closed)
		finish(ob);
	while (ob->watches) {
		struct watch *w = ob->watches;

		ob->watches = w->next;
		free(w);
	}
	free(ob);
}

int outbuf_watch(struct outbuf *ob, void (*fn)(void *arg), void *arg)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct watch){.fn = fn, .arg = arg, .next = ob->watches};
	ob->watches = w;
	return 0;
}

void outbuf_unwatch(struct outbuf *ob, void *arg)
{
	for (struct watch **pp = &ob->watches; *pp; pp = &(*pp)->next)
		if ((*pp)->arg == arg) {
			struct watch *w = *pp;

			*pp = w->next;
			free(w);
			return;
		}
}
