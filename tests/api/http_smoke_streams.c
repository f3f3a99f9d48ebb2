// SPDX-License-Identifier: MIT
/*
 * The HTTP socket tests of streamed and big answers and of connection counts
 * (http_smoke.c runs them): a stream read as it comes, one whose reader went
 * or stalls, 200 connections at once, the connection limit, HTTP/1.0.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_smoke.h"

void t_stream_incremental(void)
{
	struct hconn c;
	struct hresp r = {0};
	char v[32];
	long long t0;
	int n;

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /stream?n=6&size=10&ms=100 HTTP/1.1\r\n\r\n") == 0);
	/* The first chunk comes long before the stream ends. */
	CHECK(hc_fill(&c, WAIT_MS) > 0);
	t0 = now_ms();
	while (!memmem(c.buf, c.len, "\r\n0\r\n\r\n", 7) && (n = hc_fill(&c, WAIT_MS)) > 0) {
	}
	CHECK(now_ms() - t0 >= 300);
	/* And it parses as one chunked response of 60 bytes. */
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200 && r.body_len == 60);
	CHECK(hr_header(&r, "Transfer-Encoding", v, sizeof(v)) && !strcmp(v, "chunked"));
	hr_free(&r);
	CHECK(get_ok(&c, "/echo?after=stream", "after=stream"));
out:
	hr_free(&r);
	hc_close(&c);
	report("stream_read_incrementally");
}

/* /stats counters as numbers (closes, epipes; and streams open when asked). */
static int stats(long *closes, long *epipes, long *streams)
{
	struct hconn c;
	struct hresp r = {0};
	char *p;
	int ok = 0;

	if (hc_tcp(&c, port) == 0 && hc_sends(&c, "GET /stats HTTP/1.1\r\n\r\n") == 0 &&
	    hc_read(&c, &r, WAIT_MS) == 0 && (p = strstr(r.body, "\"closes\":"))) {
		*closes = strtol(p + 9, NULL, 10);
		p = strstr(r.body, "\"epipes\":");
		*epipes = p ? strtol(p + 9, NULL, 10) : -1;
		p = strstr(r.body, "\"streams\":");
		if (streams)
			*streams = p ? strtol(p + 10, NULL, 10) : -1;
		ok = 1;
	}
	hr_free(&r);
	hc_close(&c);
	return ok;
}

/*
 * Which the server sees first is a race: the reset on its read side (on_close,
 * then the producer's next write fails) or the failed write itself (EPIPE; the
 * request is done, so no on_close follows). Either way the producer's write
 * fails exactly once and its stream ends; on_close runs at most once.
 */
void t_stream_client_gone(void)
{
	struct hconn c;
	long c0, e0, s0, c1 = 0, e1 = 0, s1 = 0;
	long long end;

	CHECK(stats(&c0, &e0, &s0));
	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /stream?n=100000&size=1000&ms=5 HTTP/1.1\r\n\r\n") == 0);
	CHECK(hc_fill(&c, WAIT_MS) > 0);
	hc_close(&c);
	/* A guard against a hang, not a speed limit. */
	end = now_ms() + WAIT_MS;
	while (now_ms() < end && stats(&c1, &e1, &s1) && (e1 == e0 || s1 != s0))
		usleep(50000);
	if (!(e1 == e0 + 1 && s1 == s0 && (c1 == c0 || c1 == c0 + 1)))
		fprintf(stderr, "closes %ld -> %ld, epipes %ld -> %ld, streams %ld -> %ld\n", c0,
		        c1, e0, e1, s0, s1);
	CHECK(e1 == e0 + 1 && s1 == s0 && (c1 == c0 || c1 == c0 + 1));
out:
	report("stream_client_gone_on_close_epipe");
}

