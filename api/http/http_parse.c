// SPDX-License-Identifier: MIT
/*
 * http-parser callbacks building a connection's current request. The head
 * and body limits are enforced as bytes arrive, so an oversized body is
 * refused from its Content-Length (or chunk size) before it is buffered.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "http_conn.h"

enum { CB_NONE, CB_URL, CB_FIELD, CB_VALUE };

/* Each header line costs this much beyond its bytes, so that floods of empty lines count too. */
#define HDR_LINE_COST 4
#define NO_VALUE SIZE_MAX

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* Makes the parser fail; the connection answers status once it has stopped. */
static int refuse(struct http_conn *c, int status, const char *code, const char *msg)
{
	if (!c->err_status) {
		c->err_status = status;
		c->err_code = code;
		c->err_msg = msg;
	}
	return -1;
}

static int nomem(struct http_conn *c)
{
	return refuse(c, 500, "INTERNAL", "out of memory");
}

static int head_reserve(struct http_req *r, size_t n)
{
	size_t cap = r->head_cap ? r->head_cap : 512;
	char *h;

	if (r->head_len + n <= r->head_cap)
		return 0;
	while (cap < r->head_len + n)
		cap *= 2;
	h = realloc(r->head, cap);
	if (!h)
		return -1;
	r->head = h;
	r->head_cap = cap;
	return 0;
}

static int head_put(struct http_req *r, const char *p, size_t n)
{
	if (head_reserve(r, n) < 0)
		return -1;
	memcpy(r->head + r->head_len, p, n);
	r->head_len += n;
	return 0;
}

int http_path_prefix(struct http_req *r, const char *prefix)
{
	size_t n = strlen(prefix), plen = strlen(r->head + r->path_off);

	if (head_reserve(r, n + plen + 1) < 0)
		return -ENOMEM;
	memcpy(r->head + r->head_len, prefix, n);
	memcpy(r->head + r->head_len + n, r->head + r->path_off, plen + 1);
	r->path_off = r->head_len;
	r->head_len += n + plen + 1;
	return 0;
}

/* Adds one piece of the URL, a header name or a header value (cb says which). */
static int head_add(struct http_parser *p, const char *at, size_t n, int cb, size_t cost)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	r->head_bytes += n + cost;
	if (r->head_bytes > c->lim->max_header_bytes)
		return refuse(c, 431, "HEADERS_TOO_LARGE", "request head too large");
	if (memchr(at, '\0', n))
		return refuse(c, 400, "INVALID_REQUEST", "NUL byte in request head");
	if (r->last_cb != cb && r->last_cb != CB_NONE && head_put(r, "", 1) < 0)
		return nomem(c);
	if (cb == CB_FIELD && r->last_cb != CB_FIELD) {
		if (r->nhdr == r->hdr_cap) {
			size_t cap = r->hdr_cap ? r->hdr_cap * 2 : 16;
			size_t *h = realloc(r->hdr, cap * 2 * sizeof(*h));

			if (!h)
				return nomem(c);
			r->hdr = h;
			r->hdr_cap = cap;
		}
		r->hdr[2 * r->nhdr] = r->head_len;
		r->hdr[2 * r->nhdr + 1] = NO_VALUE;
		r->nhdr++;
	}
	if (cb == CB_VALUE && r->last_cb != CB_VALUE && r->nhdr)
		r->hdr[2 * r->nhdr - 1] = r->head_len;
	r->last_cb = cb;
	return head_put(r, at, n) < 0 ? nomem(c) : 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	return head_add(p, at, n, CB_URL, 0);
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct http_req *r = ((struct http_conn *)p->data)->req;

	return head_add(p, at, n, CB_FIELD, r->last_cb == CB_FIELD ? 0 : HDR_LINE_COST);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	return head_add(p, at, n, CB_VALUE, 0);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The body from here on goes to an unlinked file (what came so far with it). */
