// SPDX-License-Identifier: MIT
/*
 * Fuzzes agent_session's reading side, all of which an agent (a guest)
 * controls: a session on one end of a socketpair with two calls in flight
 * (ids 1 and 2, the second still sending its input), and the input fed as
 * the agent's bytes in pieces whose size the first byte picks. The second
 * byte picks what the callbacks do (cancel, start another call, close the
 * session from inside its own read or from a done()). Every call must end exactly once and
 * everything must be freed.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_session.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Callbacks may start more calls: this many in all. */
#define MAX_CALLS 8

struct fz {
	struct agent_session *s;
	struct agent_call *c[MAX_CALLS];
	int done[MAX_CALLS];
	int ncalls, closed;
	uint8_t mode;
	bool closed_by_cb;
	bool gone; /* agent_session_close returned: no callback may come */
};

static uv_loop_t loop;
static uint8_t input[4096];

static struct fz *cur; /* the input being run */

static void start_call(struct fz *z);

static void on_data(void *arg, uint8_t type, const void *p, size_t len)
{
	int i = (int)(intptr_t)arg;

	(void)p;
	(void)len;
	if (cur->gone)
		__builtin_trap();
	if ((cur->mode & 1) && cur->c[i])
		agent_call_cancel(cur->c[i]);
	if ((cur->mode & 2) && type == FRAME_STDERR && !cur->closed_by_cb) {
		cur->closed_by_cb = true;
		agent_session_close(cur->s); /* from inside the session's own read */
		cur->gone = true;
	}
}

static void on_done(void *arg, int rc, json_t *reply)
{
	int i = (int)(intptr_t)arg;

	if (cur->gone || cur->done[i]++ || (rc < 0 && reply) || (rc >= 0 && !reply))
		__builtin_trap();
	cur->c[i] = NULL;
	if (cur->mode & 4)
		start_call(cur);
	if ((cur->mode & 8) && rc != -ECANCELED && !cur->closed_by_cb) {
		cur->closed_by_cb = true;
		agent_session_close(cur->s); /* from a done(), the others get -ECANCELED */
		cur->gone = true;
	}
}

static const struct agent_call_ops call_ops = {.data = on_data, .done = on_done};

static void on_closed(void *arg, int rc)
{
	struct fz *z = arg;

	(void)rc;
	if (z->gone || z->closed++)
		__builtin_trap();
}

static void on_hello(void *arg, json_t *hello)
{
	(void)hello;
	if (((struct fz *)arg)->gone)
		__builtin_trap();
}

static const struct agent_session_ops sess_ops = {.hello = on_hello, .closed = on_closed};

static void start_call(struct fz *z)
{
	struct agent_input in = {.type = FRAME_STDIN,
	                         .data = input,
	                         .len = sizeof(input),
	                         .release = NULL,
	                         .release_arg = NULL};
	json_t *req = json_pack("{s:s}", "op", "exec");
	int i = z->ncalls;

	if (i < MAX_CALLS && agent_call_start(z->s, req, i == 1 ? &in : NULL, &call_ops,
	                                      (void *)(intptr_t)i, &z->c[i]) == 0)
		z->ncalls++;
	json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct fz z = {0};
	size_t off = 2, step;
	int sv[2];

	if (!ready) {
		signal(SIGPIPE, SIG_IGN);
		uv_loop_init(&loop);
		ready = true;
	}
	if (size < 2)
		return 0;
	step = data[0] % 64 + 1;
	z.mode = data[1];
	cur = &z;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    agent_session_open_fd(&loop, sv[0], &sess_ops, &z, &z.s))
		__builtin_trap();
	start_call(&z);
	start_call(&z);
	while (off < size) {
		size_t len = size - off < step ? size - off : step;

		if (agent_session_feed(z.s, data + off, len))
			break;
		off += len;
	}
	/* Deferred callbacks: released inputs, a failure's done()s and closed(). */
	uv_run(&loop, UV_RUN_NOWAIT);
	uv_run(&loop, UV_RUN_NOWAIT);
	if (!z.closed_by_cb)
		agent_session_close(z.s);
	z.gone = true;
	close(sv[1]);
	uv_run(&loop, UV_RUN_DEFAULT);
	for (int i = 0; i < z.ncalls; i++)
		if (z.done[i] != 1)
			__builtin_trap();
	return 0;
}
