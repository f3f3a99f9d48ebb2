// SPDX-License-Identifier: MIT
/*
 * The HTTP core driven without sockets (test_http_fake.h): keep-alive,
 * pipelining, bodies, limits, timeouts, streams and clients that go away.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http_conn.h"
#include "test_http_fake.h"
#include "unit.h"

static struct {
	struct http_req *held[8];
	int nheld, calls, closes, drains;
} ts;

static void on_close_cb(struct http_req *r, void *arg)
{
	(void)r;
	(void)arg;
	ts.closes++;
}

static void on_drain_cb(struct http_req *r, void *arg)
{
	(void)r;
	(void)arg;
	ts.drains++;
}

/* /hold: answered later by the test; /stream: a stream left open; else an echo. */
static void handler(struct http_req *r, void *ctx)
{
	const char *path = http_path(r), *b;
	char out[512];
	size_t len;
	int n;

	(void)ctx;
	ts.calls++;
	if (!strcmp(path, "/hold") || !strcmp(path, "/stream")) {
		http_on_close(r, on_close_cb, NULL);
		ts.held[ts.nheld++] = r;
		if (!strcmp(path, "/stream")) {
			http_on_drain(r, on_drain_cb, NULL);
			http_stream_begin(r, 200, "text/plain");
		}
		return;
	}
	b = http_body(r, &len);
	n = snprintf(out, sizeof(out), "%s %s ?%s |%.*s|", http_method(r), path, http_query(r),
	             len > 64 ? 0 : (int)len, b);
	if (len > 64)
		n += snprintf(out + n, sizeof(out) - (size_t)n, "len=%zu", len);
	http_respond(r, 200, "text/plain", out, (size_t)n);
}

static void reset(void)
{
	memset(&ts, 0, sizeof(ts));
}

/* A fresh connection with the stream of request req open on it; NULL if it failed. */
static struct http_req *open_stream(struct fake_conn *f, const char *req)
{
	reset();
	fake_init(f, NULL, handler, NULL);
	return fake_feeds(f, req) == 0 ? ts.held[0] : NULL;
}

/* A fresh connection of the echo handler under cfg's limits (kept in *lim). */
static void start_with(struct fake_conn *f, struct http_limits *lim, const struct http_config *cfg)
{
	reset();
	http_limits_init(lim, cfg);
	fake_init(f, lim, handler, NULL);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; p && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

UNIT_TEST(http_keepalive_sequence)
{
	struct fake_conn f = {0};

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n") == 0);
	CHECK(strstr(f.out, "HTTP/1.1 200 OK\r\n") == f.out);
	CHECK(strstr(f.out, "Content-Type: text/plain\r\n"));
	CHECK(strstr(f.out, "Content-Length: 14\r\n"));
	CHECK(strstr(f.out, "\r\n\r\nGET /a ?x=1 ||"));
	CHECK(!strstr(f.out, "Connection: close"));
	CHECK(f.c.state == C_IDLE && f.c.timer_mode == T_IDLE && !f.shut);
	CHECK(fake_feeds(&f, "POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz") == 0);
	CHECK(strstr(f.out, "POST /b ? |xyz|"));
	CHECK(ts.calls == 2);
	/* Idle too long: closed without a word. */
	fake_clear(&f);
	CHECK(fake_fire(&f) == 0);
	CHECK(f.closed && f.out_len == 0);
	fake_free(&f);
}

UNIT_TEST(http_pipelined_answers_in_order)
{
	struct fake_conn f = {0};
	const char *a, *b;

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET /hold HTTP/1.1\r\n\r\nGET /second HTTP/1.1\r\n\r\n"
	                     "GET /third HTTP/1.1\r\n\r\n") == 0);
	/* The second waits until the first is answered. */
	CHECK(ts.calls == 1 && f.out_len == 0 && f.c.state == C_HANDLING);
	http_respond(ts.held[0], 200, "text/plain", "first", 5);
	CHECK(f.timer_ms == 0); /* moving on is deferred out of the call */
	CHECK(fake_run(&f) == 0);
	CHECK(ts.calls == 3);
	a = strstr(f.out, "first");
	b = strstr(f.out, "GET /second");
	CHECK(a && b && a < b && b < strstr(f.out, "GET /third"));
	CHECK(count(f.out, "HTTP/1.1 200") == 3);
	fake_free(&f);
}

