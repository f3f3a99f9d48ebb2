// SPDX-License-Identifier: MIT
/*
 * One agent connection on a libuv loop (agent_session.h): frames in through
 * a frame_reader, frames out as one uv_write each (header and payload in one
 * buffer, so frames never interleave), calls in a list keyed by request id.
 *
 * Callbacks that an API call would otherwise have to make at once (an input
 * released, the calls and closed() of a connection that failed) wait for
 * the session's idle handle, which runs them from the loop. The exception
 * is agent_session_close(): it ends the calls in flight itself, because the
 * caller is tearing down and nothing may come after it returns.
 */
#include "agent_session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

/* An input goes out in frames of this size... */
#define IN_CHUNK (64 * 1024)
/* ...and the next one only while less than this is waiting to be written. */
#define IN_HIGH_WATER (256 * 1024)

enum session_state {
	S_OPEN,    /* reading and writing */
	S_FAILED,  /* the connection ended: the idle handle tells the calls, then closed() */
	S_ENDED,   /* ...and they have been told; waiting for agent_session_close */
	S_CLOSING, /* agent_session_close ran: no callback any more; handles closing */
};

struct agent_call {
	struct agent_session *s;
	struct agent_call *prev, *next;
	uint32_t id;
	struct agent_call_ops ops;
	void *arg;
	struct agent_input in;
	size_t in_off;
	bool in_active;   /* frames of in still to send (at least the END one) */
	bool release_due; /* in is no longer needed: release() from the loop */
	bool cancelled;   /* CANCEL sent, or the call is ending: none to send */
};

struct agent_session {
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_pipe_t pipe;
		uv_tcp_t tcp;
	} h;
	uv_idle_t kick; /* runs deferred callbacks from the loop */
	int open_handles;
	struct agent_session_ops ops;
	void *arg;
	enum session_state state;
	int err;     /* S_FAILED: what closed() gets (0 for EOF) */
	bool taking; /* inside take(): no agent_session_feed from a callback */
	uint32_t next_id;
	struct agent_call *head, *tail; /* in flight; the input pump rotates it */
	unsigned ncalls;
	size_t queued; /* bytes in uv_write requests not completed yet */
	struct frame_reader rd;
	/* Every read is parsed at once, so one buffer serves them all. */
	uint8_t rbuf[64 * 1024];
};

struct wreq {
	uv_write_t req;
	struct agent_session *s;
	size_t len;
	uint8_t buf[]; /* header, then payload */
};

static void pump(struct agent_session *s);
static void on_kick(uv_idle_t *h);

/* Runs on_kick on the loop's next turn; starting an active idle handle is a no-op. */
static void kick(struct agent_session *s)
{
	if (s->state != S_CLOSING)
		uv_idle_start(&s->kick, on_kick);
}

static void list_unlink(struct agent_session *s, struct agent_call *c)
{
	*(c->prev ? &c->prev->next : &s->head) = c->next;
	*(c->next ? &c->next->prev : &s->tail) = c->prev;
	c->prev = c->next = NULL;
}

static void list_append(struct agent_session *s, struct agent_call *c)
{
	c->prev = s->tail;
	c->next = NULL;
	*(s->tail ? &s->tail->next : &s->head) = c;
	s->tail = c;
}

