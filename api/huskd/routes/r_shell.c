// SPDX-License-Identifier: MIT
/*
 * POST /sandbox/{id}/shell (husk's own, API.md §5.9 "a shell"; the CLI's husk ssh): one
 * request carries a whole interactive session both ways, with no upgrade,
 * so TLS and the key check are the rest of the API's. Both bodies are
 * frames of the agent protocol (guest-agent/PROTOCOL.md): the client sends a
 * REQUEST {"command"?, "rows", "cols"} first, then STDIN (END at its end),
 * WINDOW {"rows","cols"} and CANCEL; the answer (200, chunked) is STDOUT
 * frames of the terminal's bytes and a last RESULT {exit_code, ...} or
 * ERROR {code, message}. Frame ids are ignored. The request body is taken as
 * it arrives and paused while the shell's input buffer is full; a client
 * that stops reading is cut off past SHELL_OUT_MAX queued, not buffered
 * without end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "r_int.h"

#define SHELL_OUT_MAX (8u << 20)
#define SHELL_FRAME_MAX (64u << 10)

struct shell_call {
	struct routes *rt;
	struct http_req *r;
	char id[STORE_ID_LEN];
	struct frame_reader rd;
	struct sbx_shell *sh; /* once started, until it ends */
	bool begun;           /* the 200 went out */
	bool over;            /* answered (the end, or an error): the rest of the body is dropped */
	bool in_body;         /* inside body_data: freeing waits for its end */
	bool dead;            /* freed at the end of body_data */
};

/* The request is answered and lets go of sc: freed now, or once body_data returns. */
static void release(struct shell_call *sc)
{
	if (sc->sh) {
		sbx_shell_close(sc->sh);
		sc->sh = NULL;
	}
	if (sc->in_body) {
		sc->dead = true;
		return;
	}
	frame_reader_free(&sc->rd);
	free(sc);
}

static void frame_out(struct shell_call *sc, uint8_t type, const void *p, size_t len)
{
	uint8_t hdr[FRAME_HDR_SIZE];

	frame_encode_hdr(hdr, type, 0, 1, (uint32_t)len);
	/* A client gone: -EPIPE, and its on_close follows. */
	if (http_stream_write(sc->r, hdr, sizeof(hdr)) == 0 && len &&
	    http_stream_write(sc->r, p, len) < 0)
		log_debug(sc->id, "a shell's client went while it was written to");
}

/* Ends the answer with a last frame (RESULT or ERROR); sc is released. */
static void finish(struct shell_call *sc, uint8_t type, json_t *j)
{
	char *js = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct http_req *r = sc->r;

	sc->over = true;
	http_on_close(r, NULL, NULL);
	if (js)
		frame_out(sc, type, js, strlen(js));
	free(js);
	release(sc);
	http_stream_end(r);
}

static void sh_output(void *arg, int type, const void *p, size_t len)
{
	struct shell_call *sc = arg;
	struct sbx_shell *sh = sc->sh;
	json_t *e;

	(void)type; /* a terminal's: all of it is STDOUT */
	for (size_t off = 0; off < len; off += SHELL_FRAME_MAX)
		frame_out(sc, FRAME_STDOUT, (const char *)p + off,
		          len - off < SHELL_FRAME_MAX ? len - off : SHELL_FRAME_MAX);
	if (http_stream_queued(sc->r) <= SHELL_OUT_MAX || !sh)
		return;
	e = json_pack("{ssss}", "code", "slow_client", "message",
	              "the terminal's output waited unread past 8 MiB: the shell was stopped");
	finish(sc, FRAME_ERROR, e);
	json_decref(e);
}

static void sh_ended(void *arg, json_t *result, const struct sbx_err *err)
{
	struct shell_call *sc = arg;
	json_t *e;

	sc->sh = NULL;
	if (!sc->begun) { /* it never ran: a plain error answer */
		struct http_req *r = sc->r;

		sc->over = true;
		http_on_close(r, NULL, NULL);
		release(sc);
		if (err)
			reply_error(r, err, S_SANDBOX);
		else
			api_error(r, 500, "INTERNAL", "the shell ended before it began");
		return;
	}
	if (!err) {
		finish(sc, FRAME_RESULT, result);
		return;
	}
	e = json_pack("{ssss}", "code", "shell_failed", "message", err->msg);
	finish(sc, FRAME_ERROR, e);
	json_decref(e);
}

static void sh_room(void *arg)
{
	struct shell_call *sc = arg;

	http_body_pause(sc->r, false);
}

static const struct sbx_shell_ops shell_ops = {
	.output = sh_output, .ended = sh_ended, .room = sh_room};

