// SPDX-License-Identifier: MIT
/*
 * agent_session against a fake agent on a socketpair or an accepted
 * connection, for what a real agent never does: hang up mid-call, break
 * framing, send stray, late or unreadable frames; and to see what the
 * session writes (two inputs sharing the connection).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session_test.h"

struct peer {
	uv_pipe_t pipe;
	struct frame_reader rd;
	int requests, close_after;  /* hang up at the close_after-th REQUEST */
	int ends, close_after_ends; /* ...or at the close_after_ends-th input END */
	size_t in_bytes[4];         /* STDIN/DATA payload bytes by call id (1-3) */
	size_t others_at_first_end; /* input bytes of the other calls when the first one ended */
	bool answer, closed;
	uint8_t buf[65536];
};

static void peer_written(uv_write_t *w, int status)
{
	(void)status;
	free(w);
}

static void peer_send(struct peer *p, uint8_t type, uint32_t id, const char *payload)
{
	size_t len = strlen(payload);
	uv_write_t *w = malloc(sizeof(*w) + FRAME_HDR_SIZE + len);
	uint8_t *b = (uint8_t *)(w + 1);
	uv_buf_t buf = uv_buf_init((char *)b, (unsigned)(FRAME_HDR_SIZE + len));

	frame_encode_hdr(b, type, 0, id, (uint32_t)len);
	memcpy(b + FRAME_HDR_SIZE, payload, len);
	if (uv_write(w, (uv_stream_t *)&p->pipe, &buf, 1, peer_written))
		free(w);
}

static void peer_closed(uv_handle_t *h)
{
	struct peer *p = h->data;

	frame_reader_free(&p->rd);
	p->closed = true;
}

static void peer_close(struct peer *p)
{
	if (!uv_is_closing((uv_handle_t *)&p->pipe))
		uv_close((uv_handle_t *)&p->pipe, peer_closed);
}

static void peer_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct peer *p = h->data;

	(void)hint;
	*buf = uv_buf_init((char *)p->buf, sizeof(p->buf));
}

/* Answers "echo" around frames for ids not in flight, and "badjson" with unreadable JSON. */
static void peer_answer(struct peer *p, const struct frame *f)
{
	json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
	const char *op = json_string_value(json_object_get(j, "op"));

	if (op && !strcmp(op, "echo")) {
		peer_send(p, FRAME_STDOUT, f->id + 1000, "stray");
		peer_send(p, FRAME_RESULT, f->id + 1000, "{}");
		peer_send(p, FRAME_STDOUT, f->id, "hi");
		peer_send(p, FRAME_RESULT, f->id, "{\"ok\":true}");
		peer_send(p, FRAME_STDOUT, f->id, "late");
	} else if (op && !strcmp(op, "badjson")) {
		peer_send(p, FRAME_RESULT, f->id, "nope{");
	}
	json_decref(j);
}

static void peer_frame(struct peer *p, const struct frame *f)
{
	if (f->type == FRAME_REQUEST) {
		p->requests++;
		if (p->answer)
			peer_answer(p, f);
	} else if ((f->type == FRAME_DATA || f->type == FRAME_STDIN) && f->id < 4) {
		p->in_bytes[f->id] += f->len;
		if ((f->flags & FRAME_F_END) && p->ends++ == 0)
			p->others_at_first_end = p->in_bytes[1] + p->in_bytes[2] + p->in_bytes[3] -
			                         p->in_bytes[f->id];
	}
	if (p->requests == p->close_after || p->ends == p->close_after_ends)
		peer_close(p); /* hangs up mid-call */
}

static void peer_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct peer *p = st->data;
	const uint8_t *b = (const uint8_t *)buf->base;

	if (n < 0)
		peer_close(p);
	while (n > 0 && !uv_is_closing((uv_handle_t *)st)) {
		struct frame f;
		size_t used;

		if (frame_reader_feed(&p->rd, b, (size_t)n, &used, &f) == FRAME_OK)
			peer_frame(p, &f);
		b += used;
		n -= (ssize_t)used;
	}
}

