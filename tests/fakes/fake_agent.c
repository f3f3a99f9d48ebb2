// SPDX-License-Identifier: MIT
/*
 * The fake agent's side of the connection it dialled: frames in and out,
 * dispatch by op, and the small ops (info, env, resumed). Framing and error
 * codes follow guest-agent/PROTOCOL.md as husk-agent answers them.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

struct conn {
	struct fake *fk;
	int fd;
	struct frame_reader rd;
	uint8_t *out;
	size_t head, len, cap;
	bool dead;
	struct req *reqs;
};

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

int64_t wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

int64_t guest_ms(const struct fake *fk)
{
	int64_t now = fk->paused ? fk->paused_at : mono_ms();

	return now - fk->paused_total;
}

struct fake *conn_fake(const struct conn *c)
{
	return c->fk;
}

size_t conn_queued(const struct conn *c)
{
	return c->len;
}

int conn_fd(const struct conn *c)
{
	return c->fd;
}

bool conn_dead(const struct conn *c)
{
	return c->dead;
}

short conn_poll_events(const struct conn *c)
{
	return (short)((c->len < FAKE_INPUT_HOLD ? POLLIN : 0) | (c->len ? POLLOUT : 0));
}

static void conn_flush(struct conn *c)
{
	while (c->len && !c->dead) {
		ssize_t n = send(c->fd, c->out + c->head, c->len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			c->dead = true;
			break;
		}
		c->head += (size_t)n;
		c->len -= (size_t)n;
	}
	if (!c->len)
		c->head = 0;
}

int conn_send(struct conn *c, uint8_t type, uint8_t flags, uint32_t id, const void *p, size_t n)
{
	size_t need = FRAME_HDR_SIZE + n;

	if (c->dead)
		return -EPIPE;
	if (n > FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (c->head + c->len + need > c->cap) {
		if (c->len)
			memmove(c->out, c->out + c->head, c->len);
		c->head = 0;
		if (c->len + need > c->cap) {
			size_t cap = c->cap ? c->cap : 4096;
			uint8_t *nb;

			while (cap < c->len + need)
				cap *= 2;
			nb = realloc(c->out, cap);
			if (!nb) {
				c->dead = true;
				return -ENOMEM;
			}
			c->out = nb;
			c->cap = cap;
		}
	}
	frame_encode_hdr(c->out + c->head + c->len, type, flags, id, (uint32_t)n);
	if (n)
		memcpy(c->out + c->head + c->len + FRAME_HDR_SIZE, p, n);
	c->len += need;
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
	char msg[512], *s;
	va_list ap;
	json_t *j;
	int ret;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s, s:s}", "code", code, "message", msg);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s) {
		c->dead = true;
		return -ENOMEM;
	}
	ret = conn_send(c, FRAME_ERROR, 0, id, s, strlen(s));
	free(s);
	return ret;
}

void req_register(struct conn *c, struct req *r, uint32_t id, const struct req_ops *ops)
{
	r->c = c;
	r->id = id;
	r->ops = ops;
	r->next = c->reqs;
	c->reqs = r;
}

void req_unregister(struct req *r)
{
	for (struct req **pp = &r->c->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			return;
		}
	}
}

static struct req *req_find(struct conn *c, uint32_t id)
{
	for (struct req *r = c->reqs; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

void conn_tick(struct conn *c)
{
	for (struct req *r = c->reqs, *next; r && !c->dead; r = next) {
		next = r->next; /* a tick may end (and free) its own request */
		if (r->ops->tick)
			r->ops->tick(r);
	}
}

int64_t conn_deadline(const struct conn *c)
{
	int64_t best = -1, t;

	for (struct req *r = c->reqs; r; r = r->next) {
		t = r->ops->deadline ? r->ops->deadline(r) : -1;
		if (t >= 0 && (best < 0 || t < best))
			best = t;
	}
	return best;
}

static json_t *hello_json(const struct fake *fk)
{
	return json_pack("{s:i, s:s, s:i, s:s}", "protocol", PROTO_VERSION, "agent", "fake-agent",
	                 "dial", (int)fk->g.dials, "boot_id", fk->g.boot_id);
}

struct conn *conn_create(struct fake *fk, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return NULL;
	}
	c->fk = fk;
	c->fd = fd;
	frame_reader_init(&c->rd, FRAME_MAX_PAYLOAD);
	conn_send_json(c, FRAME_HELLO, 0, hello_json(fk));
	return c;
}

void conn_free(struct conn *c)
{
	if (!c)
		return;
	c->dead = true;
	while (c->reqs) {
		struct req *r = c->reqs;

		c->reqs = r->next;
		r->ops->drop(r);
	}
	close(c->fd);
	frame_reader_free(&c->rd);
	free(c->out);
	free(c);
}

static void op_env(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	json_t *env = c->fk->g.env, *vars = json_object_get(req, "vars"), *v;
	const char *k;

	if (!strcmp(op, "env.set")) {
		if (!json_is_object(vars)) {
			conn_send_error(c, id, "bad_request", "vars must be an object");
			return;
		}
		json_object_foreach(vars, k, v)
		{
			if (!*k || strchr(k, '=') || (!json_is_string(v) && !json_is_null(v))) {
				conn_send_error(
					c, id, "bad_request",
					"'%.64s': names need no '=', values are strings or null",
					k);
				return;
			}
		}
		json_object_foreach(vars, k, v)
		{
			if (json_is_null(v))
				json_object_del(env, k);
			else
				json_object_set(env, k, v);
		}
	} else if (strcmp(op, "env.get")) {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
		return;
	}
	conn_send_json(c, FRAME_RESULT, id, json_pack("{s:O}", "env", env));
}

