// SPDX-License-Identifier: MIT
/* The CLI's HTTP client (cli_http.h): sockets, the request, http-parser for the answer. */
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli_http.h"

#define CONNECT_TIMEOUT_MS 10000
#define SEND_TIMEOUT_MS 60000
/* Collected bodies: huskd's largest (a file read) is 512 MiB; downloads go to a callback. */
#define BODY_MAX (1ull << 30)

struct cli_conn {
	int fd;
	http_parser p;
	struct cli_resp *resp;
	cli_body_fn fn;
	void *arg;
	size_t cap;
	char hname[32]; /* header name being read, cut to what we need to compare */
	bool in_value;  /* a value is being read */
	bool in_ctype;  /* ... and it belongs to Content-Type */
	bool done, stopped, too_big;
	bool got; /* answer bytes came: a failure then is not a stale kept connection's */
};

static int fail(struct cli_resp *r, int err, const char *fmt, const char *detail)
{
	snprintf(r->err, sizeof(r->err), fmt, detail);
	return err;
}

/* Non-blocking connect to one address within the timeout: the socket, or -errno. */
static int connect_one(int family, const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
	socklen_t elen = sizeof(err);
	struct pollfd pf;

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	pf = (struct pollfd){.fd = fd, .events = POLLOUT};
	err = poll(&pf, 1, CONNECT_TIMEOUT_MS);
	if (err <= 0) {
		err = err == 0 ? -ETIMEDOUT : -errno;
		close(fd);
		return err;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
		err = err ? -err : -errno;
		close(fd);
		return err;
	}
	return fd;
}

static int open_socket(const struct cli_url *u, struct cli_resp *r)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
	int fd = -ENOENT, one = 1, g;

	if (u->is_unix) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		memcpy(sa.sun_path, u->sock, strlen(u->sock));
		fd = connect_one(AF_UNIX, (struct sockaddr *)&sa, sizeof(sa));
		return fd < 0 ? fail(r, fd, "%s", strerror(-fd)) : fd;
	}
	g = getaddrinfo(u->host, u->port, &hints, &ai);
	if (g)
		return fail(r, -EHOSTUNREACH, "cannot resolve the host: %s", gai_strerror(g));
	for (a = ai; a; a = a->ai_next) {
		fd = connect_one(a->ai_family, a->ai_addr, a->ai_addrlen);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return fail(r, fd, "%s", strerror(-fd));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		n = poll(&pf, 1, SEND_TIMEOUT_MS);
		if (n == 0)
			return -ETIMEDOUT;
		if (n < 0)
			return -errno;
	}
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct cli_conn *c = p->data;

	c->resp->status = p->status_code;
	return 0;
}

/* Names and values may come in pieces; a name after a value starts the next header. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct cli_conn *c = p->data;
	size_t have;

	if (c->in_value)
		c->hname[0] = '\0';
	c->in_value = false;
	have = strlen(c->hname);
	snprintf(c->hname + have, sizeof(c->hname) - have, "%.*s", (int)len, at);
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct cli_conn *c = p->data;
	size_t have;

	if (!c->in_value) {
		c->in_ctype = !strcasecmp(c->hname, "Content-Type");
		if (c->in_ctype)
			c->resp->ctype[0] = '\0';
	}
	c->in_value = true;
	have = strlen(c->resp->ctype);
	if (c->in_ctype)
		snprintf(c->resp->ctype + have, sizeof(c->resp->ctype) - have, "%.*s", (int)len,
		         at);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct cli_conn *c = p->data;
	struct cli_resp *r = c->resp;

	if (c->fn && r->status >= 200 && r->status < 300) {
		if (c->fn(c->arg, at, len)) {
			c->stopped = true;
			return -1;
		}
		return 0;
	}
	if (r->len + len > BODY_MAX) {
		c->too_big = true;
		return -1;
	}
	if (r->len + len + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		char *b;

		while (cap < r->len + len + 1)
			cap *= 2;
		b = realloc(r->body, cap);
		if (!b) {
			c->too_big = true;
			return -1;
		}
		r->body = b;
		c->cap = cap;
	}
	memcpy(r->body + r->len, at, len);
	r->len += len;
	r->body[r->len] = '\0';
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct cli_conn *c = p->data;

	c->done = true;
	return 0;
}

static const http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* Points c at a new request's answer: resp (cleared) and rq's body callback. */
static void conn_bind(struct cli_conn *c, const struct cli_req *rq, struct cli_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
	c->resp = resp;
	c->fn = rq->fn;
	c->arg = rq->arg;
	c->cap = 0;
	c->hname[0] = '\0';
	c->in_value = c->in_ctype = c->done = c->stopped = c->too_big = c->got = false;
}

