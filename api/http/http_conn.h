/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HTTP_CONN_H
#define HUSK_HTTP_CONN_H

/*
 * The socket-free core of the HTTP server: one connection's parser, request
 * lifecycle, answers and timers, driven through a small transport ops table.
 * http.c drives it with libuv streams; the unit tests and fuzz_http drive it
 * with a fake transport, feeding bytes and reading back what it wrote.
 *
 * Re-entrancy: every entry point (feed, sent, eof, timer, abort and the
 * answering calls of http.h) runs between conn_enter/conn_leave; an abort
 * asked for inside is carried out at the outermost leave, so neither the
 * caller's request nor the connection disappears under a call in progress.
 */
#include <http_parser.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "http.h"

struct http_conn;

struct http_transport_ops {
	/*
	 * Sends buf (malloc'd, len bytes; ownership passes) after everything
	 * written before. Later, never from inside this call, the transport
	 * calls http_conn_sent(c, len, status) and frees buf. Returns 0 or
	 * -errno (buf then freed by the transport too).
	 */
	int (*write)(struct http_conn *c, char *buf, size_t len);
	/* Stop or resume reading input (backpressure on pipelined requests). */
	void (*read_pause)(struct http_conn *c, bool paused);
	/* Arms the connection's one timer for ms (0: as soon as possible; <0: stop). */
	void (*timer)(struct http_conn *c, int ms);
	/* Half-closes the write side once queued writes are sent; reading goes on. */
	void (*shutdown)(struct http_conn *c);
	/* Closes; pending writes are dropped. The transport then calls http_conn_release. */
	void (*close)(struct http_conn *c);
	/* A duplicate of the connection's socket (close-on-exec), or -errno; NULL: none. */
	int (*dup_fd)(struct http_conn *c);
};

/* The limits a connection enforces, with defaults filled in (http_limits_init). */
struct http_limits {
	size_t max_header_bytes;
	size_t max_body_bytes;
	unsigned request_timeout_ms;
	unsigned idle_timeout_ms;
	unsigned linger_ms;
	http_admit_fn admit;
	const char *spool_dir;
	size_t spool_over;
	void (*served)(const struct http_req *req, uint64_t ns);
};

enum http_conn_state {
	C_IDLE,     /* between requests, nothing of the next one seen */
	C_READING,  /* a request's head or body is arriving */
	C_HANDLING, /* a complete request is with the handler or being answered */
	C_CLOSING,  /* the last answer is queued; input is drained and dropped */
	C_CLOSED,   /* aborted; waiting for the transport to release */
};

/* What the one timer is armed for: T_PUMP and T_ABORT defer work out of a call. */
enum http_timer_mode { T_NONE, T_REQUEST, T_IDLE, T_STALL, T_LINGER, T_PUMP, T_ABORT };

struct http_conn {
	const struct http_transport_ops *ops;
	const struct http_limits *lim;
	http_handler handler;
	void *ctx;
	char peer[INET6_ADDRSTRLEN + 16]; /* "addr:port" for logs */

	http_parser parser;
	enum http_conn_state state;
	enum http_timer_mode timer_mode;
	struct http_req *req; /* being read, handled or answered */

	char *in; /* input received but not parsed yet */
	size_t in_off, in_len, in_cap;

	size_t queued;  /* written, not yet sent */
	int depth;      /* nesting of entry points (see above) */
	int err_status; /* set by a parser callback that refuses the request */
	const char *err_code, *err_msg;
	struct http_refusal refusal; /* err_msg when the admit callback refused */
	bool fresh;                  /* no request started yet on this connection */
	bool msg_done;               /* the parser paused at the end of a request */
	bool head_done;              /* it paused after a streamed body's head */
	bool pumping;
	bool abort_pending;
	bool eof;
	bool read_paused;
	bool broken; /* a write failed */
};

/* Fills lim from cfg, defaults for zeros. */
void http_limits_init(struct http_limits *lim, const struct http_config *cfg);

/* Starts c (zeroed by the caller) in C_IDLE and arms its first request timer. */
void http_conn_init(struct http_conn *c, const struct http_transport_ops *ops,
                    const struct http_limits *lim, http_handler handler, void *ctx);
