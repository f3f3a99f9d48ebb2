// SPDX-License-Identifier: MIT
/*
 * Streamed request bodies (http_body_stream / http_body_read) in the HTTP
 * core without sockets: the handler runs at the head, bytes reach it as they
 * arrive (chunked or by length, past the body limit), the end is told once,
 * and an early answer or a vanished client leaves nothing half-parsed.
 */
#include <stdio.h>
#include <string.h>

#include "http_conn.h"
#include "test_http_fake.h"
#include "unit.h"

static struct {
	struct http_req *r;
	char got[256];
	size_t got_len;
	int calls, pieces, ends, closes;
	bool read_later; /* the handler does not take the body at once */
	bool answer_now; /* the handler answers before the body */
} bs;

static int admit(struct http_req *r, void *ctx, struct http_refusal *out)
{
	(void)ctx;
	(void)out;
	if (!strncmp(http_path(r), "/in", 3))
		http_body_stream(r);
	return 0;
}

static void on_data(struct http_req *r, const void *p, size_t len, void *arg)
{
	(void)r;
	(void)arg;
	if (bs.got_len + len < sizeof(bs.got)) {
		memcpy(bs.got + bs.got_len, p, len);
		bs.got_len += len;
	}
	bs.pieces++;
}

static void on_end(struct http_req *r, const void *p, size_t len, void *arg)
{
	char out[300];
	int n;

	(void)p;
	(void)len;
	(void)arg;
	bs.ends++;
	n = snprintf(out, sizeof(out), "got %zu |%.*s|", bs.got_len, (int)bs.got_len, bs.got);
	http_respond(r, 200, "text/plain", out, (size_t)n);
}

/* The client is gone: the request is still ours to end (answering frees it). */
static void on_close(struct http_req *r, void *arg)
{
	(void)arg;
	bs.closes++;
	http_respond(r, 500, "text/plain", "gone", 4);
}

static void handler(struct http_req *r, void *ctx)
{
	size_t len;

	(void)ctx;
	bs.calls++;
	bs.r = r;
	if (strncmp(http_path(r), "/in", 3)) {
		http_body(r, &len);
		http_respond(r, 200, "text/plain", "plain", 5);
		return;
	}
	http_on_close(r, on_close, NULL);
	if (bs.answer_now) {
		http_respond(r, 404, "text/plain", "no", 2);
		return;
	}
	if (!bs.read_later)
		http_body_read(r, on_data, on_end, NULL);
}

static void start(struct fake_conn *f, struct http_limits *lim, size_t max_body)
{
	struct http_config cfg = {.admit = admit, .max_body_bytes = max_body};

	memset(&bs, 0, sizeof(bs));
	http_limits_init(lim, &cfg);
	fake_init(f, lim, handler, NULL);
}

UNIT_TEST(http_body_streamed_chunked)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 8);
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 0);
	/* The handler runs with nothing of the body in, and no request timer runs. */
	CHECK(bs.calls == 1 && bs.pieces == 0 && f.c.timer_mode != T_REQUEST);
	CHECK(fake_feeds(&f, "5\r\nhello\r\n") == 0);
	CHECK(bs.got_len == 5 && bs.ends == 0 && f.out_len == 0);
	/* Past the 8-byte body limit: a streamed body's reader keeps its own. */
	CHECK(fake_feeds(&f, "7\r\n, world\r\n0\r\n\r\n") == 0);
	CHECK(bs.ends == 1 && strstr(f.out, "got 12 |hello, world|"));
	/* The connection goes on to the next request. */
	CHECK(fake_feeds(&f, "GET /x HTTP/1.1\r\n\r\n") == 0);
	CHECK(bs.calls == 2 && strstr(f.out, "plain") && f.c.state == C_IDLE);
	fake_free(&f);
}

