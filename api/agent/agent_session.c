// SPDX-License-Identifier: MIT
/*
 * One agent connection on a libuv loop (agent_session.h): its handles, and
 * frames in through a frame_reader, dispatched to the calls (agent_call.c)
 * by request id.
 *
 * Callbacks that an API call would otherwise have to make at once wait for
 * the session's idle handle (agent_call.c). The exception is
 * agent_session_close(): it ends the calls in flight itself, because the
 * caller is tearing down and nothing may come after it returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_session_int.h"

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

int agent_session_feed(struct agent_session *s, const void *buf, size_t len)
{
	if (s->taking)
		return -EBUSY;
	if (s->state != S_OPEN)
		return -EPIPE;
	return take(s, buf, len);
}