/* The first frame: what to run, and the terminal's size. */
static void start(struct shell_call *sc, const struct frame *f)
{
	json_t *req = json_loadb((const char *)f->payload, f->len, 0, NULL), *argv;
	json_int_t rows = json_integer_value(json_object_get(req, "rows"));
	json_int_t cols = json_integer_value(json_object_get(req, "cols"));
	struct sbx_err err;

	argv = json_object_get(req, "command");
	if (!argv)
		argv = json_pack("[sss]", "/bin/sh", "-c", "exec \"${SHELL:-/bin/sh}\" -l");
	else
		json_incref(argv);
	if (f->type != FRAME_REQUEST || !json_is_object(req)) {
		sc->over = true;
		http_on_close(sc->r, NULL, NULL);
		api_error(sc->r, 400, "BAD_REQUEST",
		          "a shell's body begins with a REQUEST frame of JSON {command?, rows, "
		          "cols}");
		release(sc); /* (inside body_data: freed at its end) */
	} else if (sbx_shell_start(sc->rt->m, sc->id, argv, rows > 0 ? (unsigned)rows : 24,
	                           cols > 0 ? (unsigned)cols : 80, &shell_ops, sc, &sc->sh, &err)) {
		sc->over = true;
		http_on_close(sc->r, NULL, NULL);
		reply_error(sc->r, &err, S_SANDBOX);
		release(sc);
	} else if (!sc->over) { /* (it can fail at once, answered already) */
		sc->begun = true;
		http_stream_begin(sc->r, 200, "application/vnd.husk.frames");
	}
	json_decref(argv);
	json_decref(req);
}

static void input(struct shell_call *sc, const struct frame *f)
{
	json_t *w, *e;

	if (f->type == FRAME_STDIN &&
	    sbx_shell_input(sc->sh, f->payload, f->len, f->flags & FRAME_F_END) == -ENOBUFS) {
		e = json_pack("{ssss}", "code", "input_overrun", "message",
		              "input came past the shell's buffer while it was full");
		sbx_shell_close(sc->sh);
		finish(sc, FRAME_ERROR, e);
		json_decref(e);
		return;
	}
	if (f->type == FRAME_WINDOW &&
	    (w = json_loadb((const char *)f->payload, f->len, 0, NULL))) {
		/* A size out of range is ignored: the terminal keeps the last good one. */
		if (sbx_shell_window(sc->sh,
		                     (unsigned)json_integer_value(json_object_get(w, "rows")),
		                     (unsigned)json_integer_value(json_object_get(w, "cols"))))
			log_debug(sc->id, "a shell's window size was refused");
		json_decref(w);
	}
	if (f->type == FRAME_CANCEL)
		sbx_shell_cancel(sc->sh); /* it ends as cancelled: its RESULT still comes */
	if (sbx_shell_full(sc->sh))
		http_body_pause(sc->r, true);
}

static void body_data(struct http_req *r, const void *data, size_t len, void *arg)
{
	struct shell_call *sc = arg;
	const uint8_t *p = data;
	struct frame f;

	(void)r;
	sc->in_body = true;
	while (len && !sc->over) {
		size_t used = 0;
		enum frame_status st = frame_reader_feed(&sc->rd, p, len, &used, &f);

		p += used;
		len -= used;
		if (st == FRAME_NEED_MORE)
			break;
		if (st != FRAME_OK) {
			json_t *e =
				json_pack("{ssss}", "code", "bad_frame", "message",
			                  "the shell's body is not frames of the agent protocol");

			if (sc->begun) {
				finish(sc, FRAME_ERROR, e);
			} else {
				sc->over = true;
				http_on_close(sc->r, NULL, NULL);
				api_error(sc->r, 400, "BAD_REQUEST", "%s",
				          "the shell's body is not frames of the agent protocol");
				release(sc);
			}
			json_decref(e);
			break;
		}
		if (!sc->begun)
			start(sc, &f);
		else if (sc->sh)
			input(sc, &f);
	}
	sc->in_body = false;
	if (sc->dead)
		release(sc);
}

/* The client sends no more: the shell's input ends (it may still run and answer). */
static void body_end(struct http_req *r, const void *data, size_t len, void *arg)
{
	struct shell_call *sc = arg;

	(void)r;
	(void)data;
	(void)len;
	/* -EPIPE: its input had ended already (a STDIN frame with END). */
	if (sc->sh && !sc->over && sbx_shell_input(sc->sh, NULL, 0, true) == -ENOMEM)
		log_warn(sc->id, "out of memory ending a shell's input");
	else if (!sc->begun && !sc->over) {
		sc->over = true;
		http_on_close(sc->r, NULL, NULL);
		api_error(sc->r, 400, "BAD_REQUEST",
		          "a shell's body begins with a REQUEST frame of JSON {command?, rows, "
		          "cols}");
		release(sc);
	}
}

/* The client went: the shell is stopped, and the request let go. */
static void gone(struct http_req *r, void *arg)
{
	struct shell_call *sc = arg;
	bool begun = sc->begun;

	sc->over = true;
	release(sc);
	if (begun)
		http_stream_end(r);
	else
		http_respond(r, 499, "text/plain", "", 0);
}

ROUTE(r_shell)
{
	struct shell_call *sc = calloc(1, sizeof(*sc));

	if (!sc) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	*sc = (struct shell_call){.rt = ctx, .r = r};
	snprintf(sc->id, sizeof(sc->id), "%s", p[0]);
	frame_reader_init(&sc->rd, SHELL_FRAME_MAX);
	http_on_close(r, gone, sc);
	http_body_read(r, body_data, body_end, sc);
}
