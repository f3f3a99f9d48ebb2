// SPDX-License-Identifier: MIT
/*
 * Interactive shells (husk ssh; API.md §5.9, "a shell"): a command on a PTY in
 * the sandbox, beside its one execution as jobs are, fed the caller's keys
 * and resized as the caller's terminal is. It runs as one exec request on
 * the agent session with pulled input: what the caller types waits in a
 * bounded buffer here until the session takes it. Using it counts as
 * activity; a pause or a lost connection ends it (the PTY's processes go
 * with the guest's connection).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "sbx_int.h"

/* Typed input held for the agent at most; the caller is asked to wait past it. */
#define SHELL_IN_MAX (1u << 20)

struct sbx_shell {
	struct sandbox *sb;
	const struct sbx_shell_ops *ops;
	void *arg;
	json_t *req;
	struct agent_call *call; /* once started, until done */
	char *in;                /* typed, not taken by the session yet */
	size_t in_len;
	bool in_end;   /* the caller's input has ended */
	bool started;  /* the exec request went out */
	bool detached; /* the caller went: no more callbacks */
	bool ended;    /* done() has come */
	bool cancel;   /* cancelled before it started */
	unsigned rows, cols;
};

static void shell_free(struct sbx_shell *s)
{
	json_decref(s->req);
	free(s->in);
	sbx_drop(s->sb);
	free(s);
}

static long shell_read(void *arg, void *buf, size_t cap, bool *end)
{
	struct sbx_shell *s = arg;
	size_t n = s->in_len < cap ? s->in_len : cap;
	bool was_full = s->in_len >= SHELL_IN_MAX;

	if (n) {
		memcpy(buf, s->in, n);
		memmove(s->in, s->in + n, s->in_len - n);
		s->in_len -= n;
	}
	*end = !s->in_len && s->in_end;
	if (n && was_full && s->in_len < SHELL_IN_MAX && !s->detached && s->ops->room)
		s->ops->room(s->arg);
	return (long)n;
}

static bool shell_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct sbx_shell *s = arg;

	sbx_touch(s->sb);
	if (!s->detached && (type == FRAME_STDOUT || type == FRAME_STDERR))
		s->ops->output(s->arg, p, len);
	return false;
}

static void shell_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct sbx_shell *s = arg;
	struct sbx_err e;

	s->call = NULL;
	s->ended = true;
	if (!s->detached) {
		if (rc > 0) {
			sbx_agent_error(reply, &e, "the shell could not start");
			err = &e;
		}
		s->ops->ended(s->arg, rc ? NULL : reply, rc ? err : NULL);
	}
	shell_free(s);
}

static const struct sbx_call_ops shell_ops = {
	.data = shell_data, .done = shell_done, .no_deadline = true};

static void shell_go(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct sbx_shell *s = arg;
	struct agent_input in = {.type = FRAME_STDIN, .read = shell_read, .read_arg = s};
	struct agent_call *call;

	(void)sb;
	if (err || s->detached || s->cancel) {
		struct sbx_err e;

		if (!err && s->cancel)
			err = (sbx_fail(&e, SBX_STATE, -ECANCELED, "cancelled before it started"),
			       &e);
		if (!s->detached)
			s->ops->ended(s->arg, NULL, err);
		shell_free(s);
		return;
	}
	s->started = true;
	/* NULL: done() ran already, and s is gone. */
	call = sbx_call_now(s->sb, s->req, &in, &shell_ops, s);
	if (call)
		s->call = call;
}

int sbx_shell_start(struct sbx_mgr *m, const char *id, json_t *argv, unsigned rows, unsigned cols,
                    const struct sbx_shell_ops *ops, void *arg, struct sbx_shell **out,
                    struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);
	struct sbx_shell *s;
	json_t *v;
	size_t i;

	*out = NULL;
	if (!sb)
		return -ENOENT;
	if (!json_is_array(argv) || !json_array_size(argv))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "command must be a non-empty array of strings");
	json_array_foreach(argv, i, v) if (!json_is_string(v)) return sbx_fail(
		err, SBX_BAD_INPUT, -EINVAL, "command[%zu] must be a string", i);
	if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "rows and cols must be 1..1000 (the terminal's size)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	*s = (struct sbx_shell){.sb = sb, .ops = ops, .arg = arg, .rows = rows, .cols = cols};
	s->req = json_pack("{sssOsssOsbs{sisi}ss*}", "op", "exec", "argv", argv, "cwd",
	                   sbx_workspace(sb), "env", sb->env, "stdin", 1, "pty", "rows", (int)rows,
	                   "cols", (int)cols, "user", sbx_user(sb));
	if (!s->req) {
		free(s);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	sbx_hold(sb);
	sbx_touch(sb);
	log_info(sb->id, "a shell starts");
	*out = s;
	sbx_when_ready(sb, shell_go, s);
	return 0;
}

int sbx_shell_input(struct sbx_shell *s, const void *p, size_t len, bool end)
{
	char *in;

	if (s->in_end)
		return -EPIPE;
	/* Full is a signal to wait (sbx_shell_full); what was on its way is still taken. */
	if (s->in_len + len > 2 * SHELL_IN_MAX)
		return -ENOBUFS;
	if (len) {
		in = realloc(s->in, s->in_len + len);
		if (!in)
			return -ENOMEM;
		s->in = in;
		memcpy(s->in + s->in_len, p, len);
		s->in_len += len;
	}
	s->in_end = end;
	sbx_touch(s->sb);
	if (s->call)
		agent_call_input_ready(s->call);
	return 0;
}

bool sbx_shell_full(const struct sbx_shell *s)
{
	return s->in_len >= SHELL_IN_MAX;
}

int sbx_shell_window(struct sbx_shell *s, unsigned rows, unsigned cols)
{
	if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
		return -EINVAL;
	s->rows = rows;
	s->cols = cols;
	if (!s->call) { /* not started yet: it starts at this size */
		json_object_set_new(s->req, "pty",
		                    json_pack("{sisi}", "rows", (int)rows, "cols", (int)cols));
		return 0;
	}
	return agent_call_window(s->call, rows, cols);
}

void sbx_shell_close(struct sbx_shell *s)
{
	s->detached = true;
	if (s->call) {
		agent_call_cancel(s->call); /* its done() frees it */
		return;
	}
	/* Not started yet: shell_go frees it when the sandbox is ready (or fails). */
}

void sbx_shell_cancel(struct sbx_shell *s)
{
	if (s->call)
		agent_call_cancel(s->call);
	else
		s->cancel = true;
}