UNIT_TEST(http_body_streamed_by_length_and_empty)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 0);
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nContent-Length: 6\r\n\r\nabc") == 0);
	CHECK(bs.got_len == 3 && bs.ends == 0);
	CHECK(fake_feeds(&f, "defGET /in HTTP/1.1\r\n\r\n") == 0);
	CHECK(strstr(f.out, "got 6 |abcdef|"));
	/* The pipelined one has no body: its end comes with nothing before it. */
	CHECK(bs.calls == 2 && bs.ends == 2 && bs.pieces == 2 &&
	      strstr(strstr(f.out, "got 6 |abcdef|") + 1, "got 6 |abcdef|"));
	fake_free(&f);
}

UNIT_TEST(http_body_streamed_waits_for_its_reader)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 0);
	bs.read_later = true;
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz") == 0);
	CHECK(bs.calls == 1 && bs.pieces == 0);
	http_body_read(bs.r, on_data, on_end, NULL);
	CHECK(bs.pieces == 0); /* never inside the call */
	CHECK(fake_run(&f) == 0);
	CHECK(bs.ends == 1 && strstr(f.out, "got 4 |wxyz|"));
	fake_free(&f);
}

UNIT_TEST(http_body_streamed_answered_early_closes)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 0);
	bs.answer_now = true;
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nContent-Length: 100\r\n\r\npart") == 0);
	CHECK(strstr(f.out, "HTTP/1.1 404") && strstr(f.out, "Connection: close"));
	/* The rest of the body is dropped, never taken as a request. */
	CHECK(fake_feeds(&f, "GET /x HTTP/1.1\r\n\r\n") == 0);
	CHECK(bs.calls == 1 && f.shut);
	fake_free(&f);
}

UNIT_TEST(http_body_streamed_client_gone)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 0);
	CHECK(fake_feeds(&f,
	                 "PUT /in HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n") ==
	      0);
	CHECK(bs.got_len == 3);
	http_conn_eof(&f.c, 0);
	CHECK(fake_run(&f) == 0);
	CHECK(bs.closes == 1 && bs.ends == 0 && f.closed);
	fake_free(&f);

	/* A body that breaks chunked framing: the same, never a reply to a half request. */
	start(&f, &lim, 0);
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 0);
	CHECK(bs.closes == 1 && bs.ends == 0 && f.closed);
	fake_free(&f);
}

UNIT_TEST(http_stream_abort_cuts_the_body)
{
	struct http_limits lim;
	struct fake_conn f = {0};
	struct http_req *r;

	start(&f, &lim, 0);
	bs.read_later = true;
	CHECK(fake_feeds(&f, "GET /in HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n") == 0);
	r = bs.r;
	http_on_close(r, NULL, NULL);
	http_stream_begin(r, 200, "text/plain");
	CHECK(http_stream_write(r, "part", 4) == 0);
	http_stream_abort(r);
	CHECK(fake_run(&f) == 0);
	/* Closed after the bytes, without the terminating chunk; the next request never runs. */
	CHECK(f.closed && strstr(f.out, "4\r\npart\r\n") && !strstr(f.out, "0\r\n\r\n"));
	CHECK(bs.calls == 1 && bs.closes == 0);
	fake_free(&f);
}

UNIT_TEST(http_body_streamed_paused_by_its_reader)
{
	struct http_limits lim;
	struct fake_conn f = {0};

	start(&f, &lim, 0);
	CHECK(fake_feeds(&f, "PUT /in HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n") ==
	      0);
	CHECK(bs.got_len == 2);
	http_body_pause(bs.r, true);
	CHECK(f.paused);
	/* What still comes waits, unread by the reader, until it resumes. */
	CHECK(fake_feeds(&f, "2\r\ncd\r\n0\r\n\r\n") == 0);
	CHECK(bs.got_len == 2 && bs.ends == 0);
	http_body_pause(bs.r, false);
	CHECK(fake_run(&f) == 0);
	CHECK(bs.got_len == 4 && bs.ends == 1 && strstr(f.out, "got 4 |abcd|") && !f.paused);
	fake_free(&f);
}
