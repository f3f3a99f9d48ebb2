// SPDX-License-Identifier: MIT
/*
 * The calls of an agent session: each a request id in the session's list,
 * its REQUEST and its input sent as frames of one uv_write each (so frames
 * never interleave), the input paced by the write queue. And the callbacks
 * that must not run inside an API call: the idle handle runs them from the
 * loop (an input released, the calls and closed() of a connection that
 * failed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_session_int.h"

static void pump(struct agent_session *s);
static void on_kick(uv_idle_t *h);

/* Runs on_kick on the loop's next turn; starting an active idle handle is a no-op. */
void kick(struct agent_session *s)
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

struct agent_call *find_call(const struct agent_session *s, uint32_t id)
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
void fail(struct agent_session *s, int err)
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
int send_frame(struct agent_session *s, uint8_t type, uint8_t flags, uint32_t id, const void *p,
               size_t len)
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

/* One frame of c's streamed input: 0 sent, 1 none yet (c waits), or -errno. */
static int pull(struct agent_session *s, struct agent_call *c, bool *end)
{
	static uint8_t buf[IN_CHUNK]; /* the loop's thread only; send_frame copies it */
	long n;

	*end = false;
	n = c->in.read(c->in.read_arg, buf, sizeof(buf), end);
	if (n < 0) {
		n = 0;
		*end = true;
	}
	if (!n && !*end) {
		c->in_waiting = true;
		return 1;
	}
	return send_frame(s, c->in.type, *end ? FRAME_F_END : 0, c->id, buf,
	                  (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf));
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

		while (c && (!c->in_active || c->in_waiting))
			c = c->next;
		if (!c)
			return;
		if (c->in.read) {
			ret = pull(s, c, &end);
			if (ret == 1)
				continue; /* none yet: agent_call_input_ready brings it back */
		} else {
			n = c->in.len - c->in_off < IN_CHUNK ? c->in.len - c->in_off : IN_CHUNK;
			end = c->in_off + n == c->in.len;
			ret = send_frame(s, c->in.type, end ? FRAME_F_END : 0, c->id,
			                 (const uint8_t *)c->in.data + c->in_off, n);
			c->in_off += n;
		}
		if (ret < 0) {
			fail(s, ret);
			return;
		}
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
void end_call(struct agent_session *s, struct agent_call *c, int rc, json_t *reply)
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
	    (in && in->len && (!in->data || in->read)))
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

int agent_call_window(struct agent_call *c, unsigned rows, unsigned cols)
{
	char js[64];
	int n = snprintf(js, sizeof(js), "{\"rows\":%u,\"cols\":%u}", rows, cols);
	int ret;

	if (c->cancelled || c->s->state != S_OPEN)
		return -EPIPE;
	ret = send_frame(c->s, FRAME_WINDOW, 0, c->id, js, (size_t)n);
	if (ret < 0 && ret != -ENOMEM)
		fail(c->s, ret);
	return ret;
}

void agent_call_input_ready(struct agent_call *c)
{
	if (!c->in_active || !c->in_waiting)
		return;
	c->in_waiting = false;
	pump(c->s);
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
