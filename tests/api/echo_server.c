// SPDX-License-Identifier: MIT
/*
 * http-echo: a test server on the HTTP layer (tests/api/http_smoke.c drives
 * it). Prints "port N" once listening; SIGTERM stops it cleanly (so ASan's
 * leak check covers a stop with requests still open).
 *
 *   GET|POST|PUT /echo        {"success":true,"data":{method,path,query,len,fnv,body}}
 *                             (fnv: FNV-1a 64 of the body, 16 hex digits; body up to 256 bytes)
 *   GET /slow?ms=T            the same after T ms (a long-poll)
 *   GET /stream?n=N&size=S&ms=T  N chunks of S bytes every T ms, paced by the queue
 *   GET /big?size=N           N bytes in one answer
 *   GET /stats                {closes, epipes, streams}: on_close calls, -EPIPE writes, open
 * streams
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "json_resp.h"
#include "router.h"

static struct {
	long closes, epipes, streams;
} stats;

/* A timer owned by one request: slow answers and streams. */
struct job {
	uv_timer_t t;
	struct http_req *r;
	long left; /* stream chunks still to send */
	size_t size;
	unsigned ms;
	bool gone, stream, waiting_drain;
};

static long query_long(struct http_req *r, const char *key, long dflt)
{
	char v[32];

	return http_query_get(r, key, v, sizeof(v)) > 0 ? strtol(v, NULL, 10) : dflt;
}

static void echo(struct http_req *r)
{
	size_t len;
	const char *body = http_body(r, &len);
	json_t *d = json_pack("{s:s, s:s, s:s, s:I}", "method", http_method(r), "path",
	                      http_path(r), "query", http_query(r), "len", (json_int_t)len);
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)body[i]) * 0x100000001b3ULL;
	if (d)
		json_object_set_new(d, "fnv", json_sprintf("%016llx", (unsigned long long)h));

	if (d && len <= 256)
		json_object_set_new(d, "body", json_stringn(body, len));
	api_ok(r, 200, d);
}

static void route_echo(struct http_req *r, const char *const *params, void *ctx)
{
	(void)params;
	(void)ctx;
	echo(r);
}

static void job_free(uv_handle_t *h)
{
	free(h->data);
}

static void job_done(struct job *j)
{
	uv_timer_stop(&j->t);
	uv_close((uv_handle_t *)&j->t, job_free);
}

static void stream_tick(uv_timer_t *t);

static void job_gone(struct http_req *r, void *arg)
{
	struct job *j = arg;

	(void)r;
	stats.closes++;
	j->gone = true;
	/* A stream keeps ticking once more to see its write fail; a wait just ends. */
	if (!j->stream) {
		http_respond(j->r, 200, NULL, NULL, 0); /* frees it */
		job_done(j);
	} else if (j->waiting_drain) {
		uv_timer_start(&j->t, stream_tick, 0, 0);
	}
}

static void stream_drained(struct http_req *r, void *arg)
{
	struct job *j = arg;

	(void)r;
	if (j->waiting_drain) {
		j->waiting_drain = false;
		uv_timer_start(&j->t, stream_tick, j->ms, 0);
	}
}

static void stream_tick(uv_timer_t *t)
{
	struct job *j = t->data;
	char *chunk;
	int err;

	if (j->left <= 0) {
		stats.streams--;
		http_stream_end(j->r);
		job_done(j);
		return;
	}
	chunk = malloc(j->size);
	if (!chunk)
		abort();
	for (size_t i = 0; i < j->size; i++)
		chunk[i] = (char)('a' + (j->left + (long)i) % 26);
	err = http_stream_write(j->r, chunk, j->size);
	free(chunk);
	j->left--;
	if (err == -EPIPE || j->gone) {
		if (err == -EPIPE)
			stats.epipes++;
		stats.streams--;
		http_stream_end(j->r); /* after the close: frees it */
		job_done(j);
		return;
	}
	/* A producer paces itself by the queue. */
	if (http_stream_queued(j->r) >= HTTP_DRAIN_LOW)
		j->waiting_drain = true;
	else
		uv_timer_start(&j->t, stream_tick, j->ms, 0);
}

static void slow_tick(uv_timer_t *t)
{
	struct job *j = t->data;

	echo(j->r);
	job_done(j);
}

static struct job *job_new(struct http_req *r, uv_loop_t *loop)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		abort();
	j->r = r;
	uv_timer_init(loop, &j->t);
	j->t.data = j;
	http_on_close(r, job_gone, j);
	return j;
}

