// SPDX-License-Identifier: MIT
/*
 * Answers: response heads, whole bodies, chunked streams, and the JSON error
 * answers the connection sends on its own (limits, timeouts, bad input).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http_conn.h"

static const char chunk_end[] = "0\r\n\r\n";

/* 1xx, 204 and 304 answers have no body and no Content-Length (RFC 9110 §8.6). */
static bool status_has_body(int status)
{
	return status >= 200 && status != 204 && status != 304;
}

static bool has_crlf(const char *s)
{
	return strpbrk(s, "\r\n") != NULL;
}

char *http_resp_head(struct http_req *r, int status, const char *ctype, long long clen,
                     size_t extra, size_t *head_len)
{
	size_t cap = 256 + (ctype ? strlen(ctype) : 0) + r->resp_hdrs_len;
	char *buf = malloc(cap + extra), date[64];
	int n;

	if (!buf)
		return NULL;
	if (status < 100 || status > 999)
		status = 500;
	if (ctype && has_crlf(ctype))
		ctype = "application/octet-stream";
	http_date(date, sizeof(date));
	n = snprintf(buf, cap, "HTTP/1.1 %d %s\r\nDate: %s\r\n", status, http_status_text(status),
	             date);
	if (ctype && status_has_body(status))
		n += snprintf(buf + n, cap - (size_t)n, "Content-Type: %s\r\n", ctype);
	if (r->resp_hdrs_len) {
		memcpy(buf + n, r->resp_hdrs, r->resp_hdrs_len);
		n += (int)r->resp_hdrs_len;
	}
	if (clen >= 0 && status_has_body(status))
		n += snprintf(buf + n, cap - (size_t)n, "Content-Length: %lld\r\n", clen);
	else if (clen < 0 && !r->http10)
		n += snprintf(buf + n, cap - (size_t)n, "Transfer-Encoding: chunked\r\n");
	/* A streamed body not all read: the connection ends with this answer. */
	if (r->body_open)
		r->keep_alive = false;
	if (!r->keep_alive)
		n += snprintf(buf + n, cap - (size_t)n, "Connection: close\r\n");
	else if (r->http10)
		n += snprintf(buf + n, cap - (size_t)n, "Connection: keep-alive\r\n");
	n += snprintf(buf + n, cap - (size_t)n, "\r\n");
	*head_len = (size_t)n;
	return buf;
}

int http_add_header(struct http_req *r, const char *name, const char *value)
{
	static const char *const ours[] = {"content-length", "transfer-encoding", "connection"};
	size_t nl = strlen(name), vl = strlen(value);
	char *p;

	if (!nl || has_crlf(value) || strpbrk(name, "\r\n: \t"))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (!strcasecmp(name, ours[i]))
			return -EINVAL;
	p = realloc(r->resp_hdrs, r->resp_hdrs_len + nl + vl + 5);
	if (!p)
		return -ENOMEM;
	r->resp_hdrs = p;
	p += r->resp_hdrs_len;
	memcpy(p, name, nl);
	memcpy(p + nl, ": ", 2);
	memcpy(p + nl + 2, value, vl);
	memcpy(p + nl + 2 + vl, "\r\n", 2);
	r->resp_hdrs_len += nl + vl + 4;
	return 0;
}

void http_respond(struct http_req *r, int status, const char *content_type, const void *body,
                  size_t len)
{
	struct http_conn *c = r->conn;
	size_t hl, blen;
	char *buf;

	if (r->resp == RESP_NONE)
		r->status = status;
	if (!c) { /* the client is gone: the answer only frees r */
		http_req_free(r);
		return;
	}
	if (r->resp != RESP_NONE)
		return;
	conn_enter(c);
	blen = r->head_only || !status_has_body(status) ? 0 : len;
	buf = http_resp_head(r, status, content_type, (long long)len, blen, &hl);
	if (buf) {
		if (blen)
			memcpy(buf + hl, body, blen);
		conn_write(c, buf, hl + blen);
	} else {
		conn_request_abort(c);
	}
	r->resp = RESP_DONE;
	conn_answered(c);
	conn_leave(c);
}

void http_respond_json(struct http_req *r, int status, json_t *body)
{
	static const char oom[] =
		"{\"success\":false,\"code\":\"INTERNAL\",\"message\":\"out of memory\"}";
	char *s = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

	json_decref(body);
	if (!s) {
		http_respond(r, 500, "application/json", oom, sizeof(oom) - 1);
		return;
	}
	http_respond(r, status, "application/json", s, strlen(s));
	free(s);
}

void http_stream_begin(struct http_req *r, int status, const char *content_type)
{
	struct http_conn *c = r->conn;
	size_t hl;
	char *buf;

	if (r->resp != RESP_NONE)
		return;
	r->resp = RESP_STREAM;
	r->status = status;
	if (!c)
		return;
	conn_enter(c);
	/* Without chunking only the end of the connection ends the body. */
	if (r->http10)
		r->keep_alive = false;
	buf = http_resp_head(r, status, content_type, -1, 0, &hl);
	if (buf)
		conn_write(c, buf, hl);
	else
		conn_request_abort(c);
	conn_leave(c);
}

int http_stream_write(struct http_req *r, const void *data, size_t len)
{
	struct http_conn *c = r->conn;
	char *buf;
	int hl = 0, ret;

	if (!c || c->broken || c->state == C_CLOSED)
		return -EPIPE;
	if (r->resp != RESP_STREAM)
		return -EINVAL;
	/* An empty chunk would end the body. */
	if (!len || r->head_only)
		return 0;
	conn_enter(c);
	buf = malloc(len + 24);
	if (buf) {
		if (!r->http10)
			hl = snprintf(buf, 24, "%zx\r\n", len);
		memcpy(buf + hl, data, len);
		if (!r->http10)
			memcpy(buf + hl + len, "\r\n", 2);
		conn_write(c, buf, (size_t)hl + len + (r->http10 ? 0 : 2));
	} else {
		conn_request_abort(c);
	}
	ret = c->broken ? -EPIPE : 0;
	conn_leave(c);
	return ret;
}

size_t http_stream_queued(const struct http_req *r)
{
	return r->conn ? r->conn->queued : 0;
}

void http_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->on_drain = cb;
	r->on_drain_arg = arg;
	r->drain_armed = cb != NULL;
}

/* Whether r's stream can be ended now; a request whose connection is gone is freed. */
static bool stream_endable(struct http_req *r)
{
	if (!r->conn) {
		http_req_free(r);
		return false;
	}
	return r->resp == RESP_STREAM;
}

void http_stream_end(struct http_req *r)
{
	struct http_conn *c = r->conn;
	char *buf;

	if (!stream_endable(r))
		return;
	conn_enter(c);
	if (!r->http10 && !r->head_only) {
		buf = malloc(sizeof(chunk_end) - 1);
		if (buf) {
			memcpy(buf, chunk_end, sizeof(chunk_end) - 1);
			conn_write(c, buf, sizeof(chunk_end) - 1);
		} else {
			conn_request_abort(c);
		}
	}
	r->resp = RESP_DONE;
	conn_answered(c);
	conn_leave(c);
}

void http_stream_abort(struct http_req *r)
{
	struct http_conn *c = r->conn;

	if (!stream_endable(r))
		return;
	conn_enter(c);
	/* No last chunk: the client sees the body cut, never a whole one. */
	conn_request_abort(c);
	r->resp = RESP_DONE;
	conn_leave(c);
}

void http_on_close(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->on_close = cb;
	r->on_close_arg = arg;
	if (!r->conn && cb)
		cb(r, arg);
}
