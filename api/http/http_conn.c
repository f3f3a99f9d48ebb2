// SPDX-License-Identifier: MIT
/*
 * One HTTP connection without its socket: input goes through http-parser into
 * a request; a complete request goes to the handler; once it is answered (and
 * the client keeps up with the answer) the connection moves on to the next
 * request. The states and timers are in http_conn.h; the parser callbacks
 * that build the request are in http_parse.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http_conn.h"

/* Pipelined input held while a request is handled before reading pauses. */
#define IN_PAUSE_BYTES (64u * 1024)

void http_limits_init(struct http_limits *lim, const struct http_config *cfg)
{
	lim->max_header_bytes = cfg->max_header_bytes ? cfg->max_header_bytes : 64 * 1024;
	lim->max_body_bytes = cfg->max_body_bytes ? cfg->max_body_bytes : 64 * 1024 * 1024;
	lim->request_timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : 30000;
	lim->idle_timeout_ms = cfg->idle_timeout_ms ? cfg->idle_timeout_ms : 75000;
	/*
	 * After the last answer, unread input is drained this long before
	 * closing: closing with unread bytes makes the kernel send a reset,
	 * which can destroy the answer (a 413) before the client reads it.
	 */
	lim->linger_ms = lim->idle_timeout_ms < 2000 ? lim->idle_timeout_ms : 2000;
	lim->admit = cfg->admit;
	lim->spool_dir = cfg->spool_dir;
	lim->spool_over = cfg->spool_dir ? cfg->spool_over : 0;
	lim->served = cfg->served;
}

static void set_timer(struct http_conn *c, enum http_timer_mode m)
{
	int ms = -1;

	/* A pending abort owns the timer until it has run. */
	if (c->timer_mode == T_ABORT)
		return;
	switch (m) {
	case T_REQUEST:
		ms = (int)c->lim->request_timeout_ms;
		break;
	case T_IDLE:
	case T_STALL:
		ms = (int)c->lim->idle_timeout_ms;
		break;
	case T_LINGER:
		ms = (int)c->lim->linger_ms;
		break;
	case T_PUMP:
	case T_ABORT:
		ms = 0;
		break;
	case T_NONE:
		break;
	}
	c->timer_mode = m;
	c->ops->timer(c, ms);
}

static void read_pause(struct http_conn *c, bool paused)
{
	if (c->read_paused == paused || (c->eof && !paused))
		return;
	c->read_paused = paused;
	c->ops->read_pause(c, paused);
}

void http_conn_init(struct http_conn *c, const struct http_transport_ops *ops,
                    const struct http_limits *lim, http_handler handler, void *ctx)
{
	c->ops = ops;
	c->lim = lim;
	c->handler = handler;
	c->ctx = ctx;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->state = C_IDLE;
	c->fresh = true;
	/* A new connection has request_timeout to send its first request. */
	set_timer(c, T_REQUEST);
}

void conn_enter(struct http_conn *c)
{
	c->depth++;
}

/*
 * Aborts are carried out from the timer, never inside a call: a handler
 * whose write fails must not see its request freed under it.
 */
void conn_leave(struct http_conn *c)
{
	if (--c->depth == 0 && c->abort_pending && c->timer_mode != T_ABORT)
		set_timer(c, T_ABORT);
}

static void conn_abort_now(struct http_conn *c)
{
	struct http_req *r = c->req;

	c->abort_pending = false;
	c->timer_mode = T_NONE;
	c->ops->timer(c, -1);
	c->state = C_CLOSED;
	c->req = NULL;
	c->ops->close(c);
	if (!r)
		return;
	r->conn = NULL;
	if (r->resp == RESP_DONE || !r->dispatched)
		http_req_free(r);
	else if (r->on_close)
		r->on_close(r, r->on_close_arg); /* may free r */
}

void conn_request_abort(struct http_conn *c)
{
	if (c->state == C_CLOSED)
		return;
	c->abort_pending = true;
	c->broken = true;
}