static void peer_open(struct peer *p, int fd)
{
	memset(p, 0, sizeof(*p));
	p->close_after = p->close_after_ends = -1;
	frame_reader_init(&p->rd, FRAME_MAX_PAYLOAD);
	uv_pipe_init(loop, &p->pipe, 0);
	p->pipe.data = p;
	if (uv_pipe_open(&p->pipe, fd) ||
	    uv_read_start((uv_stream_t *)&p->pipe, peer_alloc, peer_read))
		abort();
}

/* A session on one end of a socketpair, the fake agent on the other. */
static void pair(struct sess *x, struct peer *p)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    agent_session_open_fd(loop, sv[0], &sess_ops, x, &x->s))
		abort();
	peer_open(p, sv[1]);
}

/* The agent goes away after three requests, one of them with its input still going out. */
static void t_peer_hangs_up(void)
{
	static struct peer p;
	struct sess x = {0};
	struct call k[3] = {{0}}, late = {0};
	size_t len = 2u << 20;
	uint8_t *in = random_bytes(len, 2);
	struct agent_input input = {.type = FRAME_DATA,
	                            .data = in,
	                            .len = len,
	                            .release = on_release,
	                            .release_arg = &k[0]};
	json_t *req = json_pack("{s:s}", "op", "info");
	int dones = 0, ret, bad = 0;

	pair(&x, &p);
	p.close_after = 3;
	x.dones = &dones;
	for (int i = 0; i < 3; i++) {
		k[i].dones = &dones;
		bad += !!start(x.s, json_pack("{s:s}", "op", "file.write"), i ? NULL : &input,
		               &k[i]);
	}
	wait_for(&x.closed, 1);
	in_api++;
	ret = agent_call_start(x.s, req, NULL, &call_ops, &late, NULL);
	in_api--;
	json_decref(req);
	drain();
	for (int i = 0; i < 3; i++)
		bad += k[i].done != 1 || k[i].rc != -ECONNRESET;
	check(!bad && x.closed == 1 && x.dones_at_closed == 3 && k[0].releases == 1,
	      "peer_hangs_up", "%d wrong, closed %d (rc %d) after %d dones, %d releases", bad,
	      x.closed, x.closed_rc, x.dones_at_closed, k[0].releases);
	check(ret == -EPIPE && !late.done, "start_after_end", "start gave %d", ret);
	agent_session_close(x.s);
	drain();
	check(x.closed == 1 && dones == 3 && !late.done, "close_after_end_silent",
	      "closed %d, %d dones", x.closed, dones);
	for (int i = 0; i < 3; i++)
		call_free(&k[i]);
	free(in);
}

/*
 * Two uploads at once take turns, a chunk each, instead of the first
 * holding the connection until it is done; then the agent closes cleanly
 * (EOF: closed(0)) before answering either.
 */
static void t_inputs_share(void)
{
	static struct peer p;
	struct sess x = {0};
	struct call k[2] = {{0}};
	size_t len = 2u << 20;
	uint8_t *in = random_bytes(len, 4);
	struct agent_input input = {
		.type = FRAME_DATA, .data = in, .len = len, .release = NULL, .release_arg = NULL};
	int dones = 0, bad = 0;

	pair(&x, &p);
	p.close_after_ends = 2;
	x.dones = &dones;
	for (int i = 0; i < 2; i++) {
		k[i].dones = &dones;
		bad += !!start(x.s, json_pack("{s:s}", "op", "file.write"), &input, &k[i]);
	}
	wait_for(&x.closed, 1);
	for (int i = 0; i < 2; i++)
		bad += k[i].done != 1 || k[i].rc != -ECONNRESET;
	check(!bad && x.closed == 1 && x.closed_rc == 0 && x.dones_at_closed == 2, "peer_eof",
	      "%d wrong, closed %d (rc %d) after %d dones", bad, x.closed, x.closed_rc,
	      x.dones_at_closed);
	check(p.in_bytes[1] == len && p.in_bytes[2] == len && p.others_at_first_end >= len / 2,
	      "inputs_share_connection", "%zu bytes of the other input when the first ended",
	      p.others_at_first_end);
	agent_session_close(x.s);
	drain();
	call_free(&k[0]);
	call_free(&k[1]);
	free(in);
}

