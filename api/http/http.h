/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HTTP_H
#define HUSK_HTTP_H

/*
 * huskd's HTTP/1.x server on libuv and http-parser. One loop thread does
 * everything: handlers are called on it, and every function here must be
 * called on it.
 *
 * A connection handles one request at a time: the next pipelined request is
 * parsed only once the current one is answered, so answers go out in order.
 * Request heads and bodies are buffered whole (within the configured limits)
 * before the handler runs; responses are either one body (http_respond) or a
 * stream (http_stream_*). Limits, timeouts and malformed input are answered
 * by this layer with a JSON error body ({"success":false,"code","message"},
 * API.md §3.3) and a closed connection; handlers never see such requests.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct http_server;
/*
 * One request. It lives until it has been answered (http_respond, or
 * http_stream_begin ... http_stream_end) AND its connection has moved on or
 * closed; after answering, the handler must not touch it again.
 */
struct http_req;

/* Below this many queued bytes a stream's drain callback runs (http_on_drain). */
#define HTTP_DRAIN_LOW (64u * 1024)

struct http_req;
/* What refuses a request (the admit callback fills it in). */
struct http_refusal {
	const char *code;     /* the JSON error's code */
	char msg[400];        /* its message */
	unsigned retry_after; /* seconds for a Retry-After header; 0: none */
};
/*
 * Asked once a request's head is in, before any of its body is read: 0 lets
 * it go on; an HTTP status refuses it - the server answers that status with
 * out's code and message (a JSON error) and closes the connection, the body
 * read and dropped, never kept. ctx is the handler's.
 */
typedef int (*http_admit_fn)(struct http_req *req, void *ctx, struct http_refusal *out);

struct http_config {
	const char *tcp_host;        /* e.g. "127.0.0.1" or "::1"; NULL: no TCP */
	int tcp_port;                /* 0 with tcp_host: pick a free port (see http_server_port) */
	const char *unix_path;       /* NULL: no Unix socket; a stale socket file is replaced */
	size_t max_header_bytes;     /* 0: 64 KiB. Request line + headers beyond it: 431 */
	size_t max_body_bytes;       /* 0: 64 MiB. Bigger declared or chunked bodies: 413 */
	unsigned request_timeout_ms; /* 0: 30000. Head + body not in by then: 408, close */
	unsigned idle_timeout_ms;    /* 0: 75000. Keep-alive idle, or a client not reading */
	unsigned max_connections;    /* 0: 1024. Beyond it new connections are closed at once */
	/* Told (at most every 10 s) when connections were refused for the limit; may be NULL. */
	void (*refused)(unsigned count, unsigned limit);
	http_admit_fn admit; /* may be NULL: every request is read whole */
	/*
	 * A body over spool_over bytes (0: none is) goes, as it arrives, into an
	 * unlinked file in spool_dir instead of memory, and the handler gets it
	 * mapped from there (http_body): the server's memory stays the same
	 * whatever the bodies' sizes. A file that cannot be made: 503.
	 */
	const char *spool_dir;
	size_t spool_over;
	/* PEM files: HTTPS on every listener (http_tls_check says why one is refused). */
	const char *tls_cert, *tls_key;
	/*
	 * Told once per request that reached the handler, as it is freed (its
	 * accessors and http_status still work): ns from its dispatch to its end,
	 * answered or abandoned. May be NULL.
	 */
	void (*served)(const struct http_req *req, uint64_t ns);
};

/* 0 if tls_cert and tls_key make a TLS server; else -EINVAL with a sentence in err. */
int http_tls_check(const char *cert, const char *key, char *err, size_t len)
	__attribute__((warn_unused_result));

/* Called once per complete request, on the loop thread; answers now or later. */
typedef void (*http_handler)(struct http_req *req, void *ctx);