void http_conn_abort(struct http_conn *c)
{
	if (c->state == C_CLOSED)
		return;
	if (c->depth == 0) {
		conn_abort_now(c);
		return;
	}
	conn_request_abort(c);
}

void conn_write(struct http_conn *c, char *buf, size_t len)
{
	if (c->broken || c->state == C_CLOSED) {
		free(buf);
		return;
	}
	c->queued += len;
	if (c->ops->write(c, buf, len) < 0) {
		c->queued -= len;
		conn_request_abort(c);
		return;
	}
	if (c->state != C_HANDLING)
		return;
	if (c->timer_mode == T_NONE)
		set_timer(c, T_STALL); /* sent completions re-arm it */
	if (c->queued >= HTTP_DRAIN_LOW)
		c->req->drain_armed = true;
}

/* Everything queued has been sent on a closing connection. */
static void closing_flushed(struct http_conn *c)
{
	if (c->eof)
		conn_request_abort(c);
	else
		set_timer(c, T_LINGER);
}

static void conn_close_graceful(struct http_conn *c)
{
	c->state = C_CLOSING;
	c->ops->shutdown(c);
	read_pause(c, false); /* drain what the client still sends */
	if (c->queued)
		set_timer(c, T_STALL);
	else
		closing_flushed(c);
}

void conn_fail(struct http_conn *c, int status, const char *code, const char *msg)
{
	size_t len;
	char *buf;

	if (c->req) {
		http_req_free(c->req);
		c->req = NULL;
	}
	/* A refusal of the admit callback may say when to come back. */
	buf = http_error_response(status, code, msg,
	                          msg == c->refusal.msg ? c->refusal.retry_after : 0, &len);
	if (buf)
		conn_write(c, buf, len);
	conn_close_graceful(c);
}

void conn_request_begun(struct http_conn *c)
{
	c->state = C_READING;
	/* A new connection's timer runs from its accept; later ones from here. */
	if (!c->fresh)
		set_timer(c, T_REQUEST);
	c->fresh = false;
}

void conn_answered(struct http_conn *c)
{
	if (!c->pumping)
		set_timer(c, T_PUMP);
}

static void in_consume(struct http_conn *c, size_t n)
{
	c->in_off += n;
	if (c->in_off >= c->in_len)
		c->in_off = c->in_len = 0;
}

static void conn_dispatch(struct http_conn *c)
{
	c->state = C_HANDLING;
	c->req->dispatched = true;
	c->req->served = c->lim->served;
	c->req->t_dispatch = c->req->served ? http_now_ns() : 0;
	set_timer(c, c->queued ? T_STALL : T_NONE);
	if (c->in_len - c->in_off >= IN_PAUSE_BYTES)
		read_pause(c, true);
	c->handler(c->req, c->ctx);
}

/* Runs the parser over buffered input until a request is complete or it fails. */
static void conn_parse(struct http_conn *c)
{
	size_t avail = c->in_len - c->in_off, n;
	enum http_errno e;

	if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
		http_parser_pause(&c->parser, 0);
	n = http_parser_execute(&c->parser, &http_parse_settings, c->in + c->in_off, avail);
	in_consume(c, n < avail ? n : avail);
	if (c->msg_done || c->head_done) {
		c->msg_done = c->head_done = false;
		conn_dispatch(c);
		return;
	}
	e = HTTP_PARSER_ERRNO(&c->parser);
	if (e == HPE_OK && n == avail)
		return;
	if (c->err_status)
		conn_fail(c, c->err_status, c->err_code, c->err_msg);
	else if (e == HPE_HEADER_OVERFLOW)
		conn_fail(c, 431, "HEADERS_TOO_LARGE", "request head too large");
	else
		conn_fail(c, 400, "INVALID_REQUEST", http_errno_description(e));
}

