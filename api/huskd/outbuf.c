// SPDX-License-Identifier: MIT
/* Captured output streams: a file per stream, replayed and followed by HTTP readers. */
#include "outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http.h"

/* A reader's connection may hold this much unsent before we wait for it to drain. */
#define READER_QUEUE_MAX (256 * 1024)
#define READ_CHUNK (64 * 1024)

struct reader {
	struct outbuf *ob; /* NULL: a finished stream served from its file alone */
	struct http_req *r;
	int fd;
	uint64_t off;
	struct reader *next;
};

struct outbuf {
	char *path;
	char id[64];
	int fd;
	uint64_t len, limit;
	bool truncated, closed;
	struct reader *readers;
};

static void reader_unlink(struct reader *rd)
{
	if (rd->ob) {
		struct reader **pp = &rd->ob->readers;
		while (*pp && *pp != rd)
			pp = &(*pp)->next;
		if (*pp)
			*pp = rd->next;
	}
	close(rd->fd);
	free(rd);
}

static void reader_feed(struct reader *rd);

static void reader_drained(struct http_req *r, void *arg)
{
	(void)r;
	reader_feed(arg);
}

/* The client went away: forget it, and give the request back. */
static void reader_gone(struct http_req *r, void *arg)
{
	reader_unlink(arg);
	http_stream_end(r);
}

static void reader_feed(struct reader *rd)
{
	char buf[READ_CHUNK];

	while (http_stream_queued(rd->r) < READER_QUEUE_MAX) {
		ssize_t n = pread(rd->fd, buf, sizeof(buf), (off_t)rd->off);

		if (n > 0) {
			if (http_stream_write(rd->r, buf, (size_t)n) < 0)
				return; /* reader_gone() follows */
			rd->off += (uint64_t)n;
			continue;
		}
		if (n < 0 || !rd->ob || rd->ob->closed) {
			struct http_req *r = rd->r;
			http_on_close(r, NULL, NULL);
			reader_unlink(rd);
			http_stream_end(r);
		}
		return; /* caught up with a live stream: outbuf_append() feeds it again */
	}
	http_on_drain(rd->r, reader_drained, rd);
}

static void reader_start(struct outbuf *ob, int fd, struct http_req *r)
{
	struct reader *rd = calloc(1, sizeof(*rd));

	if (!rd) {
		close(fd);
		http_respond(r, 503, "text/plain", "out of memory\n", 14);
		return;
	}
	*rd = (struct reader){.ob = ob, .r = r, .fd = fd};
	if (ob) {
		rd->next = ob->readers;
		ob->readers = rd;
	}
	http_stream_begin(r, 200, "application/octet-stream");
	http_on_close(r, reader_gone, rd);
	reader_feed(rd);
}

static char *stream_path(const char *dir, const char *id)
{
	char *p;

	/* Ids are ours ([a-z0-9_]); anything else never names a file. */
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			return NULL;
	if (!*id || asprintf(&p, "%s/%s", dir, id) < 0)
		return NULL;
	return p;
}

int outbuf_create(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
{
	struct outbuf *ob = calloc(1, sizeof(*ob));

	if (!ob)
		return -ENOMEM;
	ob->path = stream_path(dir, id);
	if (!ob->path || strlen(id) >= sizeof(ob->id)) {
		free(ob->path);
		free(ob);
		return -EINVAL;
	}
	snprintf(ob->id, sizeof(ob->id), "%s", id);
	ob->fd = open(ob->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (ob->fd < 0) {
		int e = errno;
		free(ob->path);
		free(ob);
		return -e;
	}
	ob->limit = limit;
	*out = ob;
	return 0;
}

void outbuf_append(struct outbuf *ob, const void *data, size_t len)
{
	size_t keep = len;
	struct reader *rd, *next;

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
	for (rd = ob->readers; rd; rd = next) {
		next = rd->next;
		reader_feed(rd);
	}
}

void outbuf_close(struct outbuf *ob)
{
	struct reader *rd, *next;
	char *done;

	if (ob->closed)
		return;
	ob->closed = true;
	close(ob->fd);
	ob->fd = -1;
	/* A stream file without its ".done" twin was cut off by a huskd crash. */
	if (asprintf(&done, "%s.done", ob->path) >= 0) {
		int fd = open(done, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
		free(done);
	}
	for (rd = ob->readers; rd; rd = next) {
		next = rd->next;
		reader_feed(rd);
	}
}

bool outbuf_truncated(const struct outbuf *ob)
{
	return ob->truncated;
}

const char *outbuf_id(const struct outbuf *ob)
{
	return ob->id;
}

void outbuf_release(struct outbuf *ob)
{
	if (!ob)
		return;
	outbuf_close(ob);
	/* Readers still catching up keep reading the file; they no longer need ob. */
	for (struct reader *rd = ob->readers; rd; rd = rd->next)
		rd->ob = NULL;
	free(ob->path);
	free(ob);
}

void outbuf_serve(struct outbuf *ob, struct http_req *r)
{
	int fd = open(ob->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		http_respond(r, 500, "text/plain", "stream file missing\n", 20);
		return;
	}
	reader_start(ob, fd, r);
}

int outbuf_serve_file(const char *dir, const char *id, struct http_req *r)
{
	char *path = stream_path(dir, id);
	int fd;

	if (!path)
		return -ENOENT;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -ENOENT;
	reader_start(NULL, fd, r);
	return 0;
}