/* A new connection for rq, bound to resp; NULL with resp->err set. */
static struct cli_conn *conn_open(const struct cli_url *u, const struct cli_req *rq,
                                  struct cli_resp *resp, int *rc)
{
	struct cli_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		*rc = fail(resp, -ENOMEM, "%s", "out of memory");
		return NULL;
	}
	conn_bind(c, rq, resp);
	c->fd = open_socket(u, resp);
	if (c->fd < 0) {
		*rc = c->fd;
		free(c);
		resp->unreachable = true;
		return NULL;
	}
	return c;
}

/* Sends rq on c, asking to keep the connection or to close it after; 0 or -errno. */
static int send_request(struct cli_conn *c, const struct cli_url *u, const struct cli_req *rq,
                        bool keep)
{
	char *head = NULL, host[300];
	bool body = rq->body || strcmp(rq->method, "GET");
	int rc, n;

	snprintf(host, sizeof(host), strchr(u->host, ':') ? "[%s]%s%s" : "%s%s%s", u->host,
	         u->is_unix ? "" : ":", u->is_unix ? "" : u->port);
	n = asprintf(&head,
	             "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: husk-cli\r\nAccept: */*\r\n"
	             "Connection: %s\r\n%s%s%s%s%s%s",
	             rq->method, u->prefix, rq->target, host, keep ? "keep-alive" : "close",
	             rq->key ? "Authorization: Bearer " : "", rq->key ? rq->key : "",
	             rq->key ? "\r\n" : "", rq->ctype ? "Content-Type: " : "",
	             rq->ctype ? rq->ctype : "", rq->ctype ? "\r\n" : "");
	if (n < 0)
		return fail(c->resp, -ENOMEM, "%s", "out of memory");
	rc = send_all(c->fd, head, (size_t)n);
	free(head);
	if (!rc) {
		char cl[48];

		n = rq->chunked ? snprintf(cl, sizeof(cl), "Transfer-Encoding: chunked\r\n\r\n")
		    : body      ? snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n\r\n", rq->len)
		                : snprintf(cl, sizeof(cl), "\r\n");
		rc = send_all(c->fd, cl, (size_t)n);
	}
	if (!rc && rq->len && !rq->chunked)
		rc = send_all(c->fd, rq->body, rq->len);
	if (rc)
		return fail(c->resp, rc, "cannot send the request: %s", strerror(-rc));
	http_parser_init(&c->p, HTTP_RESPONSE);
	c->p.data = c;
	return 0;
}

/* Anything put in a header must stay on its line. */
static int request_ok(const struct cli_req *rq, struct cli_resp *resp)
{
	if ((rq->key && strpbrk(rq->key, "\r\n")) || strpbrk(rq->target, "\r\n ") ||
	    rq->target[0] != '/')
		return fail(resp, -EINVAL, "%s", "the request has a line break or a bad path");
	return 0;
}

int cli_http_start(const struct cli_url *u, const struct cli_req *rq, struct cli_resp *resp,
                   struct cli_conn **out)
{
	struct cli_conn *c;
	int rc;