UNIT_TEST(http_connection_close_and_http10)
{
	struct fake_conn f = {0};

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f,
	                 "GET /x HTTP/1.1\r\nConnection: close\r\n\r\nGET /y HTTP/1.1\r\n\r\n") ==
	      0);
	CHECK(strstr(f.out, "Connection: close\r\n") && ts.calls == 1);
	CHECK(f.shut && f.c.state == C_CLOSING && f.c.timer_mode == T_LINGER);
	CHECK(fake_fire(&f) == 0 && f.closed);
	fake_free(&f);

	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET /x HTTP/1.0\r\n\r\n") == 0);
	CHECK(strstr(f.out, "Connection: close\r\n") && f.shut);
	fake_free(&f);

	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == 0);
	CHECK(strstr(f.out, "Connection: keep-alive\r\n") && !f.shut && f.c.state == C_IDLE);
	fake_free(&f);
}

UNIT_TEST(http_chunked_body_bytewise)
{
	static const char req[] = "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nTrailer: t\r\n\r\n";
	struct fake_conn f = {0};

	reset();
	fake_init(&f, NULL, handler, NULL);
	for (size_t i = 0; i < sizeof(req) - 1; i++)
		CHECK(fake_feed(&f, req + i, 1) == 0);
	CHECK(strstr(f.out, "PUT /c ? |abcdefg|"));
	CHECK(f.c.state == C_IDLE);
	fake_free(&f);
}

UNIT_TEST(http_expect_continue)
{
	struct http_config cfg = {.max_body_bytes = 100};
	struct http_limits lim;
	struct fake_conn f = {0};

	start_with(&f, &lim, &cfg);
	CHECK(fake_feeds(&f,
	                 "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n") ==
	      0);
	CHECK(!strcmp(f.out, "HTTP/1.1 100 Continue\r\n\r\n") && ts.calls == 0);
	CHECK(fake_feeds(&f, "body") == 0);
	CHECK(strstr(f.out, "\r\n\r\nHTTP/1.1 200 OK\r\n") && strstr(f.out, "|body|"));
	fake_free(&f);

	/* Too big: 413 at once, no 100, the body never read. */
	reset();
	fake_init(&f, &lim, handler, NULL);
	CHECK(fake_feeds(
		      &f,
		      "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 101\r\n\r\n") ==
	      0);
	CHECK(strstr(f.out, "HTTP/1.1 413 Payload Too Large\r\n") == f.out);
	CHECK(strstr(f.out, "\"code\":\"PAYLOAD_TOO_LARGE\"") && strstr(f.out, "application/json"));
	CHECK(strstr(f.out, "Connection: close") && !strstr(f.out, "100 Continue") &&
	      ts.calls == 0);
	fake_free(&f);
}