static struct agent_call *find_call(const struct agent_session *s, uint32_t id)
{
	for (struct agent_call *c = s->head; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/*
 * The connection is gone (or unusable): stop reading and let the idle
 * handle tell the calls and the owner, so that no API call that noticed
 * the failure runs a callback itself.
 */
static void fail(struct agent_session *s, int err)
{
	if (s->state != S_OPEN)
		return;
	/* A write into a peer that hung up is the same event as its reset. */
	s->err = err == -EPIPE ? -ECONNRESET : err;
	s->state = S_FAILED;
	uv_read_stop(&s->h.stream);
	kick(s);
}

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	struct agent_session *s = w->s;

	s->queued -= w->len;
	free(w);
	if (s->state != S_OPEN)
		return;
	if (status < 0) {
		fail(s, status);
		return;
	}
	pump(s);
}

/* Queues one frame, copied: the caller's buffer may go as soon as this returns. */
static int send_frame(struct agent_session *s, uint8_t type, uint8_t flags, uint32_t id,
                      const void *p, size_t len)
{
	struct wreq *w;
	uv_buf_t b;
	int ret;

	if (len > FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	w = malloc(sizeof(*w) + FRAME_HDR_SIZE + len);
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->len = FRAME_HDR_SIZE + len;
	frame_encode_hdr(w->buf, type, flags, id, (uint32_t)len);
	if (len)
		memcpy(w->buf + FRAME_HDR_SIZE, p, len);
	b = uv_buf_init((char *)w->buf, (unsigned)w->len);
	ret = uv_write(&w->req, &s->h.stream, &b, 1, on_written);
	if (ret < 0) {
		free(w);
		return ret;
	}
	s->queued += w->len;
	return 0;
}

/* The input's last frame is queued (or the input is dropped): release it from the loop. */
static void input_finished(struct agent_session *s, struct agent_call *c)
{
	c->in_active = false;
	if (c->in.release) {
		c->release_due = true;
		kick(s);
	}
}

/*
 * Sends input chunks while the write queue is below the high-water mark,
 * one chunk per call in turn: a call served goes to the tail, so two big
 * uploads share the connection instead of the first starving the second.
 */
static void pump(struct agent_session *s)
{
	while (s->state == S_OPEN && s->queued < IN_HIGH_WATER) {
		struct agent_call *c = s->head;
		size_t n;
		bool end;
		int ret;

		while (c && !c->in_active)
			c = c->next;
		if (!c)
			return;
		n = c->in.len - c->in_off < IN_CHUNK ? c->in.len - c->in_off : IN_CHUNK;
		end = c->in_off + n == c->in.len;
		ret = send_frame(s, c->in.type, end ? FRAME_F_END : 0, c->id,
		                 (const uint8_t *)c->in.data + c->in_off, n);
		if (ret < 0) {
			fail(s, ret);
			return;
		}
		c->in_off += n;
		if (end)
			input_finished(s, c);
		list_unlink(s, c);
		list_append(s, c);
	}
}

static void release_input(struct agent_call *c)
{
	void (*fn)(void *) = c->in.release;

	c->in.release = NULL;
	c->release_due = false;
	if (fn)
		fn(c->in.release_arg);
}

/*
 * Takes c out of the session and tells its owner: the input's release
 * first (the session holds no pointer into it from here on), then done().
 * A release() that closed the session turns the end into -ECANCELED, as
 * for every other call that close ended.
 */
static void end_call(struct agent_session *s, struct agent_call *c, int rc, json_t *reply)
{
	list_unlink(s, c);
	s->ncalls--;
	c->cancelled = true;
	c->in_active = false;
	release_input(c);
	if (s->state == S_CLOSING && rc != -ECANCELED) {
		rc = -ECANCELED;
		reply = NULL;
	}
	if (c->ops.done)
		c->ops.done(c->arg, rc, reply);
	free(c);
}

/* Releases due inputs; restarts the walk after each, since a callback may change the list. */
static void run_releases(struct agent_session *s)
{
	struct agent_call *c = s->head;

	while (c && s->state != S_CLOSING) {
		if (!c->release_due) {
			c = c->next;
			continue;
		}
		release_input(c);
		c = s->head;
	}
}

static void notify_failure(struct agent_session *s)
{
	struct agent_call *c;

	while ((c = s->head)) {
		end_call(s, c, s->err ? s->err : -ECONNRESET, NULL);
		if (s->state == S_CLOSING)
			return;
	}
	s->state = S_ENDED;
	if (s->ops.closed)
		s->ops.closed(s->arg, s->err);
}

static void on_kick(uv_idle_t *h)
{
	struct agent_session *s = h->data;

	uv_idle_stop(h);
	run_releases(s);
	if (s->state == S_FAILED)
		notify_failure(s);
}

/* A RESULT or ERROR: the call's end. Unreadable JSON is an error of its own. */
static void final_frame(struct agent_session *s, struct agent_call *c, const struct frame *f,
                        const uint8_t *p)
{
	json_t *reply = json_loadb((const char *)p, f->len, 0, NULL);
	int rc = f->type == FRAME_ERROR;

	if (!reply) {
		reply = json_pack("{s:s, s:s}", "code", "bad_json", "message",
		                  "the agent's reply is not JSON");
		rc = reply ? 1 : -ENOMEM;
	}
	/*
	 * The agent answered before taking all of our input (a file.write
	 * that failed waits for its END): CANCEL lets it drop the request.
	 */
	if (c->in_active && !c->cancelled) {
		int ret = send_frame(s, FRAME_CANCEL, 0, c->id, NULL, 0);

		if (ret < 0)
			fail(s, ret);
	}
	end_call(s, c, rc, reply);
	json_decref(reply);
}

static void handle_frame(struct agent_session *s, const struct frame *f)
{
	static const uint8_t empty[1];
	const uint8_t *p = f->payload ? f->payload : empty; /* an empty frame has no buffer */
	struct agent_call *c;

	if (f->type == FRAME_HELLO) {
		json_t *j = json_loadb((const char *)p, f->len, 0, NULL);

		if (s->ops.hello)
			s->ops.hello(s->arg, j);
		json_decref(j);
		return;
	}
	/* A frame for a call that has ended (or never was) is normal: ignore it. */
	c = find_call(s, f->id);
	if (!c)
		return;
	switch (f->type) {
	case FRAME_STDOUT:
	case FRAME_STDERR:
	case FRAME_DATA:
		if (c->ops.data)
			c->ops.data(c->arg, f->type, p, f->len);
		return;
	case FRAME_RESULT:
	case FRAME_ERROR:
		final_frame(s, c, f, p);
		return;
	default:
		/* Client-to-agent types from the agent: not framing errors, nothing to do. */
		return;
	}
}

/* Parses bytes from the agent; stops once a callback closed the session. */
static int take(struct agent_session *s, const uint8_t *p, size_t len)
{
	s->taking = true;
	while (len && s->state == S_OPEN) {
		struct frame f;
		size_t used;
		enum frame_status st = frame_reader_feed(&s->rd, p, len, &used, &f);

		p += used;
		len -= used;
		if (st == FRAME_OK)
			handle_frame(s, &f);
		else if (st != FRAME_NEED_MORE)
			fail(s, -EPROTO);
	}
	s->taking = false;
	if (s->state == S_OPEN)
		return 0;
	return s->state == S_CLOSING ? -ECANCELED : s->err;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct agent_session *s = h->data;

	(void)suggested;
	*buf = uv_buf_init((char *)s->rbuf, sizeof(s->rbuf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct agent_session *s = st->data;

	if (n > 0)
		(void)take(s, (const uint8_t *)buf->base, (size_t)n);
	else if (n < 0)
		fail(s, n == UV_EOF ? 0 : (int)n);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct agent_session *s = h->data;

	if (--s->open_handles)
		return;
	frame_reader_free(&s->rd);
	free(s);
}

/* Closes whatever handles s has; it is freed once they are closed. */
static void discard(struct agent_session *s)
{
	s->state = S_CLOSING;
	uv_close((uv_handle_t *)&s->kick, on_handle_closed);
	if (s->open_handles > 1)
		uv_close(&s->h.handle, on_handle_closed);
}

static int session_new(uv_loop_t *loop, uv_handle_type type, const struct agent_session_ops *ops,
                       void *arg, struct agent_session **out)
{
	struct agent_session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	if (ops)
		s->ops = *ops;
	s->arg = arg;
	s->next_id = 1;
	frame_reader_init(&s->rd, FRAME_MAX_PAYLOAD);
	uv_idle_init(loop, &s->kick);
	s->kick.data = s;
	s->open_handles = 1;
	ret = type == UV_TCP ? uv_tcp_init(loop, &s->h.tcp) : uv_pipe_init(loop, &s->h.pipe, 0);
	if (ret < 0) {
		discard(s);
		return ret;
	}
	s->h.handle.data = s;
	s->open_handles = 2;
	*out = s;
	return 0;
}

static int session_start(struct agent_session *s)
{
	if (s->h.handle.type == UV_TCP)
		uv_tcp_nodelay(&s->h.tcp, 1); /* requests are small: no Nagle delay */
	return uv_read_start(&s->h.stream, on_alloc, on_read);
}

int agent_session_accept(uv_stream_t *server, const struct agent_session_ops *ops, void *arg,
                         struct agent_session **out)
{
	struct agent_session *s;
	int ret;

	if (server->type != UV_TCP && server->type != UV_NAMED_PIPE)
		return -EINVAL;
	ret = session_new(server->loop, server->type, ops, arg, &s);
	if (ret < 0)
		return ret;
	ret = uv_accept(server, &s->h.stream);
	if (ret == 0)
		ret = session_start(s);
	if (ret < 0) {
		discard(s);
		return ret;
	}
	*out = s;
	return 0;
}

int agent_session_open_fd(uv_loop_t *loop, int fd, const struct agent_session_ops *ops, void *arg,
                          struct agent_session **out)
{
	struct agent_session *s;
	int ret = session_new(loop, UV_NAMED_PIPE, ops, arg, &s);

	if (ret < 0) {
		close(fd);
		return ret;
	}
	ret = uv_pipe_open(&s->h.pipe, fd);
	if (ret < 0) {
		close(fd); /* not the handle's yet */
		discard(s);
		return ret;
	}
	ret = session_start(s);
	if (ret < 0) {
		discard(s); /* closes fd with the handle */
		return ret;
	}
	*out = s;
	return 0;
}

void agent_session_close(struct agent_session *s)
{
	struct agent_call *c;

	if (!s || s->state == S_CLOSING)
		return;
	s->state = S_CLOSING;
	while ((c = s->head))
		end_call(s, c, -ECANCELED, NULL);
	/* Writes still queued complete with UV_ECANCELED before the handle's close callback. */
	discard(s);
}

unsigned agent_session_calls(const struct agent_session *s)
{
	return s->ncalls;
}

size_t agent_session_queued(const struct agent_session *s)
{
	return s->queued;
}

static uint32_t fresh_id(struct agent_session *s)
{
	for (;;) {
		uint32_t id = s->next_id++;

		/* After 2^32 requests the counter wraps: skip 0 and ids still in flight. */
		if (id && !find_call(s, id))
			return id;
	}
}

int agent_call_start(struct agent_session *s, json_t *req, const struct agent_input *in,
                     const struct agent_call_ops *ops, void *arg, struct agent_call **out)
{
	struct agent_call *c;
	char *js;
	int ret;

	if (s->state != S_OPEN)
		return -EPIPE;
	if (!json_is_object(req) || (in && in->type != FRAME_STDIN && in->type != FRAME_DATA) ||
	    (in && in->len && !in->data))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	js = json_dumps(req, JSON_COMPACT);
	if (!c || !js) {
		ret = -ENOMEM;
		goto err_free;
	}
	c->s = s;
	c->id = fresh_id(s);
	if (ops)
		c->ops = *ops;
	c->arg = arg;
	ret = send_frame(s, FRAME_REQUEST, 0, c->id, js, strlen(js));
	if (ret < 0) {
		/* Nothing was queued; a broken socket ends the session for everyone else. */
		if (ret != -ENOMEM && ret != -EMSGSIZE)
			fail(s, ret);
		goto err_free;
	}
	free(js);
	list_append(s, c);
	s->ncalls++;
	if (in) {
		c->in = *in;
		c->in_active = true;
		pump(s);
	}
	if (out)
		*out = c;
	return 0;

err_free:
	free(js);
	free(c);
	return ret;
}

void agent_call_cancel(struct agent_call *c)
{
	struct agent_session *s = c->s;
	int ret;

	if (c->cancelled)
		return;
	c->cancelled = true;
	if (s->state != S_OPEN)
		return;
	/* Input the agent is told to stop taking need not go out any more. */
	if (c->in_active)
		input_finished(s, c);
	ret = send_frame(s, FRAME_CANCEL, 0, c->id, NULL, 0);
	if (ret < 0)
		fail(s, ret);
}

int agent_session_feed(struct agent_session *s, const void *buf, size_t len)
{
	if (s->taking)
		return -EBUSY;
	if (s->state != S_OPEN)
		return -EPIPE;
	return take(s, buf, len);
}