/* Parses a streamed body's buffered input: its reader gets the bytes, and the end. */
static void conn_body_feed(struct http_conn *c)
{
	struct http_req *r = c->req;
	size_t avail = c->in_len - c->in_off, n;

	if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
		http_parser_pause(&c->parser, 0);
	n = http_parser_execute(&c->parser, &http_parse_settings, c->in + c->in_off, avail);
	in_consume(c, n < avail ? n : avail);
	if (c->msg_done) {
		c->msg_done = false;
		if (r->on_body_end && r->resp != RESP_DONE)
			r->on_body_end(r, NULL, 0, r->on_body_arg);
		return;
	}
	/* A body that breaks the protocol: its request cannot be answered any more. */
	if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || n != avail)
		conn_request_abort(c);
}

void http_body_stream(struct http_req *r)
{
	r->body_streamed = true;
}

void http_body_read(struct http_req *r, http_body_fn data, http_body_fn end, void *arg)
{
	struct http_conn *c = r->conn;

	r->on_body = data;
	r->on_body_end = end;
	r->on_body_arg = arg;
	if (c && c->req == r && r->body_open && !c->pumping)
		set_timer(c, T_PUMP);
}

void http_body_pause(struct http_req *r, bool paused)
{
	struct http_conn *c = r->conn;

	r->body_paused = paused;
	if (!c || c->req != r || !r->body_open)
		return;
	if (paused)
		read_pause(c, true);
	else if (!c->pumping)
		set_timer(c, T_PUMP); /* what is buffered goes to the reader from the loop */
}

/* The current request is answered and its answer mostly sent: on to the next. */
static void conn_finish(struct http_conn *c)
{
	struct http_req *r = c->req;
	/* A streamed body not all read leaves the connection mid-request: close it. */
	bool keep = r->keep_alive && !c->broken && !r->body_open;

	c->req = NULL;
	http_req_free(r);
	if (!keep) {
		conn_close_graceful(c);
		return;
	}
	c->state = C_IDLE;
	set_timer(c, T_IDLE);
	read_pause(c, false);
}

/*
 * The connection's main loop: hands complete requests to the handler and
 * moves on after each answer. Handlers that answer at once are served from
 * this loop, not recursively.
 */
static void conn_pump(struct http_conn *c)
{
	if (c->pumping)
		return;
	c->pumping = true;
	conn_enter(c);
	while (!c->abort_pending && c->state != C_CLOSED && c->state != C_CLOSING) {
		if (c->state == C_HANDLING) {
			struct http_req *r = c->req;

			if (r->body_open && r->on_body && r->resp != RESP_DONE && !r->body_paused) {
				read_pause(c, false);
				if (c->in_off < c->in_len) {
					conn_body_feed(c);
					continue;
				}
			}
			if (r->resp != RESP_DONE || c->queued >= HTTP_DRAIN_LOW)
				break;
			conn_finish(c);
			continue;
		}
		if (c->in_off == c->in_len) {
			/* Nothing more will come: a partial request is abandoned. */
			if (c->eof && c->state == C_IDLE)
				conn_close_graceful(c);
			else if (c->eof)
				conn_request_abort(c);
			break;
		}
		conn_parse(c);
	}
	if (c->state == C_HANDLING && c->timer_mode != T_PUMP)
		set_timer(c, c->queued ? T_STALL : T_NONE);
	c->pumping = false;
	conn_leave(c);
}

