// SPDX-License-Identifier: MIT
/*
 * GET /streams/{id}: an execution's output, from its first byte, following
 * it live until it ends. Any number of readers; each reads the stream's file
 * and is paced by its own connection's send queue, never by buffering more.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "outbuf.h"
#include "r_int.h"

/* A reader's connection may hold this much unsent before we wait for it to drain. */
#define READER_QUEUE_MAX (256 * 1024)
#define READ_CHUNK (64 * 1024)

struct reader {
	struct outbuf *ob; /* while its command runs; NULL: the file is all there is */
	struct http_req *r;
	int fd;
	uint64_t off;
};

static void reader_free(struct reader *rd)
{
	if (rd->ob) {
		outbuf_unwatch(rd->ob, rd);
		outbuf_unref(rd->ob);
	}
	close(rd->fd);
	free(rd);
}

static void reader_feed(void *arg);

static void reader_drained(struct http_req *r, void *arg)
{
	(void)r;
	reader_feed(arg);
}

/* The client went away: forget it, and give the request back. */
static void reader_gone(struct http_req *r, void *arg)
{
	reader_free(arg);
	http_stream_end(r);
}

static void reader_feed(void *arg)
{
	struct reader *rd = arg;
	char buf[READ_CHUNK];

	while (http_stream_queued(rd->r) < READER_QUEUE_MAX) {
		ssize_t n = pread(rd->fd, buf, sizeof(buf), (off_t)rd->off);

		if (n > 0) {
			if (http_stream_write(rd->r, buf, (size_t)n) < 0)
				return; /* reader_gone() follows */
			rd->off += (uint64_t)n;
			continue;
		}
		if (n < 0 || !rd->ob || outbuf_closed(rd->ob)) {
			struct http_req *r = rd->r;
			bool failed = n < 0 || (rd->ob && outbuf_failed(rd->ob));

			http_on_close(r, NULL, NULL);
			http_on_drain(r, NULL, NULL);
			reader_free(rd);
			/* An incomplete stream is cut, not ended: the client must not take it
			 * whole. */
			if (failed)
				http_stream_abort(r);
			else
				http_stream_end(r);
		}
		return; /* caught up with a live stream: its next append calls us again */
	}
	http_on_drain(rd->r, reader_drained, rd);
}

void stream_live(struct http_req *r, int fd, struct outbuf *live, const char *content_type)
{
	struct reader *rd = calloc(1, sizeof(*rd));
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (!rd || copy < 0 || (live && outbuf_watch(live, reader_feed, rd))) {
		free(rd);
		if (copy >= 0)
			close(copy);
		http_respond(r, 503, "text/plain", "out of memory\n", 14);
		return;
	}
	*rd = (struct reader){.ob = live, .r = r, .fd = copy};
	if (live)
		outbuf_ref(live);
	http_stream_begin(r, 200, content_type);
	http_on_close(r, reader_gone, rd);
	reader_feed(rd);
}

void stream_file(struct http_req *r, int fd, const char *content_type)
{
	stream_live(r, fd, NULL, content_type);
}

void stream_serve(struct routes *rt, struct http_req *r, const char *sid)
{
	struct outbuf *live = NULL;
	struct reader *rd;
	char path[4200];
	int fd;

	if (sbx_stream(rt->m, sid, &live, path, sizeof(path)) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		http_respond(r, 404, "text/plain", "no such stream\n", 15);
		return;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd || (live && outbuf_watch(live, reader_feed, rd))) {
		free(rd);
		close(fd);
		http_respond(r, 503, "text/plain", "out of memory\n", 14);
		return;
	}
	*rd = (struct reader){.ob = live, .r = r, .fd = fd};
	if (live)
		outbuf_ref(live);
	http_stream_begin(r, 200, "application/octet-stream");
	http_on_close(r, reader_gone, rd);
	reader_feed(rd);
}

/* ---- user streams: POST /streams, PUT /streams/ID ---- */

/* The client's stdin flow reads a top-level id (no envelope): {"id", "name", "url", ...}. */
ROUTE(r_stream_create)
{
	struct routes *rt = ctx;
	json_t *body = NULL, *out = NULL, *name;
	struct sbx_err err;
	char base[512];
	size_t len;

	(void)p;
	http_body(r, &len);
	body = len ? body_object(r) : json_object();
	if (!body)
		return;
	name = json_object_get(body, "name");
	if (name && !json_is_string(name)) {
		api_error(r, 400, "BAD_REQUEST", "name must be a string");
	} else if (sbx_streams_create(rt->m, caller_org(r), json_string_value(name), &out, &err)) {
		reply_error(r, &err, S_STREAM);
	} else {
		if (base_url(rt, r, base, sizeof(base)) == 0) {
			json_object_set_new(
				out, "url",
				json_sprintf("%s/streams/%s", base,
			                     json_string_value(json_object_get(out, "id"))));
			stream_sign_field(rt, out, "url");
		}
		json_object_set_new(out, "success", json_true());
		http_respond_json(r, 201, out);
	}
	json_decref(body);
}

struct put {
	struct outbuf *ob;
	uint64_t bytes;
};

/* The writer is done: readers (and a command's stdin) see the stream's end. */
static void put_finish(struct http_req *r, struct put *pt)
{
	http_on_close(r, NULL, NULL);
	outbuf_close(pt->ob);
	outbuf_unref(pt->ob);
	free(pt);
}

static void put_data(struct http_req *r, const void *data, size_t len, void *arg)
{
	struct put *pt = arg;

	outbuf_append(pt->ob, data, len);
	pt->bytes += len;
	if (!outbuf_truncated(pt->ob))
		return;
	api_error(r, 413, "PAYLOAD_TOO_LARGE",
	          "stream %s took its most bytes (huskd --output-limit); it ends there, and the "
	          "rest of this body was dropped",
	          outbuf_id(pt->ob));
	put_finish(r, pt);
}

static void put_end(struct http_req *r, const void *data, size_t len, void *arg)
{
	struct put *pt = arg;

	(void)data;
	(void)len;
	api_ok(r, 200,
	       json_pack("{sssI}", "id", outbuf_id(pt->ob), "bytes", (json_int_t)pt->bytes));
	put_finish(r, pt);
}

/* The writer went away: the stream ends where its bytes stopped. */
static void put_gone(struct http_req *r, void *arg)
{
	put_finish(r, arg);
	http_respond(r, 400, "text/plain", "", 0);
}

ROUTE(r_stream_put)
{
	struct routes *rt = ctx;
	struct put *pt = calloc(1, sizeof(*pt));
	struct sbx_err err;

	if (!pt) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	if (sbx_streams_take(rt->m, caller_org(r), p[0], &pt->ob, &err)) {
		free(pt);
		reply_error(r, &err, S_STREAM);
		return;
	}
	http_on_close(r, put_gone, pt);
	http_body_read(r, put_data, put_end, pt);
}