static void op_info(struct conn *c, uint32_t id)
{
	const struct guest *g = &c->fk->g;

	/* A guest a quarter busy since it booted, on a 1 GiB disk half full. */
	json_int_t total = (json_int_t)(guest_ms(c->fk) + 1) * (json_int_t)g->vcpus;

	conn_send_json(
		c, FRAME_RESULT, id,
		json_pack(
			"{s:s, s:i, s:i, s:s, s:i, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, s:i}",
			"version", "fake", "protocol", PROTO_VERSION, "uptime_s", 0, "kernel",
			"fake", "cpus", (int)g->vcpus, "memory", "total_bytes", (json_int_t)g->mem,
			"free_bytes", (json_int_t)g->mem, "disk", "total_bytes",
			(json_int_t)1 << 30, "free_bytes", (json_int_t)1 << 29, "cpu", "busy_ms",
			total / 4, "total_ms", total, "resumed", (int)g->resumed));
}

/* As husk-agent checks it: time_ns > 0 and a seed of 1 to 64 bytes in lowercase hex. */
static void op_resumed(struct conn *c, uint32_t id, json_t *req)
{
	const char *seed = json_string_value(json_object_get(req, "seed"));
	json_t *ns = json_object_get(req, "time_ns");
	size_t n = seed ? strlen(seed) : 0;

	if (!json_is_integer(ns) || json_integer_value(ns) <= 0 || n == 0 || n > 128 || n % 2 ||
	    strspn(seed, "0123456789abcdef") != n) {
		conn_send_error(c, id, "bad_request",
		                "resumed needs time_ns (> 0) and seed (1 to 64 bytes in hex)");
		return;
	}
	/* As a restored guest's late reset of its old connections can: the new one goes too. */
	if ((c->fk->fail & FAIL_DROP_RESUMED) && !c->fk->dropped) {
		c->fk->dropped = true;
		c->dead = true;
		fprintf(stderr, "fake-vmm: dropped the connection under resumed\n");
		return;
	}
	if (c->fk->fail & FAIL_MUTE_RESUMED) {
		fprintf(stderr, "fake-vmm: took resumed, will not answer\n");
		return;
	}
	c->fk->g.resumed++;
	conn_send_json(c, FRAME_RESULT, id, json_object());
}

static void dispatch(struct conn *c, uint32_t id, json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));

	if (!op) {
		conn_send_error(c, id, "bad_request", "request needs an \"op\" string");
		return;
	}
	if (req_find(c, id)) {
		conn_send_error(c, id, "duplicate_id", "request id %u is still in use", id);
		return;
	}
	if (!strcmp(op, "exec"))
		op_exec(c, id, req);
	else if (!strncmp(op, "job.", 4))
		op_job(c, id, op, req);
	else if (!strncmp(op, "file.", 5))
		op_file(c, id, op, req);
	else if (!strncmp(op, "env.", 4))
		op_env(c, id, op, req);
	else if (!strcmp(op, "info"))
		op_info(c, id);
	else if (!strcmp(op, "resumed"))
		op_resumed(c, id, req);
	else
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
}

static void handle_frame(struct conn *c, const struct frame *f)
{
	json_error_t err;
	struct req *r;
	json_t *j;

	switch (f->type) {
	case FRAME_HELLO:
		conn_send_json(c, FRAME_HELLO, f->id, hello_json(c->fk));
		return;
	case FRAME_REQUEST:
		j = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, &err);
		if (!j || !json_is_object(j))
			conn_send_error(c, f->id, "bad_json", "request is not a JSON object: %s",
			                j ? "wrong type" : err.text);
		else
			dispatch(c, f->id, j);
		json_decref(j);
		return;
	case FRAME_STDIN:
	case FRAME_DATA:
	case FRAME_CANCEL:
	case FRAME_WINDOW:
		r = req_find(c, f->id);
		if (r)
			r->ops->on_frame(r, f);
		else if (f->type != FRAME_CANCEL)
			conn_send_error(c, f->id, "not_found", "no request %u takes %s frames",
			                f->id, frame_type_name(f->type));
		return;
	default:
		conn_send_error(c, f->id, "bad_frame", "frame type %u is not for the agent",
		                f->type);
	}
}

static void conn_read(struct conn *c)
{
	uint8_t buf[65536];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	size_t off = 0, used;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		c->dead = true;
		return;
	}
	while (off < (size_t)n && !c->dead) {
		struct frame f;
		enum frame_status st =
			frame_reader_feed(&c->rd, buf + off, (size_t)n - off, &used, &f);

		off += used;
		if (st == FRAME_OK) {
			handle_frame(c, &f);
		} else if (st == FRAME_TOO_LARGE) {
			conn_send_error(c, f.id, "frame_too_large",
			                "a %u-byte frame exceeds the %u-byte limit", f.len,
			                FRAME_MAX_PAYLOAD);
		} else if (st == FRAME_BAD) {
			conn_send_error(c, 0, "bad_frame", "impossible frame length; closing");
			c->dead = true;
		}
	}
}

void conn_io(struct conn *c, short revents)
{
	if (revents & POLLOUT)
		conn_flush(c);
	/* A hang-up is read even while input is held, so it is not missed. */
	if (!c->dead && (revents & (POLLIN | POLLHUP | POLLERR)))
		conn_read(c);
}