/*
 * Starts listening on loop according to cfg (at least one of tcp_host and
 * unix_path), calling handler(req, ctx) for each request. cfg's strings are
 * copied. Returns 0 with *out set, or -errno: -EINVAL for a config without a
 * listener or with a bad address, -EADDRINUSE when the port or a live Unix
 * socket is taken, -EEXIST when unix_path exists and is not a socket. On
 * failure, listeners already opened close asynchronously: run the loop once
 * more before uv_loop_close.
 */
int http_server_start(uv_loop_t *loop, const struct http_config *cfg, http_handler handler,
                      void *ctx, struct http_server **out) __attribute__((warn_unused_result));

/* The TCP port s listens on (useful with tcp_port 0), or -1 without TCP. */
int http_server_port(const struct http_server *s);
/* Connections open now (tests wait on it; the limit counts these). */
unsigned http_server_connections(const struct http_server *s);

/*
 * Closes s's listeners (removing its Unix socket file) and all its
 * connections; requests still unanswered get their on_close callback. The
 * handles close asynchronously: the caller keeps running the loop until it
 * has no more work (uv_run returns), which also frees s.
 */
void http_server_stop(struct http_server *s);

/* Request accessors. Strings stay valid as long as r. */

/* r's method: "GET", "POST", ... */
const char *http_method(const struct http_req *r);
/* r's path, raw (not percent-decoded) and without the query: "/sandbox/sbx_1/execute". */
const char *http_path(const struct http_req *r);
/*
 * Puts prefix before r's path, for a server that serves one API under two
 * names (the same routes by path and by host name). 0 or -ENOMEM.
 */
int http_path_prefix(struct http_req *r, const char *prefix) __attribute__((warn_unused_result));
/* r's query string, raw, without '?'; "" if none. */
const char *http_query(const struct http_req *r);
/*
 * Finds query key (compared after decoding) in r's query and copies its
 * percent- and '+'-decoded value, NUL-terminated, into out (outlen bytes).
 * Returns the value's length, -1 if key is absent, -2 if out is too small.
 * A key without '=' has the value "". The first occurrence wins.
 */
int http_query_get(const struct http_req *r, const char *key, char *out, size_t outlen);
/*
 * For conformance tests: fn(r, key) on every http_query_get, so a test can
 * see which query parameters a route reads (NULL: off, the default).
 */
void http_trace_queries(void (*fn)(const struct http_req *r, const char *key));
/* The value of header name in r (case-insensitive, first of repeats); NULL if absent. */
const char *http_header(const struct http_req *r, const char *name);
/* r's headers in order, repeats included: how many, and the i-th (i < the count). */
size_t http_header_count(const struct http_req *r);
void http_header_at(const struct http_req *r, size_t i, const char **name, const char **value);
/* r's body; *len gets its length (0 without a body). NUL-terminated for convenience. */
const void *http_body(const struct http_req *r, size_t *len);
/*
 * Streamed bodies. Called from the admit callback: r's body is not kept;
 * the handler runs as soon as the head is in and takes the body as it
 * arrives (http_body_read). No body size limit or request timeout applies:
 * the reader keeps its own. A request answered before its body ended closes
 * its connection once answered (the rest of the body is dropped).
 */
void http_body_stream(struct http_req *r);
typedef void (*http_body_fn)(struct http_req *r, const void *data, size_t len, void *arg);
/*
 * Takes a streamed body: data(r, bytes, len, arg) for each piece as it comes,
 * then end(r, NULL, 0, arg) after the last. Call it from the handler (the
 * body waits until then); the callbacks run from the loop, never inside this
 * call, and stop once r is answered. A connection lost first gets r's
 * on_close, as any unanswered request does.
 */
void http_body_read(struct http_req *r, http_body_fn data, http_body_fn end, void *arg);
/* Stops (true) or resumes taking a streamed body: its reader's backpressure. */
void http_body_pause(struct http_req *r, bool paused);
/* One pointer of the handler's own on r (NULL until set). */
void http_set_user(struct http_req *r, void *p);
void *http_user(const struct http_req *r);
/* A short text naming r's peer for logs ("127.0.0.1:5432", "unix"); "" when gone. */
const char *http_peer(const struct http_req *r);