/* Bad framing ends the session with -EPROTO: through feed, and from the socket. */
static void t_bad_framing(void)
{
	static struct peer p, q;
	struct sess x = {0}, y = {0};
	struct call k = {0}, l = {0};
	uint8_t hdr[FRAME_HDR_SIZE];
	uv_buf_t b = uv_buf_init((char *)hdr, sizeof(hdr));
	uv_write_t w;
	int dones = 0, fed;

	pair(&x, &p);
	pair(&y, &q);
	k.dones = l.dones = &dones;
	if (start(x.s, json_pack("{s:s}", "op", "info"), NULL, &k) ||
	    start(y.s, json_pack("{s:s}", "op", "info"), NULL, &l))
		abort();
	frame_encode_hdr(hdr, FRAME_RESULT, 0, 1, 0);
	hdr[3] = 4; /* a length below the header's own 8 bytes */
	in_api++;   /* the failure it causes is told from the loop, not inside feed */
	fed = agent_session_feed(x.s, hdr, sizeof(hdr));
	in_api--;
	frame_encode_hdr(hdr, FRAME_STDOUT, 0, 1, FRAME_MAX_PAYLOAD + 1);
	if (uv_write(&w, (uv_stream_t *)&q.pipe, &b, 1, NULL))
		abort();
	wait_for(&x.closed, 1);
	wait_for(&y.closed, 1);
	check(fed == -EPROTO && k.rc == -EPROTO && x.closed_rc == -EPROTO, "bad_length_eproto",
	      "feed %d, done %d, closed %d", fed, k.rc, x.closed_rc);
	check(l.rc == -EPROTO && y.closed_rc == -EPROTO, "oversized_frame_eproto",
	      "done %d, closed %d", l.rc, y.closed_rc);
	agent_session_close(x.s);
	agent_session_close(y.s);
	drain();
	call_free(&k);
	call_free(&l);
}

static struct sess accepted;
static int accepts;

static void on_connection(uv_stream_t *server, int status)
{
	if (status == 0 && !agent_session_accept(server, &sess_ops, &accepted, &accepted.s))
		accepts++;
}

/* huskd's side of an agent that dials in: a listener, and a session per connection. */
static void t_accept(void)
{
	static struct peer p;
	uv_pipe_t listener;
	struct call echo = {0}, bad = {0};
	char path[4096];
	int fd, dones = 0;

	snprintf(path, sizeof(path), "%s/accept.sock", tmpdir);
	uv_pipe_init(loop, &listener, 0);
	if (uv_pipe_bind(&listener, path) ||
	    uv_listen((uv_stream_t *)&listener, 8, on_connection) || (fd = connect_unix(path)) < 0)
		abort();
	peer_open(&p, fd);
	p.answer = true;
	peer_send(&p, FRAME_HELLO, 0, "{\"protocol\":1,\"agent\":\"fake\"}");
	wait_for(&accepted.hellos, 1);
	check(accepts == 1 && accepted.hellos == 1 &&
	              !strcmp(json_string_value(json_object_get(accepted.hello, "agent")), "fake"),
	      "accept_hello", "%d accepted, %d hellos", accepts, accepted.hellos);
	echo.dones = bad.dones = &dones;
	if (accepts != 1 || start(accepted.s, json_pack("{s:s}", "op", "echo"), NULL, &echo) ||
	    start(accepted.s, json_pack("{s:s}", "op", "badjson"), NULL, &bad)) {
		check(false, "accept_call", "cannot start");
	} else {
		wait_for(&dones, 2);
		wait_for(&p.requests, 2);
	}
	check(echo.rc == 0 && json_is_true(json_object_get(echo.reply, "ok")) && echo.out &&
	              !strcmp(echo.out, "hi") && !echo.data_after_done,
	      "late_and_stray_frames_ignored", "rc %d out '%s', %d late", echo.rc,
	      echo.out ? echo.out : "", echo.data_after_done);
	check(bad.done == 1 && bad.rc == 1 && !strcmp(code_of(&bad), "bad_json"), "bad_json_reply",
	      "rc %d code %s", bad.rc, code_of(&bad));
	agent_session_close(accepted.s);
	peer_close(&p);
	uv_close((uv_handle_t *)&listener, NULL);
	drain();
	json_decref(accepted.hello);
	call_free(&echo);
	call_free(&bad);
}

void session_fake_tests(void)
{
	t_peer_hangs_up();
	t_inputs_share();
	t_bad_framing();
	t_accept();
}