void t_stalled_reader(void)
{
	struct hconn c, other;
	long c0, e0, c1 = 0, e1 = 0;
	long long end;
	int buf = 4096;

	other.fd = -1;
	CHECK(stats(&c0, &e0, NULL));
	CHECK(hc_tcp(&c, port) == 0);
	setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* A fast producer and a client that never reads: paced, not buffered. */
	CHECK(hc_sends(&c, "GET /stream?n=100000&size=8192&ms=0 HTTP/1.1\r\n\r\n") == 0);
	usleep(300000);
	CHECK(hc_tcp(&other, port) == 0 && get_ok(&other, "/echo?busy=1", "busy=1"));
	/* After idle_timeout without progress the server drops it. */
	end = now_ms() + IDLE_TIMEOUT + WAIT_MS;
	while (now_ms() < end && stats(&c1, &e1, NULL) && c1 == c0)
		usleep(100000);
	CHECK(c1 == c0 + 1);
out:
	hc_close(&c);
	hc_close(&other);
	report("stalled_reader_paced_and_dropped");
}

void t_many_connections(void)
{
	enum { N = 200 };
	static struct hconn c[N];
	struct hresp r = {0};
	char q[64];
	int i, opened = 0;

	for (i = 0; i < N; i++, opened++)
		CHECK(hc_tcp(&c[i], port) == 0);
	for (i = 0; i < N; i++) {
		snprintf(q, sizeof(q), "GET /echo?c=%d HTTP/1.1\r\n\r\n", i);
		CHECK(hc_sends(&c[i], q) == 0);
	}
	for (i = N - 1; i >= 0; i--) {
		snprintf(q, sizeof(q), "\"query\":\"c=%d\"", i);
		CHECK(hc_read(&c[i], &r, WAIT_MS) == 0 && r.status == 200 && strstr(r.body, q));
		hr_free(&r);
	}
out:
	hr_free(&r);
	for (i = 0; i < opened; i++)
		hc_close(&c[i]);
	report("200_concurrent_connections");
}

void t_max_connections(void)
{
	static struct hconn c[MAX_CONNS];
	struct hconn extra = {.fd = -1};
	int i, opened = 0;

	extra.fd = -1;
	/*
	 * Earlier tests' closes reach the server asynchronously: wait until our
	 * first connection is the only one it holds, and keep that one (a probe
	 * closed here could still count when the last one below arrives; a
	 * loaded machine took more than 5 s).
	 */
	for (long long end = now_ms() + 60000; now_ms() < end; usleep(20000)) {
		int alone = hc_tcp(&c[0], port) == 0 && get_ok(&c[0], "/stats", "\"conns\":1");

		if (alone)
			break;
		hc_close(&c[0]);
	}
	CHECK(c[0].fd >= 0);
	opened = 1;
	for (i = 1; i < MAX_CONNS; i++, opened++)
		CHECK(hc_tcp(&c[i], port) == 0);
	/* Make sure the server has accepted them all: the last one is served. */
	CHECK(get_ok(&c[MAX_CONNS - 1], "/echo?last=1", "last=1"));
	CHECK(hc_tcp(&extra, port) == 0);
	hc_sends(&extra, "GET /echo HTTP/1.1\r\n\r\n");
	CHECK(hc_wait_eof(&extra, WAIT_MS) == 0);
out:
	for (i = 0; i < opened; i++)
		hc_close(&c[i]);
	hc_close(&extra);
	/* The server sees those closes asynchronously: wait until it serves again. */
	for (long long end = now_ms() + 60000; now_ms() < end; usleep(20000)) {
		int ok = hc_tcp(&extra, port) == 0 && get_ok(&extra, "/echo", "");

		hc_close(&extra);
		if (ok)
			break;
	}
	report("max_connections");
}

void t_http10_and_big(void)
{
	struct hconn c;
	struct hresp r = {0};

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /big?size=3000000 HTTP/1.0\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200 && r.body_len == 3000000);
	CHECK(strstr(r.head, "Connection: close"));
	CHECK(hc_wait_eof(&c, WAIT_MS) == 0);
	hr_free(&r);
	hc_close(&c);
	/* A 1.0 stream: raw bytes up to the close. */
	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /stream?n=3&size=5&ms=10 HTTP/1.0\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200 && r.body_len == 15);
out:
	hr_free(&r);
	hc_close(&c);
	report("http10_and_big_answer");
}
