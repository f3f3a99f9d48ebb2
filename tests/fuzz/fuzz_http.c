// SPDX-License-Identifier: MIT
/*
 * Fuzzes the HTTP core (api/http/http_conn.c and the parser callbacks) without
 * sockets, through the unit tests' fake transport. The input's first bytes
 * pick small limits and the size of the pieces it is fed in; the rest is
 * client bytes. Between pieces the "handler" side acts on what the input
 * says: answers a held request (one reading its body as it comes, too),
 * writes to or ends a stream, lets time pass
 * (fires the timer), stops reading, or makes writes fail. A livelock (a
 * connection that never settles) traps, and so does anything ASan or UBSan
 * sees.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../unit/test_http_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct http_req *held;
static bool streaming, held_gone;

static void on_gone(struct http_req *r, void *arg)
{
	(void)r;
	(void)arg;
	held_gone = true;
}

/* A streamed body's pieces and end: only for the request still held, never after its answer. */
static void body_piece(struct http_req *r, const void *p, size_t len, void *arg)
{
	(void)arg;
	if (r != held || streaming || (len && !p))
		__builtin_trap();
}

static void finish_held(void);

static void body_end(struct http_req *r, const void *p, size_t len, void *arg)
{
	body_piece(r, p, len, arg);
	finish_held();
}

/* The first letter of the path says what to do: hold, stream, read a body, or answer now. */
static void handler(struct http_req *r, void *ctx)
{
	const char *p = http_path(r);
	char v[32];
	size_t len;
	const void *body = http_body(r, &len);

	(void)ctx;
	if (http_query_get(r, "k", v, sizeof(v)) == -3 || http_header(r, "Host") == (void *)1)
		__builtin_trap();
	if (p[0] == '/' && p[1] == 'b') {
		held = r;
		held_gone = false;
		streaming = false;
		http_on_close(r, on_gone, NULL);
		http_body_read(r, body_piece, body_end, NULL);
		return;
	}
	if (p[0] == '/' && (p[1] == 'h' || p[1] == 's')) {
		held = r;
		held_gone = false;
		http_on_close(r, on_gone, NULL);
		streaming = p[1] == 's';
		if (streaming)
			http_stream_begin(r, 200, "text/plain");
		return;
	}
	if (p[0] == '/' && p[1] == 'e')
		http_respond(r, 204, NULL, NULL, 0);
	else if (http_add_header(r, "X-Echo", http_method(r)) == 0)
		http_respond(r, 200, "application/octet-stream", body, len);
	else
		http_respond(r, 500, "text/plain", "", 0);
}

/* Answers or ends whatever is held. */
static void finish_held(void)
{
	struct http_req *r = held;

	held = NULL;
	if (!r)
		return;
	if (streaming)
		http_stream_end(r);
	else
		http_respond(r, 200, "text/plain", "late", 4);
}

/* One handler-side action chosen by op. */
static void act(struct fake_conn *f, uint8_t op)
{
	switch (op & 7) {
	case 0:
		finish_held();
		break;
	case 1:
		if (held && streaming) {
			int err = http_stream_write(held, "data", 4);

			/* -EPIPE only for a client that is gone, and on_close follows. */
			if (err && (err != -EPIPE || fake_run(f) < 0 || !held_gone))
				__builtin_trap();
		}
		break;
	case 2:
		fake_fire(f);
		break;
	case 3:
		f->hold = !f->hold;
		break;
	case 4:
		f->fail_writes = op & 8;
		break;
	case 5: /* a streamed body's reader pauses or resumes it */
		if (held && !streaming)
			http_body_pause(held, op & 8);
		break;
	default:
		break;
	}
}

/*
 * The admit callback as huskd's reads a request's head before its body: it
 * refuses (with a Retry-After) requests carrying a header named "x-no", and
 * counts the ones it lets in until they are freed.
 */
static unsigned admitted;

static void admitted_done(struct http_req *r, void *arg)
{
	(void)arg;
	if (!http_method(r)[0]) /* freed with its head read: a method */
		__builtin_trap();
	if (!admitted)
		__builtin_trap();
	admitted--;
}

static int admit(struct http_req *r, void *ctx, struct http_refusal *out)
{
	(void)ctx;
	if (http_header(r, "x-no")) {
		snprintf(out->msg, sizeof(out->msg), "refused: %.40s %.80s", http_method(r),
		         http_path(r));
		out->code = "UNAUTHORIZED";
		out->retry_after = 7;
		return 401;
	}
	admitted++;
	http_on_free(r, admitted_done, NULL);
	/* "/b...": the body comes to the handler as it arrives. */
	if (!strncmp(http_path(r), "/b", 2))
		http_body_stream(r);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_config cfg = {.max_header_bytes = 512, .max_body_bytes = 1024};
	struct fake_conn f = {.out_keep = 1};
	struct http_limits lim;
	size_t off = 2, step;

	if (size < 2)
		return 0;
	if (data[0] & 1)
		cfg = (struct http_config){0};
	if (data[0] & 16)
		cfg.admit = admit;
	/* Bodies past 16 bytes into a file (O_TMPFILE under /tmp), as huskd's past 1 MiB. */
	if (data[0] & 32) {
		cfg.spool_dir = "/tmp";
		cfg.spool_over = 16;
	}
	admitted = 0;
	http_limits_init(&lim, &cfg);
	step = (size_t)data[1] % 64 + 1;
	held = NULL;
	streaming = held_gone = false;
	fake_init(&f, &lim, handler, NULL);
	while (off < size) {
		size_t len = size - off < step ? size - off : step;

		if (fake_feed(&f, data + off, len) < 0)
			__builtin_trap();
		off += len;
		/* The byte after each piece also says what the handler side does. */
		if (off < size && (data[0] & 2))
			act(&f, data[off - 1]);
		if (fake_run(&f) < 0)
			__builtin_trap();
	}
	if (data[0] & 4)
		http_conn_eof(&f.c, 0);
	if (fake_run(&f) < 0 || fake_fire(&f) < 0)
		__builtin_trap();
	fake_free(&f);
	finish_held(); /* after the close: a no-op that frees it */
	if (admitted)  /* every request let in was freed, and said so */
		__builtin_trap();
	return 0;
}