UNIT_TEST(http_body_limits)
{
	struct http_config cfg = {.max_body_bytes = 10};
	struct http_limits lim;
	struct fake_conn f = {0};

	start_with(&f, &lim, &cfg);
	CHECK(fake_feeds(&f, "POST /l HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789") == 0);
	CHECK(strstr(f.out, "|0123456789|"));
	CHECK(fake_feeds(&f, "POST /l HTTP/1.1\r\nContent-Length: 11\r\n\r\n") == 0);
	CHECK(strstr(f.out, "413 Payload Too Large") && f.c.state == C_CLOSING);
	/* What the client still sends is drained and dropped. */
	CHECK(fake_feeds(&f, "0123456789a") == 0 && ts.calls == 1);
	fake_free(&f);

	/* Chunked: refused at the chunk that crosses the limit. */
	fake_init(&f, &lim, handler, NULL);
	CHECK(fake_feeds(&f, "POST /l HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	                     "8\r\n01234567\r\n8\r\n") == 0);
	CHECK(strstr(f.out, "413 Payload Too Large") && ts.calls == 1);
	fake_free(&f);
}

UNIT_TEST(http_head_limit_431)
{
	struct http_config cfg = {.max_header_bytes = 256};
	struct http_limits lim;
	struct fake_conn f = {0};
	char big[400];

	reset();
	http_limits_init(&lim, &cfg);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	fake_init(&f, &lim, handler, NULL);
	CHECK(fake_feeds(&f, "GET / HTTP/1.1\r\nX-Big: ") == 0);
	CHECK(fake_feeds(&f, big) == 0);
	CHECK(strstr(f.out, "HTTP/1.1 431 ") == f.out && strstr(f.out, "HEADERS_TOO_LARGE"));
	fake_free(&f);

	/* Many empty headers count too. */
	fake_init(&f, &lim, handler, NULL);
	CHECK(fake_feeds(&f, "GET / HTTP/1.1\r\n") == 0);
	for (int i = 0; i < 100 && !f.closed && !f.shut; i++)
		CHECK(fake_feeds(&f, "a:\r\n") == 0);
	CHECK(strstr(f.out, "HTTP/1.1 431 ") == f.out);
	fake_free(&f);
}

UNIT_TEST(http_malformed_400)
{
	static const char *const bad[] = {
		"GARBAGE\r\n\r\n",
		"GET /\x01 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
		"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"GET example.com HTTP/1.1\r\n\r\n",
	};
	struct fake_conn f = {0};

	reset();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_init(&f, NULL, handler, NULL);
		CHECK(fake_feeds(&f, bad[i]) == 0);
		CHECK(strstr(f.out, "HTTP/1.1 400 Bad Request\r\n") == f.out);
		CHECK(strstr(f.out, "\"success\":false,\"code\":\"INVALID_REQUEST\""));
		CHECK(strstr(f.out, "Connection: close") && ts.calls == 0);
		fake_free(&f);
	}
	/* A NUL inside a header value. */
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feed(&f, "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 24) == 0);
	CHECK(strstr(f.out, "HTTP/1.1 400 ") == f.out && ts.calls == 0);
	fake_free(&f);
	/* Not HTTP/1.x. */
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET / HTTP/2.0\r\n\r\n") == 0);
	CHECK(strstr(f.out, "HTTP/1.1 505 ") == f.out && ts.calls == 0);
	fake_free(&f);
}

UNIT_TEST(http_request_timeout)
{
	struct fake_conn f = {0};

	reset();
	/* A connection that never sends: closed silently. */
	fake_init(&f, NULL, handler, NULL);
	CHECK(f.c.timer_mode == T_REQUEST && f.timer_ms == 30000);
	CHECK(fake_fire(&f) == 0 && f.closed && f.out_len == 0);
	fake_free(&f);
	/* A partial request: 408. */
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET / HTTP/1.1\r\nHost: slow") == 0);
	CHECK(fake_fire(&f) == 0);
	CHECK(strstr(f.out, "HTTP/1.1 408 Request Timeout\r\n") == f.out &&
	      strstr(f.out, "REQUEST_TIMEOUT"));
	CHECK(f.shut && ts.calls == 0);
	fake_free(&f);
}

UNIT_TEST(http_client_gone_fires_on_close)
{
	struct fake_conn f = {0};

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET /hold HTTP/1.1\r\n\r\n") == 0);
	http_conn_eof(&f.c, 0);
	CHECK(ts.closes == 0); /* deferred out of the call */
	CHECK(fake_run(&f) == 0);
	CHECK(ts.closes == 1 && f.closed);
	/* The late answer is a no-op that frees the request (ASan checks). */
	http_respond(ts.held[0], 200, "text/plain", "late", 4);
	fake_free(&f);

	/* Answered before the EOF: the answer is still flushed. */
	fake_init(&f, NULL, handler, NULL);
	f.hold = true;
	CHECK(fake_feeds(&f, "GET /x HTTP/1.1\r\n\r\n") == 0);
	http_conn_eof(&f.c, 0);
	CHECK(fake_run(&f) == 0 && !f.closed && f.c.state == C_CLOSING);
	f.hold = false;
	CHECK(fake_run(&f) == 0 && f.closed && strstr(f.out, "200 OK"));
	fake_free(&f);
}

UNIT_TEST(http_stream_chunks)
{
	struct fake_conn f = {0};
	struct http_req *r;

	r = open_stream(&f, "GET /stream HTTP/1.1\r\n\r\n");
	CHECK(r);
	CHECK(strstr(f.out, "Transfer-Encoding: chunked\r\n") && !strstr(f.out, "Content-Length"));
	fake_clear(&f);
	CHECK(http_stream_write(r, "hello", 5) == 0 && http_stream_write(r, "", 0) == 0);
	CHECK(http_stream_write(r, "0123456789abcdefX", 17) == 0);
	http_stream_end(r);
	CHECK(fake_run(&f) == 0);
	CHECK(!strcmp(f.out, "5\r\nhello\r\n11\r\n0123456789abcdefX\r\n0\r\n\r\n"));
	CHECK(f.c.state == C_IDLE && ts.closes == 0);
	fake_free(&f);

	/* HTTP/1.0: raw bytes, closed at the end. */
	r = open_stream(&f, "GET /stream HTTP/1.0\r\n\r\n");
	CHECK(r);
	CHECK(strstr(f.out, "Connection: close\r\n") && !strstr(f.out, "chunked"));
	fake_clear(&f);
	CHECK(http_stream_write(r, "raw", 3) == 0);
	http_stream_end(r);
	CHECK(fake_run(&f) == 0 && !strcmp(f.out, "raw") && f.shut);
	fake_free(&f);
}

UNIT_TEST(http_stream_client_gone)
{
	struct fake_conn f = {0};
	struct http_req *r;

	r = open_stream(&f, "GET /stream HTTP/1.1\r\n\r\n");
	CHECK(r);
	http_conn_eof(&f.c, -ECONNRESET);
	CHECK(http_stream_write(r, "x", 1) == -EPIPE);
	CHECK(fake_run(&f) == 0 && ts.closes == 1);
	CHECK(http_stream_write(r, "x", 1) == -EPIPE && http_stream_queued(r) == 0);
	http_stream_end(r); /* frees it */
	fake_free(&f);
}

UNIT_TEST(http_stream_drain)
{
	static char chunk[16384];
	struct fake_conn f = {0};
	struct http_req *r;

	reset();
	fake_init(&f, NULL, handler, NULL);
	f.hold = true;
	CHECK(fake_feeds(&f, "GET /stream HTTP/1.1\r\n\r\n") == 0);
	r = ts.held[0];
	while (http_stream_queued(r) < HTTP_DRAIN_LOW)
		CHECK(http_stream_write(r, chunk, sizeof(chunk)) == 0);
	CHECK(ts.drains == 0 && f.c.timer_mode == T_STALL);
	f.hold = false;
	CHECK(fake_run(&f) == 0);
	CHECK(ts.drains == 1 && http_stream_queued(r) == 0 && f.c.timer_mode == T_NONE);
	/* Registered while the queue is small: called back once, not again. */
	f.hold = true;
	CHECK(http_stream_write(r, chunk, 10) == 0);
	http_on_drain(r, on_drain_cb, NULL);
	f.hold = false;
	CHECK(fake_run(&f) == 0 && ts.drains == 2);
	CHECK(http_stream_write(r, chunk, 10) == 0 && fake_run(&f) == 0 && ts.drains == 2);
	/* A client that stops reading for idle_timeout is dropped. */
	f.hold = true;
	CHECK(http_stream_write(r, chunk, sizeof(chunk)) == 0 && f.c.timer_mode == T_STALL);
	CHECK(fake_fire(&f) == 0 && f.closed && ts.closes == 1);
	http_stream_end(r);
	fake_free(&f);
}

UNIT_TEST(http_head_has_no_body)
{
	struct fake_conn f = {0};

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "HEAD /h HTTP/1.1\r\n\r\n") == 0);
	CHECK(strstr(f.out, "Content-Length: 12\r\n"));
	CHECK(strlen(strstr(f.out, "\r\n\r\n")) == 4);
	fake_free(&f);
}

