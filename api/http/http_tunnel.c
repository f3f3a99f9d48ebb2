// SPDX-License-Identifier: MIT
/*
 * The byte tunnel behind the proxy (http_tunnel.h): two libuv streams, each
 * read into buffers handed whole to the other's writes, reading paused
 * while the other end has more than TUNNEL_HIGH queued.
 */
#include "http_tunnel.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TUNNEL_READ (64u * 1024)
#define TUNNEL_HIGH (1u << 20)

struct tunnel;

struct end {
	union http_uv_stream h;
	struct tunnel *t;
	struct end *peer;
	uv_shutdown_t shut;
	size_t queued;  /* written to this end, not sent yet */
	bool reading;   /* reading from this end is on */
	bool eof;       /* this end sends nothing more */
	bool shut_done; /* this end's write side is closed */
};

struct tunnel {
	uv_loop_t *loop;
	struct end client, up;
	uv_connect_t connect;
	char *to_up, *no_answer;
	size_t to_up_len;
	bool answered; /* the upstream sent something */
	bool closing;
	int handles;
	uint64_t active_ms;
	const struct http_tunnel_ops *ops;
	void *arg;
};

struct twrite {
	uv_write_t req;
	struct end *to;
	char *buf;
	size_t len;
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_closed(uv_handle_t *h)
{
	struct tunnel *t = ((struct end *)h->data)->t;

	if (--t->handles)
		return;
	if (t->ops && t->ops->closed)
		t->ops->closed(t->arg);
	free(t->to_up);
	free(t->no_answer);
	free(t);
}

static void tunnel_close(struct tunnel *t)
{
	if (t->closing)
		return;
	t->closing = true;
	uv_close(&t->client.h.handle, on_closed);
	uv_close(&t->up.h.handle, on_closed);
}

static void read_on(struct end *e, bool on)
{
	if (e->eof || e->reading == on || e->t->closing)
		return;
	e->reading = on;
	if (!on)
		uv_read_stop(&e->h.stream);
	else if (uv_read_start(&e->h.stream, on_alloc, on_read) < 0)
		tunnel_close(e->t);
}

/* Over when the upstream has ended and the client has all it sent. */
static void check_done(struct tunnel *t)
{
	if (t->up.eof && t->client.shut_done)
		tunnel_close(t);
	else if (t->up.eof && t->client.eof)
		tunnel_close(t);
}

static int end_write(struct end *e, char *buf, size_t len);
static void end_shutdown(struct end *e);

/*
 * The upstream is gone (ended or failed). Before it answered anything the
 * client gets no_answer; either way it gets what was sent, then the end.
 */
static void up_gone(struct tunnel *t)
{
	char *msg;

	if (t->up.eof)
		return;
	t->up.eof = true;
	if (t->up.reading)
		uv_read_stop(&t->up.h.stream);
	t->up.reading = false;
	if (!t->answered && t->no_answer && (msg = strdup(t->no_answer)))
		(void)end_write(&t->client, msg, strlen(msg));
	end_shutdown(&t->client);
}

static void on_write(uv_write_t *w, int status)
{
	struct twrite *tw = (struct twrite *)w;
	struct end *to = tw->to;

	to->queued -= tw->len;
	free(tw->buf);
	free(tw);
	if (status < 0 && to == &to->t->up && !to->t->closing) {
		up_gone(to->t); /* it closed before taking the whole request */
		return;
	}
	if (status < 0) {
		tunnel_close(to->t);
		return;
	}
	if (to->queued < TUNNEL_HIGH / 2)
		read_on(to->peer, true);
}

/* Queues buf (ownership passes) to e. */
static int end_write(struct end *e, char *buf, size_t len)
{
	struct twrite *tw = malloc(sizeof(*tw));
	uv_buf_t b = {.base = buf, .len = len};

	if (!tw || e->t->closing) {
		free(tw);
		free(buf);
		return -ENOMEM;
	}
	tw->to = e;
	tw->buf = buf;
	tw->len = len;
	if (uv_write(&tw->req, &e->h.stream, &b, 1, on_write) < 0) {
		free(tw);
		free(buf);
		return -EPIPE;
	}
	e->queued += len;
	return 0;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct end *e = req->data;

	(void)status;
	e->shut_done = true;
	if (!e->t->closing)
		check_done(e->t);
}

static void end_shutdown(struct end *e)
{
	e->shut.data = e;
	if (uv_shutdown(&e->shut, &e->h.stream, on_shutdown) < 0)
		tunnel_close(e->t);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = malloc(TUNNEL_READ);
	buf->len = buf->base ? TUNNEL_READ : 0;
}

static void activity(struct tunnel *t)
{
	uint64_t now = uv_now(t->loop);

	if (t->ops && t->ops->activity && now - t->active_ms >= 1000) {
		t->active_ms = now;
		t->ops->activity(t->arg);
	}
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct end *e = s->data;
	struct tunnel *t = e->t;

	if (n > 0) {
		if (e == &t->up)
			t->answered = true;
		activity(t);
		if (end_write(e->peer, buf->base, (size_t)n) == 0 && e->peer->queued > TUNNEL_HIGH)
			read_on(e, false);
		return;
	}
	free(buf->base);
	if (n == 0)
		return;
	/* An upstream reset (a guest port nobody listens on) ends like its EOF. */
	if (e == &t->up) {
		up_gone(t);
		check_done(t);
		return;
	}
	if (n != UV_EOF) {
		tunnel_close(t);
		return;
	}
	uv_read_stop(s);
	e->reading = false;
	e->eof = true;
	end_shutdown(e->peer);
	check_done(t);
}

static void on_connect(uv_connect_t *c, int status)
{
	struct tunnel *t = c->data;

	if (t->closing)
		return;
	if (status < 0) {
		up_gone(t);
		return;
	}
	if (t->to_up_len && end_write(&t->up, t->to_up, t->to_up_len) < 0) {
		t->to_up = NULL;
		tunnel_close(t);
		return;
	}
	t->to_up = NULL;
	read_on(&t->up, true);
	read_on(&t->client, true);
}

/* The client's socket as a libuv stream of the right kind; 0 or a libuv error (fd not taken). */
static int client_open(struct tunnel *t, int fd)
{
	int domain = 0;
	socklen_t len = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
		domain = AF_INET;
	if (domain == AF_UNIX) {
		uv_pipe_init(t->loop, &t->client.h.pipe, 0);
		return uv_pipe_open(&t->client.h.pipe, fd);
	}
	uv_tcp_init(t->loop, &t->client.h.tcp);
	return uv_tcp_open(&t->client.h.tcp, fd);
}

int http_tunnel_start(uv_loop_t *loop, int fd, const char *upstream, const void *to_up,
                      size_t to_up_len, const char *no_answer, const struct http_tunnel_ops *ops,
                      void *arg)
{
	struct tunnel *t = calloc(1, sizeof(*t));
	int rc;

	if (!t || (to_up_len && !(t->to_up = malloc(to_up_len))) ||
	    (no_answer && !(t->no_answer = strdup(no_answer)))) {
		if (t)
			free(t->to_up);
		free(t);
		close(fd);
		return -ENOMEM;
	}
	t->loop = loop;
	t->to_up_len = to_up_len;
	if (to_up_len)
		memcpy(t->to_up, to_up, to_up_len);
	t->client.t = t->up.t = t;
	t->client.peer = &t->up;
	t->up.peer = &t->client;
	rc = client_open(t, fd);
	t->client.h.handle.data = &t->client;
	t->handles = 1;
	if (rc) {
		/* No callbacks for a tunnel that never started: ops are not set yet. */
		close(fd);
		t->closing = true;
		uv_close(&t->client.h.handle, on_closed);
		return rc;
	}
	t->ops = ops;
	t->arg = arg;
	uv_pipe_init(loop, &t->up.h.pipe, 0);
	t->up.h.handle.data = &t->up;
	t->handles = 2;
	t->connect.data = t;
	uv_pipe_connect(&t->connect, &t->up.h.pipe, upstream, on_connect);
	return 0;
}