/*
 * Adds a response header "name: value" to r's answer; call before
 * http_respond / http_stream_begin. Returns 0, or -EINVAL for a name or value
 * with CR, LF or NUL or for a name this layer sets itself (Content-Length,
 * Transfer-Encoding, Connection), -ENOMEM.
 */
int http_add_header(struct http_req *r, const char *name, const char *value)
	__attribute__((warn_unused_result));

/*
 * Answering: exactly one of http_respond, http_respond_json or
 * http_stream_begin per request, on the loop thread, at any time after the
 * handler was called (long-polls answer later). A HEAD request gets the head
 * only.
 */

/* Answers r with status, Content-Type content_type and body (copied, len bytes). */
void http_respond(struct http_req *r, int status, const char *content_type, const void *body,
                  size_t len);
/* Answers r with body serialised (steals the reference); Content-Type: application/json. */
void http_respond_json(struct http_req *r, int status, json_t *body);

/*
 * Streams: begins r's answer with status and content_type, chunked (an
 * HTTP/1.0 client gets the raw bytes and the connection closes at the end).
 */
void http_stream_begin(struct http_req *r, int status, const char *content_type);
/* Sends len bytes of data (copied) as one chunk. 0, or -EPIPE once the client is gone. */
int http_stream_write(struct http_req *r, const void *data, size_t len)
	__attribute__((warn_unused_result));
/* Bytes of r's connection written but not yet sent: producers pace themselves by it. */
size_t http_stream_queued(const struct http_req *r);
/*
 * cb(r, arg) runs when a send completes leaving r's queued bytes below
 * HTTP_DRAIN_LOW: once after each http_on_drain, and again each time the
 * queue has reached HTTP_DRAIN_LOW since. So a producer that stops at any
 * queue size and registers (or stays registered) is called back; with
 * nothing queued no send completes, so it writes first. cb NULL removes it.
 */
void http_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);
/* Ends r's stream; r must not be used afterwards. */
void http_stream_end(struct http_req *r);
/*
 * Ends a stream as failed: the connection is closed without the last chunk,
 * so the client sees a cut body (an error), never a complete one. r is done
 * with, as after http_stream_end (its on_close does not run).
 */
void http_stream_abort(struct http_req *r);

/*
 * cb(r, arg) runs once when r is being freed, whatever ended it: answered,
 * refused, abandoned, or taken over (r's accessors still work in it). For
 * accounting of requests in flight and an audit trail.
 */
void http_on_free(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);
/* The status r was answered with (a stream's when it began); 0 if none yet. */
int http_status(const struct http_req *r);

/*
 * cb(r, arg) runs once if the client goes away (or the server stops) before
 * r's answer is complete, never inside one of the caller's own calls into
 * this API. Afterwards r stays allocated until the handler gives it up with
 * http_respond or http_stream_end, which are then no-ops that free it
 * (http_stream_write returns -EPIPE). Registered after the client went away,
 * cb runs at once. A client that half-closes its side while its request is
 * unanswered counts as gone (as in Go's net/http).
 */
void http_on_close(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);

/*
 * Takes r's connection away from the server for a byte-level proxy
 * (http_tunnel.h): only while r is unanswered, nothing of it written. *fd
 * gets the socket (non-blocking, close-on-exec), *rest (malloc'd, or NULL)
 * and *rest_len what the client sent after r. r is freed and the server
 * forgets the connection. Returns 0, or -errno with r still the caller's to
 * answer (-EINVAL: answered in part, or the client is gone).
 */
int http_takeover(struct http_req *r, int *fd, char **rest, size_t *rest_len)
	__attribute__((warn_unused_result));

/*
 * Percent-decodes in[0..inlen) into out (outlen bytes, NUL-terminated);
 * plus: '+' becomes a space (query strings). A '%' not followed by two hex
 * digits stays as it is. Returns the decoded length (which may contain NUL
 * bytes from "%00"), or -2 if out is too small.
 */
int http_pct_decode(const char *in, size_t inlen, char *out, size_t outlen, int plus);

#endif