UNIT_TEST(http_request_accessors)
{
	struct fake_conn f = {0};
	struct http_req *r;
	char v[16];

	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(
		      &f,
		      "GET /hold?a=1&b=x+y%2Fz&c&d=%zz&orgId=o&b=2 HTTP/1.1\r\n"
		      "Host: h:1\r\nX-Dup: one\r\nx-dup: two\r\nX-Empty:\r\nX-Last: z \r\n\r\n") ==
	      0);
	r = ts.held[0];
	CHECK(!strcmp(http_method(r), "GET") && !strcmp(http_path(r), "/hold"));
	CHECK(!strcmp(http_query(r), "a=1&b=x+y%2Fz&c&d=%zz&orgId=o&b=2"));
	CHECK(http_query_get(r, "b", v, sizeof(v)) == 5 && !strcmp(v, "x y/z"));
	CHECK(http_query_get(r, "c", v, sizeof(v)) == 0 && !strcmp(v, ""));
	CHECK(http_query_get(r, "d", v, sizeof(v)) == 3 && !strcmp(v, "%zz"));
	CHECK(http_query_get(r, "e", v, sizeof(v)) == -1);
	CHECK(http_query_get(r, "b", v, 3) == -2);
	CHECK(!strcmp(http_header(r, "x-DUP"), "one") && !strcmp(http_header(r, "HOST"), "h:1"));
	CHECK(!strcmp(http_header(r, "X-Empty"), "") && http_header(r, "Nope") == NULL);
	CHECK(!strcmp(http_header(r, "X-Last"), "z ") || !strcmp(http_header(r, "X-Last"), "z"));
	CHECK(http_add_header(r, "X-Session-Id", "s1") == 0);
	CHECK(http_add_header(r, "Content-Length", "5") == -EINVAL);
	CHECK(http_add_header(r, "X-Bad", "a\r\nb: c") == -EINVAL);
	http_set_user(r, &f);
	CHECK(http_user(r) == &f);
	http_respond(r, 404, "application/json", "{}", 2);
	CHECK(fake_run(&f) == 0 && strstr(f.out, "HTTP/1.1 404 Not Found\r\n"));
	CHECK(strstr(f.out, "\r\nX-Session-Id: s1\r\n"));
	fake_free(&f);

	/* Absolute form. */
	reset();
	fake_init(&f, NULL, handler, NULL);
	CHECK(fake_feeds(&f, "GET http://h:8/hold?q=1 HTTP/1.1\r\n\r\n") == 0);
	CHECK(!strcmp(http_path(ts.held[0]), "/hold") && !strcmp(http_query(ts.held[0]), "q=1"));
	fake_free(&f);
	http_respond(ts.held[0], 200, NULL, NULL, 0);
}

