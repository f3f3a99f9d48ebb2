// SPDX-License-Identifier: MIT
/*
 * The agent's event loop: connections, framing, dispatch. One thread; every
 * socket and pipe is non-blocking, and each connection queues at most about
 * OUTQ_HIGH bytes before its producers wait. Connections come from the
 * listeners (listen.c) and from dialling home (dial.c), served alike.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "evloop.h"
#include "proc.h"

struct conn {
	struct agent *a;
	int fd;
	struct frame_reader rd;
	uint8_t *out;
	size_t out_head, out_len, out_cap;
	uint32_t events;
	unsigned held; /* while nonzero, the connection's input is not read */
	bool dead;
	struct req *reqs;
	void (*on_close)(void *arg);
	void *on_close_arg;
	struct conn *next;
};

static void conn_close(struct conn *c);
static void conn_update_events(struct conn *c);

const char *errno_code(int e)
{
	switch (e) {
	case ENOENT:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "exists";
	case EACCES:
	case EPERM:
		return "permission_denied";
	case ENOTDIR:
		return "not_a_directory";
	case EISDIR:
		return "is_a_directory";
	case ENOSPC:
		return "no_space";
	case EINVAL:
		return "bad_request";
	default:
		return "io_error";
	}
}

struct agent *conn_agent(const struct conn *c)
{
	return c->a;
}

size_t conn_queued(const struct conn *c)
{
	return c->out_len;
}

void conn_hold_input(struct conn *c, bool hold)
{
	if (hold)
		c->held++;
	else if (c->held)
		c->held--;
	conn_update_events(c);
}

static void conn_update_events(struct conn *c)
{
	uint32_t ev = (c->held ? 0 : EPOLLIN) | (c->out_len ? EPOLLOUT : 0);

	if (ev != c->events && !evloop_mod(c->a->loop, c->fd, ev))
		c->events = ev;
}

/* Writes what the socket takes now. */
static void conn_flush(struct conn *c)
{
	while (c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_head, c->out_len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			c->dead = true;
			return;
		}
		c->out_head += (size_t)n;
		c->out_len -= (size_t)n;
	}
	if (!c->out_len)
		c->out_head = 0;
	conn_update_events(c);
}

/*
 * The socket took bytes: wake producers that paused at OUTQ_HIGH once the
 * queue is below OUTQ_LOW. Only from the event loop, never from inside a
 * send, so producers are not re-entered.
 */
static void conn_drained(struct conn *c)
{
	if (c->out_len >= OUTQ_LOW)
		return;
	for (struct req *r = c->reqs, *next; r && !c->dead; r = next) {
		next = r->next;
		if (r->ops->on_drain)
			r->ops->on_drain(r);
	}
}

int conn_send(struct conn *c, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
              size_t len)
{
	size_t need = FRAME_HDR_SIZE + len;

	if (c->dead)
		return -EPIPE;
	if (len > FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (c->out_head + c->out_len + need > c->out_cap) {
		/* Compact first; grow only if that is not enough. */
		if (c->out_len)
			memmove(c->out, c->out + c->out_head, c->out_len);
		c->out_head = 0;
		if (c->out_len + need > c->out_cap) {
			size_t cap = c->out_cap ? c->out_cap : 4096;
			uint8_t *nb;

			while (cap < c->out_len + need)
				cap *= 2;
			nb = realloc(c->out, cap);
			if (!nb) {
				c->dead = true;
				return -ENOMEM;
			}
			c->out = nb;
			c->out_cap = cap;
		}
	}
	frame_encode_hdr(c->out + c->out_head + c->out_len, type, flags, id, (uint32_t)len);
	if (len)
		memcpy(c->out + c->out_head + c->out_len + FRAME_HDR_SIZE, payload, len);
	c->out_len += need;
	conn_flush(c);
	return c->dead ? -EPIPE : 0;
}

int conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int ret;

	json_decref(j);
	if (!s)
		return conn_send_error(c, id, "io_error", "cannot encode the reply");
	ret = conn_send(c, type, 0, id, s, strlen(s));
	free(s);
	return ret;
}

int conn_send_error(struct conn *c, uint32_t id, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *j;
	char *s;
	int ret;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s, s:s}", "code", code, "message", msg);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return -ENOMEM;
	ret = conn_send(c, FRAME_ERROR, 0, id, s, strlen(s));
	free(s);
	return ret;
}

void req_register(struct conn *c, struct req *r, uint32_t id, const struct req_ops *ops)
{
	r->conn = c;
	r->id = id;
	r->ops = ops;
	r->next = c->reqs;
	c->reqs = r;
}

void req_unregister(struct req *r)
{
	for (struct req **pp = &r->conn->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			return;
		}
	}
}