static int spool(struct http_conn *c, struct http_req *r)
{
	int fd = open(c->lim->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		return refuse(c, 503, "UNAVAILABLE", "no room to keep the request body");
	if (r->body_len && write_all(fd, r->body, r->body_len)) {
		close(fd);
		return refuse(c, 503, "UNAVAILABLE", "no room to keep the request body");
	}
	free(r->body);
	r->body = NULL;
	r->body_cap = 0;
	r->body_fd = fd;
	r->spooled = true;
	return 0;
}

static int on_message_begin(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_req *r = calloc(1, sizeof(*r));

	if (!r)
		return nomem(c);
	if (c->req)
		http_req_free(c->req);
	r->conn = c;
	c->req = r;
	conn_request_begun(c);
	return 0;
}

/*
 * Splits the request target (origin form "/p?q", absolute form
 * "http://h/p?q" or "*") into path and query, appended to the head.
 */
static int split_target(struct http_req *r)
{
	size_t len = strlen(r->head), poff = 0, plen = len, qoff = 0, qlen = 0;
	struct http_parser_url u;

	if (r->head[0] == '/' || !strcmp(r->head, "*")) {
		const char *q = memchr(r->head, '?', len), *h = memchr(r->head, '#', len);

		if (h)
			plen = len = (size_t)(h - r->head);
		if (q && q < r->head + len) {
			plen = (size_t)(q - r->head);
			qoff = plen + 1;
			qlen = len - qoff;
		}
	} else {
		http_parser_url_init(&u);
		if (http_parser_parse_url(r->head, len, 0, &u) || !(u.field_set & (1 << UF_SCHEMA)))
			return -1;
		poff = u.field_data[UF_PATH].off;
		plen = u.field_data[UF_PATH].len;
		qoff = u.field_data[UF_QUERY].off;
		qlen = u.field_data[UF_QUERY].len;
	}
	if (head_reserve(r, plen + qlen + 3) < 0)
		return -1;
	r->path_off = r->head_len;
	if (!plen) /* "http://host" */
		r->head[r->head_len++] = '/';
	memcpy(r->head + r->head_len, r->head + poff, plen);
	r->head_len += plen;
	r->head[r->head_len++] = '\0';
	r->query_off = r->head_len;
	memcpy(r->head + r->head_len, r->head + qoff, qlen);
	r->head_len += qlen;
	r->head[r->head_len++] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;
	bool chunked = p->flags & F_CHUNKED;
	uint64_t cl = p->content_length;
	bool has_len = !chunked && cl != UINT64_MAX && cl > 0;
	const char *expect;

	/* Terminates the last string; headers without a value point at it. */
	if (head_put(r, "", 1) < 0 || head_put(r, "", 1) < 0)
		return nomem(c);
	for (size_t i = 0; i < r->nhdr; i++)
		if (r->hdr[2 * i + 1] == NO_VALUE)
			r->hdr[2 * i + 1] = r->head_len - 1;
	if (p->http_major != 1)
		return refuse(c, 505, "HTTP_VERSION_NOT_SUPPORTED", "only HTTP/1.x is served");
	if (p->method == HTTP_CONNECT)
		return refuse(c, 405, "METHOD_NOT_ALLOWED", "CONNECT is not served");
	if (r->last_cb == CB_NONE || split_target(r) < 0)
		return refuse(c, 400, "INVALID_REQUEST", "bad request target");
	r->method = http_method_str(p->method);
	r->http10 = p->http_minor == 0;
	r->head_only = p->method == HTTP_HEAD;
	/* An Upgrade we do not perform leaves the connection in an unknown protocol. */
	r->keep_alive = http_should_keep_alive(p) && !p->upgrade;
	if (c->lim->admit) {
		int status;

		c->refusal = (struct http_refusal){.code = "FORBIDDEN"};
		status = c->lim->admit(r, c->ctx, &c->refusal);
		if (status)
			return refuse(c, status, c->refusal.code, c->refusal.msg);
	}
	if (r->body_streamed) {
		r->body_open = true; /* the reader keeps its own limit */
	} else if (has_len && cl > c->lim->max_body_bytes) {
		return refuse(c, 413, "PAYLOAD_TOO_LARGE", "request body too large");
	} else if (has_len && c->lim->spool_over && cl > c->lim->spool_over) {
		if (spool(c, r))
			return -1;
	} else if (has_len) {
		r->body = malloc(cl + 1);
		if (!r->body)
			return nomem(c);
		r->body_cap = cl + 1;
	}
	expect = http_header(r, "Expect");
	if ((has_len || chunked) && !r->http10 && expect && !strcasecmp(expect, "100-continue")) {
		char *buf = malloc(sizeof(continue_100) - 1);

		if (!buf)
			return nomem(c);
		memcpy(buf, continue_100, sizeof(continue_100) - 1);
		conn_write(c, buf, sizeof(continue_100) - 1);
	}
	/* The handler runs now; the body is parsed as the handler takes it. */
	if (r->body_streamed) {
		c->head_done = true;
		http_parser_pause(p, 1);
	}
	return 0;
}

static int on_chunk_header(http_parser *p)
{
	struct http_conn *c = p->data;

	if (c->req->body_streamed)
		return 0;
	if (p->content_length > c->lim->max_body_bytes - c->req->body_len)
		return refuse(c, 413, "PAYLOAD_TOO_LARGE", "request body too large");
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;
	size_t max = c->lim->max_body_bytes;

	if (r->body_streamed) {
		r->body_len += n;
		/* Answered already: the rest is dropped (the connection closes after). */
		if (r->on_body && r->resp != RESP_DONE)
			r->on_body(r, at, n, r->on_body_arg);
		return 0;
	}
	if (n > max - r->body_len)
		return refuse(c, 413, "PAYLOAD_TOO_LARGE", "request body too large");
	/* A chunked body that grows past the threshold moves to a file too. */
	if (!r->spooled && c->lim->spool_over && r->body_len + n > c->lim->spool_over &&
	    spool(c, r))
		return -1;
	if (r->spooled) {
		if (write_all(r->body_fd, at, n))
			return refuse(c, 503, "UNAVAILABLE", "no room to keep the request body");
		r->body_len += n;
		return 0;
	}
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap * 2 : 4096;
		char *b;

		if (cap < r->body_len + n + 1)
			cap = r->body_len + n + 1;
		if (cap > max + 1)
			cap = max + 1;
		b = realloc(r->body, cap);
		if (!b)
			return nomem(c);
		r->body = b;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, at, n);
	r->body_len += n;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	if (r->body_streamed) {
		r->body_open = false;
	} else if (r->spooled) {
		/* Mapped with a NUL after it, as a body in memory has. */
		void *m = MAP_FAILED;

		if (!write_all(r->body_fd, "", 1))
			m = mmap(NULL, r->body_len + 1, PROT_READ, MAP_PRIVATE, r->body_fd, 0);
		if (m == MAP_FAILED)
			return refuse(c, 503, "UNAVAILABLE", "cannot read the request body back");
		r->body = m;
	} else if (r->body) {
		r->body[r->body_len] = '\0';
	}
	/* One request at a time: the rest of the input waits for the answer. */
	c->msg_done = true;
	http_parser_pause(p, 1);
	return 0;
}

const http_parser_settings http_parse_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
	.on_chunk_header = on_chunk_header,
};