UNIT_TEST(http_pct_decode_edges)
{
	char out[8];

	CHECK(http_pct_decode("a%41%4a+", 8, out, sizeof(out), 1) == 4 && !strcmp(out, "aAJ "));
	CHECK(http_pct_decode("a%41%4a+", 8, out, sizeof(out), 0) == 4 && !strcmp(out, "aAJ+"));
	CHECK(http_pct_decode("%", 1, out, sizeof(out), 0) == 1 && !strcmp(out, "%"));
	CHECK(http_pct_decode("%4", 2, out, sizeof(out), 0) == 2 && !strcmp(out, "%4"));
	CHECK(http_pct_decode("%00x", 4, out, sizeof(out), 0) == 2 && out[0] == 0 && out[1] == 'x');
	CHECK(http_pct_decode("12345678", 8, out, sizeof(out), 0) == -2);
	CHECK(http_pct_decode("1234567", 7, out, sizeof(out), 0) == 7);
	CHECK(http_pct_decode("", 0, out, 0, 0) == -2);
}

UNIT_TEST(http_write_failure_aborts)
{
	struct fake_conn f = {0};
	struct http_req *r;

	r = open_stream(&f, "GET /stream HTTP/1.1\r\n\r\n");
	CHECK(r);
	f.fail_writes = true;
	CHECK(http_stream_write(r, "x", 1) == -EPIPE);
	CHECK(ts.closes == 0); /* not inside the caller's call */
	CHECK(fake_run(&f) == 0 && ts.closes == 1 && f.closed);
	http_stream_end(r);
	fake_free(&f);

	/* A failed plain answer: the request is freed with the connection. */
	reset();
	fake_init(&f, NULL, handler, NULL);
	f.fail_writes = true;
	CHECK(fake_feeds(&f, "GET /x HTTP/1.1\r\n\r\nGET /y HTTP/1.1\r\n\r\n") == 0);
	CHECK(f.closed && ts.calls == 1 && ts.closes == 0);
	fake_free(&f);
}