struct req *req_find(struct conn *c, uint32_t id)
{
	for (struct req *r = c->reqs; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

static void dispatch_request(struct conn *c, uint32_t id, json_t *j)
{
	const char *op = json_string_value(json_object_get(j, "op"));

	if (!op) {
		conn_send_error(c, id, "bad_request", "request needs an \"op\" string");
		return;
	}
	if (req_find(c, id)) {
		conn_send_error(c, id, "duplicate_id", "request id %u is still in use", id);
		return;
	}
	if (!strcmp(op, "exec"))
		op_exec(c, id, j);
	else if (!strncmp(op, "job.", 4))
		op_job(c, id, op, j);
	else if (!strncmp(op, "file.", 5))
		op_file(c, id, op, j);
	else if (!strncmp(op, "tar.", 4))
		op_tar(c, id, op, j);
	else if (!strncmp(op, "env.", 4))
		op_env(c, id, op, j);
	else if (!strcmp(op, "info"))
		op_info(c, id, j);
	else if (!strcmp(op, "resumed"))
		op_resumed(c, id, j);
	else
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
}

static void handle_frame(struct conn *c, const struct frame *f)
{
	json_error_t err;
	json_t *j;
	struct req *r;

	switch (f->type) {
	case FRAME_HELLO:
		conn_send_json(c, FRAME_HELLO, f->id,
		               json_pack("{s:i, s:s}", "protocol", PROTO_VERSION, "agent",
		                         "husk-agent " AGENT_VERSION));
		return;
	case FRAME_REQUEST:
		j = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, &err);
		if (!j || !json_is_object(j)) {
			conn_send_error(c, f->id, "bad_json", "request is not a JSON object: %s",
			                j ? "wrong type" : err.text);
			json_decref(j);
			return;
		}
		dispatch_request(c, f->id, j);
		json_decref(j);
		return;
	case FRAME_STDIN:
	case FRAME_DATA:
	case FRAME_CANCEL:
	case FRAME_WINDOW:
		r = req_find(c, f->id);
		if (r && r->ops->on_frame)
			r->ops->on_frame(r, f);
		else if (f->type != FRAME_CANCEL)
			conn_send_error(c, f->id, "not_found", "no request %u takes %s frames",
			                f->id, frame_type_name(f->type));
		return;
	default:
		conn_send_error(c, f->id, "bad_frame", "frame type %u is not for the agent",
		                f->type);
		return;
	}
}

static void conn_read(struct conn *c)
{
	uint8_t buf[65536];
	ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
	size_t off = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		c->dead = true;
		return;
	}
	while (off < (size_t)n && !c->dead) {
		struct frame f;
		size_t used;
		enum frame_status st =
			frame_reader_feed(&c->rd, buf + off, (size_t)n - off, &used, &f);

		off += used;
		if (st == FRAME_OK)
			handle_frame(c, &f);
		else if (st == FRAME_TOO_LARGE)
			conn_send_error(c, f.id, "frame_too_large",
			                "a %u-byte frame exceeds the %u-byte limit", f.len,
			                FRAME_MAX_PAYLOAD);
		else if (st == FRAME_BAD) {
			conn_send_error(c, 0, "bad_frame", "impossible frame length; closing");
			c->dead = true;
		}
	}
}

static void conn_event(void *ctx, uint32_t events)
{
	struct conn *c = ctx;

	if (events & EPOLLOUT) {
		conn_flush(c);
		conn_drained(c);
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->dead)
		conn_read(c);
	if (c->dead)
		conn_close(c);
}

static void conn_close(struct conn *c)
{
	struct agent *a = c->a;
	void (*on_close)(void *arg) = c->on_close;
	void *arg = c->on_close_arg;

	c->dead = true;
	while (c->reqs) {
		struct req *r = c->reqs;

		c->reqs = r->next;
		r->ops->on_conn_lost(r);
	}
	for (struct conn **pp = &a->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	evloop_del(a->loop, c->fd);
	close(c->fd);
	frame_reader_free(&c->rd);
	free(c->out);
	free(c);
	/* Last: the hook may open a new connection. */
	if (on_close)
		on_close(arg);
}

int conn_adopt(struct agent *a, int fd, struct conn **out)
{
	struct conn *c = calloc(1, sizeof(*c));
	int ret = c ? evloop_add(a->loop, fd, EPOLLIN, conn_event, c) : -ENOMEM;

	if (ret) {
		free(c);
		close(fd);
		return ret;
	}
	c->a = a;
	c->fd = fd;
	c->events = EPOLLIN;
	frame_reader_init(&c->rd, FRAME_MAX_PAYLOAD);
	c->next = a->conns;
	a->conns = c;
	if (out)
		*out = c;
	return 0;
}

void conn_on_close(struct conn *c, void (*fn)(void *arg), void *arg)
{
	c->on_close = fn;
	c->on_close_arg = arg;
}

static void sigchld_event(void *ctx, uint32_t events)
{
	struct agent *a = ctx;
	struct signalfd_siginfo si;

	(void)events;
	while (read(a->sigchld_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo != SIGCHLD && !a->pid1)
			evloop_stop(a->loop);
	}
	proc_reap(a);
}

struct agent *agent_create(void)
{
	struct agent *a = calloc(1, sizeof(*a));
	sigset_t mask;

	if (!a)
		return NULL;
	a->listen_fd = -1;
	a->env = json_object();
	a->loop = evloop_create();
	/* SIGCHLD reaps; SIGTERM and SIGINT end the loop (and a clean exit). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	a->sigchld_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (!a->env || !a->loop || a->sigchld_fd < 0 ||
	    evloop_add(a->loop, a->sigchld_fd, EPOLLIN, sigchld_event, a)) {
		agent_destroy(a);
		return NULL;
	}
	return a;
}

int agent_run(struct agent *a)
{
	return evloop_run(a->loop);
}

void agent_destroy(struct agent *a)
{
	if (!a)
		return;
	/* Before the connections go: closing the dialled one must not redial. */
	dial_destroy(a);
	while (a->conns)
		conn_close(a->conns);
	jobs_destroy(a);
	if (a->listen_fd >= 0) {
		evloop_del(a->loop, a->listen_fd);
		close(a->listen_fd);
	}
	if (a->sigchld_fd >= 0) {
		evloop_del(a->loop, a->sigchld_fd);
		close(a->sigchld_fd);
	}
	evloop_destroy(a->loop);
	json_decref(a->env);
	free(a);
}