static void route_slow(struct http_req *r, const char *const *params, void *ctx)
{
	struct job *j = job_new(r, ctx);

	(void)params;
	uv_timer_start(&j->t, slow_tick, (uint64_t)query_long(r, "ms", 100), 0);
}

static void route_stream(struct http_req *r, const char *const *params, void *ctx)
{
	struct job *j = job_new(r, ctx);

	(void)params;
	j->stream = true;
	j->left = query_long(r, "n", 10);
	j->size = (size_t)query_long(r, "size", 16);
	j->ms = (unsigned)query_long(r, "ms", 10);
	if (j->size == 0 || j->size > 1 << 20)
		j->size = 16;
	stats.streams++;
	http_on_drain(r, stream_drained, j);
	http_stream_begin(r, 200, "application/octet-stream");
	uv_timer_start(&j->t, stream_tick, 0, 0);
}

static void route_big(struct http_req *r, const char *const *params, void *ctx)
{
	size_t n = (size_t)query_long(r, "size", 1024);
	char *b = malloc(n ? n : 1);

	(void)params;
	(void)ctx;
	if (!b) {
		api_error(r, 500, "INTERNAL", "out of memory");
		return;
	}
	memset(b, 'b', n);
	http_respond(r, 200, "application/octet-stream", b, n);
	free(b);
}

static struct http_server *server;

static void route_stats(struct http_req *r, const char *const *params, void *ctx)
{
	(void)params;
	(void)ctx;
	api_ok(r, 200,
	       json_pack("{s:I, s:I, s:I, s:I}", "closes", (json_int_t)stats.closes, "epipes",
	                 (json_int_t)stats.epipes, "streams", (json_int_t)stats.streams, "conns",
	                 (json_int_t)http_server_connections(server)));
}

static const struct route routes[] = {
	{"GET", "/echo", route_echo, 0},     {"POST", "/echo", route_echo, 0},
	{"PUT", "/echo", route_echo, 0},     {"GET", "/slow", route_slow, 0},
	{"GET", "/stream", route_stream, 0}, {"GET", "/big", route_big, 0},
	{"GET", "/stats", route_stats, 0},
};

static void handle(struct http_req *r, void *ctx)
{
	router_dispatch(r, routes, sizeof(routes) / sizeof(routes[0]), ctx);
}

static void on_signal(uv_signal_t *s, int signum)
{
	(void)signum;
	http_server_stop(server);
	uv_close((uv_handle_t *)s, NULL);
}

/* Timers of requests cut off by the stop end with the loop. */
static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, h->type == UV_TIMER ? job_free : NULL);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"host", 1, 0, 'H'},
		{"port", 1, 0, 'p'},
		{"unix", 1, 0, 'u'},
		{"max-header", 1, 0, 'h'},
		{"max-body", 1, 0, 'b'},
		{"request-timeout", 1, 0, 'r'},
		{"idle-timeout", 1, 0, 'i'},
		{"max-conns", 1, 0, 'c'},
		{"spool-dir", 1, 0, 'S'},
		{"spool-over", 1, 0, 'O'},
		{0, 0, 0, 0},
	};
	struct http_config cfg = {.tcp_host = "127.0.0.1"};
	uv_loop_t *loop = uv_default_loop();
	uv_signal_t sig;
	int o, err;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'H':
			cfg.tcp_host = optarg;
			break;
		case 'p':
			cfg.tcp_port = atoi(optarg);
			break;
		case 'u':
			cfg.unix_path = optarg;
			break;
		case 'h':
			cfg.max_header_bytes = strtoul(optarg, NULL, 0);
			break;
		case 'b':
			cfg.max_body_bytes = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			cfg.request_timeout_ms = (unsigned)atoi(optarg);
			break;
		case 'i':
			cfg.idle_timeout_ms = (unsigned)atoi(optarg);
			break;
		case 'c':
			cfg.max_connections = (unsigned)atoi(optarg);
			break;
		case 'S':
			cfg.spool_dir = optarg;
			break;
		case 'O':
			cfg.spool_over = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: http-echo [--port N] [--unix PATH] ...\n");
			return 2;
		}
	}
	err = http_server_start(loop, &cfg, handle, loop, &server);
	if (err) {
		fprintf(stderr, "http-echo: %s\n", strerror(-err));
		return 1;
	}
	printf("port %d\n", http_server_port(server));
	fflush(stdout);
	uv_signal_init(loop, &sig);
	uv_signal_start(&sig, on_signal, SIGTERM);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_walk(loop, close_walk, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	return uv_loop_close(loop) ? 1 : 0;
}