	memset(resp, 0, sizeof(*resp));
	*out = NULL;
	rc = request_ok(rq, resp);
	if (rc)
		return rc;
	c = conn_open(u, rq, resp, &rc);
	if (!c)
		return rc;
	rc = send_request(c, u, rq, false);
	if (rc) {
		cli_http_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int cli_http_chunk(struct cli_conn *c, const void *p, size_t len)
{
	char size[24];
	int n = snprintf(size, sizeof(size), "%zx\r\n", len), rc;

	rc = send_all(c->fd, size, (size_t)n);
	if (!rc && len)
		rc = send_all(c->fd, p, len);
	if (!rc)
		rc = send_all(c->fd, "\r\n", 2);
	return rc;
}

int cli_http_fd(const struct cli_conn *c)
{
	return c->fd;
}

int cli_http_step(struct cli_conn *c)
{
	char buf[65536];
	ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
	size_t used;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return errno == EINTR ? fail(c->resp, -EINTR, "%s", "interrupted") : 0;
	if (n < 0)
		return fail(c->resp, -errno, "the connection broke: %s", strerror(errno));
	c->got |= n > 0;
	used = http_parser_execute(&c->p, &settings, buf, (size_t)n);
	if (c->done)
		return 1;
	if (c->stopped)
		return fail(c->resp, -ECANCELED, "%s", "stopped reading the answer");
	if (c->too_big)
		return fail(c->resp, -EFBIG, "%s", "the answer is too large to hold in memory");
	if (used != (size_t)n || HTTP_PARSER_ERRNO(&c->p) != HPE_OK)
		return fail(c->resp, -EPROTO, "not an HTTP answer: %s",
		            http_errno_description(HTTP_PARSER_ERRNO(&c->p)));
	if (n == 0)
		return fail(c->resp, -ECONNRESET, "%s",
		            "huskd closed the connection before the answer was complete");
	return 0;
}

void cli_http_close(struct cli_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

/* Steps c until its answer is complete or timeout_ms of silence: 0 or -errno. */
static int wait_answer(struct cli_conn *c, int timeout_ms)
{
	int rc = 0;

	while (!rc) {
		struct pollfd pf = {.fd = c->fd, .events = POLLIN};
		int n = poll(&pf, 1, timeout_ms > 0 ? timeout_ms : -1);

		if (n == 0) {
			char why[64];

			snprintf(why, sizeof(why), "%d s", timeout_ms / 1000);
			rc = fail(c->resp, -ETIMEDOUT, "no answer within %s", why);
		} else if (n < 0) {
			rc = fail(c->resp, -errno, "%s",
			          errno == EINTR ? "interrupted" : strerror(errno));
		} else {
			rc = cli_http_step(c);
			if (rc == 1)
				return 0;
		}
	}
	return rc;
}

int cli_http_do(const struct cli_url *u, const struct cli_req *rq, struct cli_resp *resp)
{
	struct cli_conn *c;
	int rc = cli_http_start(u, rq, resp, &c);

	if (!rc)
		rc = wait_answer(c, rq->timeout_ms);
	cli_http_close(c);
	return rc;
}

int cli_http_do_on(struct cli_conn **keep, const struct cli_url *u, const struct cli_req *rq,
                   struct cli_resp *resp)
{
	struct cli_conn *c = *keep;
	int rc;

	*keep = NULL;
	memset(resp, 0, sizeof(*resp));
	rc = request_ok(rq, resp);
	if (rc) {
		cli_http_close(c);
		return rc;
	}
	if (c) {
		conn_bind(c, rq, resp);
		rc = send_request(c, u, rq, true);
		if (!rc)
			rc = wait_answer(c, rq->timeout_ms);
		/*
		 * Closed by the server while it sat idle (an end or a reset before any
		 * answer: it never read the request): once more, on a new connection.
		 * Nothing else is sent twice.
		 */
		if (!rc || c->got || (rc != -ECONNRESET && rc != -EPIPE))
			goto out;
		cli_http_close(c);
		cli_resp_free(resp);
	}
	c = conn_open(u, rq, resp, &rc);
	if (!c)
		return rc;
	rc = send_request(c, u, rq, true);
	if (!rc)
		rc = wait_answer(c, rq->timeout_ms);
out:
	if (!rc && http_should_keep_alive(&c->p))
		*keep = c;
	else
		cli_http_close(c);
	return rc;
}

void cli_resp_free(struct cli_resp *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}