static int in_append(struct http_conn *c, const void *data, size_t len)
{
	if (c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	if (c->in_len + len > c->in_cap) {
		size_t cap = c->in_cap ? c->in_cap : 4096;
		char *p;

		while (cap < c->in_len + len)
			cap *= 2;
		p = realloc(c->in, cap);
		if (!p)
			return -1;
		c->in = p;
		c->in_cap = cap;
	}
	memcpy(c->in + c->in_len, data, len);
	c->in_len += len;
	return 0;
}

void http_conn_feed(struct http_conn *c, const void *data, size_t len)
{
	if (!len)
		return;
	conn_enter(c);
	if (c->state == C_CLOSING || c->state == C_CLOSED || c->abort_pending)
		goto out; /* a closing connection drops what still comes */
	if (in_append(c, data, len) < 0) {
		conn_request_abort(c);
		goto out;
	}
	if (c->state != C_HANDLING || (c->req->body_open && !c->req->body_paused))
		conn_pump(c);
	if (c->state == C_HANDLING && c->in_len - c->in_off >= IN_PAUSE_BYTES)
		read_pause(c, true);
out:
	conn_leave(c);
}

void http_conn_eof(struct http_conn *c, int error)
{
	conn_enter(c);
	c->eof = true;
	c->read_paused = true;
	if (c->state == C_CLOSED) {
		/* nothing */
	} else if (error) {
		conn_request_abort(c);
	} else if (c->state == C_HANDLING) {
		/* Gone before its answer was complete; else finish the pipeline. */
		if (c->req->resp != RESP_DONE)
			conn_request_abort(c);
	} else if (c->state == C_CLOSING) {
		if (!c->queued)
			conn_request_abort(c);
	} else {
		conn_pump(c);
	}
	conn_leave(c);
}

void http_conn_sent(struct http_conn *c, size_t len, int status)
{
	size_t before = c->queued;

	conn_enter(c);
	c->queued -= len < before ? len : before;
	if (status < 0 || c->state == C_CLOSED) {
		conn_request_abort(c);
	} else if (c->state == C_HANDLING) {
		struct http_req *r = c->req;

		if (r->resp == RESP_STREAM && r->on_drain && r->drain_armed &&
		    c->queued < HTTP_DRAIN_LOW) {
			r->drain_armed = false;
			r->on_drain(r, r->on_drain_arg); /* may end r's answer */
		}
		if (c->req->resp == RESP_DONE && c->queued < HTTP_DRAIN_LOW)
			conn_pump(c);
		else if (c->timer_mode != T_PUMP)
			set_timer(c, c->queued ? T_STALL : T_NONE);
	} else if (c->state == C_CLOSING) {
		if (!c->queued)
			closing_flushed(c);
		else
			set_timer(c, T_STALL);
	}
	conn_leave(c);
}

void http_conn_timer(struct http_conn *c)
{
	enum http_timer_mode m = c->timer_mode;

	conn_enter(c);
	c->timer_mode = T_NONE;
	switch (m) {
	case T_ABORT:
		c->depth--;
		conn_abort_now(c);
		return;
	case T_PUMP:
		conn_pump(c);
		break;
	case T_REQUEST:
		if (c->state == C_READING)
			conn_fail(c, 408, "REQUEST_TIMEOUT", "request not received in time");
		else if (c->state == C_IDLE)
			conn_request_abort(c);
		break;
	case T_IDLE:
	case T_STALL:
	case T_LINGER:
		conn_request_abort(c);
		break;
	case T_NONE:
		break;
	}
	conn_leave(c);
}

void http_conn_release(struct http_conn *c)
{
	if (c->req) {
		c->req->conn = NULL;
		http_req_free(c->req);
		c->req = NULL;
	}
	free(c->in);
	c->in = NULL;
}

int http_takeover(struct http_req *r, int *fd, char **rest, size_t *rest_len)
{
	struct http_conn *c = r->conn;
	size_t n;
	int dfd;

	/* Only a request not answered in any part: the socket carries nothing of ours. */
	if (!c || c->req != r || c->state != C_HANDLING || r->resp != RESP_NONE || c->queued ||
	    c->broken || c->abort_pending)
		return -EINVAL;
	if (!c->ops->dup_fd)
		return -EOPNOTSUPP;
	n = c->in_len - c->in_off;
	*rest = n ? malloc(n) : NULL;
	if (n && !*rest)
		return -ENOMEM;
	dfd = c->ops->dup_fd(c);
	if (dfd < 0) {
		free(*rest);
		*rest = NULL;
		return dfd;
	}
	if (n)
		memcpy(*rest, c->in + c->in_off, n);
	*rest_len = n;
	*fd = dfd;
	/* The server lets go quietly: no on_close, no answer, its copy of the socket closed. */
	c->req = NULL;
	r->conn = NULL;
	http_req_free(r);
	c->abort_pending = false;
	c->timer_mode = T_NONE;
	c->ops->timer(c, -1);
	c->state = C_CLOSED;
	c->ops->close(c);
	return 0;
}
