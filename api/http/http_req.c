// SPDX-License-Identifier: MIT
/* Request accessors, query strings and percent-decoding. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "http_conn.h"

/* (Not uv_hrtime: the fuzz targets link this library without libuv.) */
uint64_t http_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void http_req_free(struct http_req *r)
{
	if (!r)
		return;
	if (r->served)
		r->served(r, http_now_ns() - r->t_dispatch);
	if (r->on_free)
		r->on_free(r, r->on_free_arg);
	free(r->head);
	free(r->hdr);
	if (r->spooled) {
		if (r->body)
			munmap(r->body, r->body_len + 1);
		close(r->body_fd);
	} else {
		free(r->body);
	}
	free(r->resp_hdrs);
	free(r);
}

int http_status(const struct http_req *r)
{
	return r->status;
}

void http_on_free(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->on_free = cb;
	r->on_free_arg = arg;
}

const char *http_method(const struct http_req *r)
{
	return r->method ? r->method : "";
}

const char *http_path(const struct http_req *r)
{
	return r->head + r->path_off;
}

const char *http_query(const struct http_req *r)
{
	return r->head + r->query_off;
}

const char *http_header(const struct http_req *r, const char *name)
{
	for (size_t i = 0; i < r->nhdr; i++)
		if (!strcasecmp(r->head + r->hdr[2 * i], name))
			return r->head + r->hdr[2 * i + 1];
	return NULL;
}

size_t http_header_count(const struct http_req *r)
{
	return r->nhdr;
}

void http_header_at(const struct http_req *r, size_t i, const char **name, const char **value)
{
	*name = r->head + r->hdr[2 * i];
	*value = r->head + r->hdr[2 * i + 1];
}

const void *http_body(const struct http_req *r, size_t *len)
{
	*len = r->body_len;
	return r->body ? r->body : "";
}

void http_set_user(struct http_req *r, void *p)
{
	r->user = p;
}

void *http_user(const struct http_req *r)
{
	return r->user;
}

const char *http_peer(const struct http_req *r)
{
	return r->conn ? r->conn->peer : "";
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int http_pct_decode(const char *in, size_t inlen, char *out, size_t outlen, int plus)
{
	size_t o = 0;

	for (size_t i = 0; i < inlen; i++) {
		char ch = in[i];

		if (ch == '%' && i + 2 < inlen && hexval(in[i + 1]) >= 0 &&
		    hexval(in[i + 2]) >= 0) {
			ch = (char)(hexval(in[i + 1]) * 16 + hexval(in[i + 2]));
			i += 2;
		} else if (ch == '+' && plus) {
			ch = ' ';
		}
		if (o + 1 >= outlen)
			return -2;
		out[o++] = ch;
	}
	if (!outlen)
		return -2;
	out[o] = '\0';
	return (int)o;
}

static void (*query_trace)(const struct http_req *r, const char *key);

void http_trace_queries(void (*fn)(const struct http_req *r, const char *key))
{
	query_trace = fn;
}

int http_query_get(const struct http_req *r, const char *key, char *out, size_t outlen)
{
	const char *q = http_query(r);
	size_t klen = strlen(key);
	char name[256];

	if (query_trace)
		query_trace(r, key);

	while (*q) {
		const char *end = strchr(q, '&'), *eq;
		size_t len = end ? (size_t)(end - q) : strlen(q);
		int n;

		eq = memchr(q, '=', len);
		n = http_pct_decode(q, eq ? (size_t)(eq - q) : len, name, sizeof(name), 1);
		if (n == (int)klen && !memcmp(name, key, klen)) {
			if (!eq)
				return outlen ? (out[0] = '\0', 0) : -2;
			return http_pct_decode(eq + 1, len - (size_t)(eq + 1 - q), out, outlen, 1);
		}
		q += len + (end ? 1 : 0);
	}
	return -1;
}