/* Input arrived: len bytes of data (copied or parsed at once). */
void http_conn_feed(struct http_conn *c, const void *data, size_t len);
/* The peer ended its side (error 0) or the connection failed (error < 0). */
void http_conn_eof(struct http_conn *c, int error);
/* A write of len bytes completed with status (0 or -errno). */
void http_conn_sent(struct http_conn *c, size_t len, int status);
/* The timer armed through ops->timer expired. */
void http_conn_timer(struct http_conn *c);
/* Closes c now: unanswered requests get on_close (server stop). */
void http_conn_abort(struct http_conn *c);
/* Frees what c holds; called by the transport once ops->close is done. */
void http_conn_release(struct http_conn *c);

/* Internals shared by http_conn.c, http_resp.c and http_req.c. */

enum http_resp_state { RESP_NONE, RESP_STREAM, RESP_DONE };

struct http_req {
	struct http_conn *conn; /* NULL once the connection is gone */
	enum http_resp_state resp;
	bool keep_alive, head_only, http10, dispatched;
	bool drain_armed; /* on_drain is due at the next send below HTTP_DRAIN_LOW */

	char *head; /* "url\0name\0value\0...path\0query\0" */
	size_t head_len, head_cap, head_bytes;
	size_t *hdr; /* offsets: name, value pairs */
	size_t nhdr, hdr_cap;
	size_t path_off, query_off;
	int last_cb; /* which of url/field/value the parser delivered last */
	const char *method;

	char *body; /* malloc'd; or, spooled, mapped from body_fd once complete (len + 1) */
	size_t body_len, body_cap;
	bool spooled; /* the body is in the file body_fd, not in memory */
	int body_fd;
	bool body_streamed;   /* http_body_stream: handed on as it arrives, not kept */
	bool body_open;       /* streamed and not all in yet */
	bool body_paused;     /* its reader wants no more for now (http_body_pause) */
	http_body_fn on_body; /* http_body_read's; NULL until then (the body waits) */
	http_body_fn on_body_end;
	void *on_body_arg;

	char *resp_hdrs; /* extra response header lines */
	size_t resp_hdrs_len;
	void *user;
	void (*on_close)(struct http_req *r, void *arg);
	void *on_close_arg;
	void (*on_drain)(struct http_req *r, void *arg);
	void *on_drain_arg;
	void (*on_free)(struct http_req *r, void *arg);
	void *on_free_arg;
	int status; /* the answer's, once one began; 0 before */
	void (*served)(const struct http_req *r, uint64_t ns);
	uint64_t t_dispatch; /* http_now_ns() when the handler got it */
};

/* The parser callbacks (http_parse.c) building c->req. */
extern const http_parser_settings http_parse_settings;

void conn_enter(struct http_conn *c);
void conn_leave(struct http_conn *c);
/* Queues buf (ownership passes); on failure the connection is aborted at leave. */
void conn_write(struct http_conn *c, char *buf, size_t len);
/* The parser saw the start of a request: c is C_READING, on the request timer. */
void conn_request_begun(struct http_conn *c);
/* Marks c broken; it is aborted (on_close for its request) from the timer. */
void conn_request_abort(struct http_conn *c);
/* The current request's answer is complete: move on once it is safe. */
void conn_answered(struct http_conn *c);
/* Answers the current, not yet dispatched, request with a JSON error and closes. */
void conn_fail(struct http_conn *c, int status, const char *code, const char *msg);
void http_req_free(struct http_req *r);
/* CLOCK_MONOTONIC in ns. */
uint64_t http_now_ns(void);
/* Builds a response head for r into a malloc'd buffer with room for extra bytes after it. */
char *http_resp_head(struct http_req *r, int status, const char *ctype, long long clen,
                     size_t extra, size_t *head_len);
/* ---- http_head.c ---- */
/* The reason phrase of status ("Status" for one http-parser does not know). */
const char *http_status_text(int status);
/* Now as an HTTP Date (RFC 9110 §5.6.7) into buf. */
void http_date(char *buf, size_t len);
/* A complete response with JSON error body {"success":false,code,message}; for conn_fail. */
char *http_error_response(int status, const char *code, const char *msg, unsigned retry_after,
                          size_t *len);

#endif
