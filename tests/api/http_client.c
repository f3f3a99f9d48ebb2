// SPDX-License-Identifier: MIT
/* The socket tests' HTTP client (see http_client.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int hc_open(struct hconn *c, int domain, const struct sockaddr *sa, socklen_t len)
{
	memset(c, 0, sizeof(*c));
	c->fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, sa, len) < 0) {
		int e = -errno;

		close(c->fd);
		c->fd = -1;
		return e;
	}
	return 0;
}

int hc_tcp(struct hconn *c, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, err = hc_open(c, AF_INET, (struct sockaddr *)&a, sizeof(a));

	if (!err)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return err;
}

int hc_unix(struct hconn *c, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	return hc_open(c, AF_UNIX, (struct sockaddr *)&a, sizeof(a));
}

void hc_close(struct hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

int hc_send(struct hconn *c, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hc_sends(struct hconn *c, const char *s)
{
	return hc_send(c, s, strlen(s));
}

int hc_fill(struct hconn *c, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	ssize_t n;

	if (c->eof)
		return 0;
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return -ETIMEDOUT;
	if (c->len + 65536 > c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 65536 * 2;
		char *p = realloc(c->buf, cap);

		if (!p)
			return -ENOMEM;
		c->buf = p;
		c->cap = cap;
	}
	n = recv(c->fd, c->buf + c->len, 65536, 0);
	if (n <= 0) {
		c->eof = true;
		return 0;
	}
	c->len += (size_t)n;
	return (int)n;
}

int hc_wait_eof(struct hconn *c, int timeout_ms)
{
	long long end = now_ms() + timeout_ms;

	for (;;) {
		long long left = end - now_ms();
		int n = hc_fill(c, left > 0 ? (int)left : 0);

		if (n == 0)
			return 0;
		if (n < 0)
			return n;
		c->len = 0;
	}
}

static void consume(struct hconn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* Waits until c holds at least n bytes (or a "\r\n" when n is 0). */
static int need(struct hconn *c, size_t n, const char *marker, long long end)
{
	for (;;) {
		long long left = end - now_ms();
		int got;

		if (marker ? (c->len && memmem(c->buf, c->len, marker, strlen(marker)))
		           : c->len >= n)
			return 0;
		got = hc_fill(c, left > 0 ? (int)left : 0);
		if (got == 0)
			return -ECONNRESET;
		if (got < 0)
			return got;
	}
}

const char *hr_header(const struct hresp *r, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *end = strstr(line, "\r\n");

		if (end && !strncasecmp(line, name, nl) && line[nl] == ':') {
			const char *v = line + nl + 1;

			while (*v == ' ')
				v++;
			snprintf(out, outlen, "%.*s", (int)(end - v), v);
			return out;
		}
	}
	return NULL;
}

static int body_append(struct hresp *r, const char *p, size_t n)
{
	char *b = realloc(r->body, r->body_len + n + 1);

	if (!b)
		return -ENOMEM;
	memcpy(b + r->body_len, p, n);
	r->body = b;
	r->body_len += n;
	b[r->body_len] = '\0';
	return 0;
}

static int read_chunked(struct hconn *c, struct hresp *r, long long end)
{
	for (;;) {
		size_t size;
		char *eol;
		int err = need(c, 0, "\r\n", end);

		if (err)
			return err;
		eol = memmem(c->buf, c->len, "\r\n", 2);
		size = strtoul(c->buf, NULL, 16);
		consume(c, (size_t)(eol - c->buf) + 2);
		if (size == 0) /* no trailers from our server */
			return need(c, 2, NULL, end) ?: (consume(c, 2), 0);
		err = need(c, size + 2, NULL, end);
		if (err)
			return err;
		err = body_append(r, c->buf, size);
		if (err)
			return err;
		consume(c, size + 2);
	}
}

int hc_read(struct hconn *c, struct hresp *r, int timeout_ms)
{
	long long end = now_ms() + timeout_ms;
	char v[64];
	size_t hl;
	char *eoh;
	int err;

	memset(r, 0, sizeof(*r));
	err = need(c, 0, "\r\n\r\n", end);
	if (err)
		return err;
	eoh = memmem(c->buf, c->len, "\r\n\r\n", 4);
	hl = (size_t)(eoh - c->buf) + 2;
	if (hl >= sizeof(r->head))
		return -E2BIG;
	memcpy(r->head, c->buf, hl);
	r->head[hl] = '\0';
	consume(c, hl + 2);
	if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1)
		return -EPROTO;
	err = body_append(r, "", 0);
	if (err || r->status < 200 || r->status == 204 || r->status == 304)
		return err;
	if (hr_header(r, "Content-Length", v, sizeof(v))) {
		size_t n = strtoul(v, NULL, 10);

		err = need(c, n, NULL, end) ?: body_append(r, c->buf, n);
		if (!err)
			consume(c, n);
		return err;
	}
	if (hr_header(r, "Transfer-Encoding", v, sizeof(v)))
		return read_chunked(c, r, end);
	/* Neither: the body ends with the connection. */
	for (;;) {
		long long left = end - now_ms();
		int n = hc_fill(c, left > 0 ? (int)left : 0);

		if (n == 0)
			break;
		if (n < 0)
			return n;
	}
	err = body_append(r, c->buf, c->len);
	c->len = 0;
	return err;
}

void hr_free(struct hresp *r)
{
	free(r->body);
	r->body = NULL;
}
