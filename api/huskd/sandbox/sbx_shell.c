// SPDX-License-Identifier: MIT
/*
 * Commands beside the sandbox's one execution, as jobs are, whose caller
 * holds them while they run: interactive shells (husk ssh; API.md §5.9, "a
 * shell": a PTY fed the caller's keys and resized as the caller's terminal
 * is) and E2B processes (pipes, stdout and stderr apart, stdin if asked). It runs as one exec
 * request on the agent session with pulled input: what the caller types waits in a bounded buffer
 * here until the session takes it. Using it counts as activity; a pause or a lost connection ends
 * it (the PTY's processes go with the guest's connection).
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
	bool no_stdin; /* stdin is /dev/null */
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
		s->ops->output(s->arg, type, p, len);
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
	call = sbx_call_now(s->sb, s->req, s->no_stdin ? NULL : &in, &shell_ops, s);
	if (call)
		s->call = call;
}

static int check_opts(const struct sbx_shell_opts *o, struct sbx_err *err)
{
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_array(o->argv) || !json_array_size(o->argv))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "command must be a non-empty array of strings");
	json_array_foreach(o->argv, i, v) if (!json_is_string(v)) return sbx_fail(
		err, SBX_BAD_INPUT, -EINVAL, "command[%zu] must be a string", i);
	if (o->env && !json_is_object(o->env))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "env must be an object of strings");
	json_object_foreach(
		o->env, k, v) if (!*k || strchr(k, '=') ||
	                          !json_is_string(v)) return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
	                                                              "env: '%.64s' must be a name "
	                                                              "without '=' and a string",
	                                                              k);
	if ((o->rows || o->cols) &&
	    (o->rows < 1 || o->rows > 1000 || o->cols < 1 || o->cols > 1000))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "rows and cols must be 1..1000 (the terminal's size)");
	if (o->cwd && (*o->cwd != '/' || strlen(o->cwd) > 4096))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "cwd must be an absolute path in the sandbox");
	return 0;
}

int sbx_shell_spawn(struct sbx_mgr *m, const char *id, const struct sbx_shell_opts *o,
                    const struct sbx_shell_ops *ops, void *arg, struct sbx_shell **out,
                    struct sbx_err *err)
{
	struct sandbox *sb;
	struct sbx_shell *s;
	json_t *env = NULL, *pty;
	int rc;

	*out = NULL;
	if ((rc = check_opts(o, err)) != 0)
		return rc;
	sb = sbx_lookup(m, id, err);
	if (!sb)
		return -ENOENT;
	s = calloc(1, sizeof(*s));
	if (s)
		env = sb->env ? json_copy(sb->env) : json_object();
	if (!env || (o->env && json_object_update(env, o->env)) ||
	    !(pty = o->rows ? json_pack("{sisi}", "rows", (int)o->rows, "cols", (int)o->cols)
	                    : json_false())) {
		json_decref(env);
		free(s);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	*s = (struct sbx_shell){.sb = sb,
	                        .ops = ops,
	                        .arg = arg,
	                        .rows = o->rows,
	                        .cols = o->cols,
	                        .no_stdin = o->no_stdin,
	                        .in_end = o->no_stdin};
	s->req = json_pack("{sssOsssosbsoss*}", "op", "exec", "argv", o->argv, "cwd",
	                   o->cwd ? o->cwd : sbx_workspace(sb), "env", env, "stdin", !o->no_stdin,
	                   "pty", pty, "user", o->user ? o->user : sbx_user(sb));
	if (s->req && o->keep)
		json_object_set_new(s->req, "keep", json_true());
	if (!s->req) {
		free(s);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	sbx_hold(sb);
	sbx_touch(sb);
	log_info(sb->id, "%s starts", o->rows ? "a shell" : "a process");
	*out = s;
	sbx_when_ready(sb, shell_go, s);
	return 0;
}

int sbx_shell_start(struct sbx_mgr *m, const char *id, json_t *argv, unsigned rows, unsigned cols,
                    const struct sbx_shell_ops *ops, void *arg, struct sbx_shell **out,
                    struct sbx_err *err)
{
	struct sbx_shell_opts o = {.argv = argv, .rows = rows, .cols = cols};

	*out = NULL;
	if (!rows || !cols)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "rows and cols must be 1..1000 (the terminal's size)");
	return sbx_shell_spawn(m, id, &o, ops, arg, out, err);
}

int sbx_shell_input(struct sbx_shell *s, const void *p, size_t len, bool end)
{
	char *in;

	if (s->in_end)
		return -EPIPE; /* ended, or never had a stdin */
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
	if (!s->rows)
		return -ENOTTY; /* pipes, no terminal */
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

struct ready_wait {
	sbx_done_fn done;
	void *ctx;
};

static void ready_go(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct ready_wait *w = arg;
	struct sbx_reply reply = {0};
	struct sbx_err e;
	json_t *info = NULL;

	if (!err && sbx_get(sb->m, sb->id, &info, &e) == 0)
		reply.data = info;
	else if (!err)
		err = &e;
	w->done(w->ctx, err, err ? NULL : &reply);
	json_decref(info);
	sbx_drop(sb);
	free(w);
}

void sbx_wait_ready(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx)
{
	struct ready_wait *w;
	struct sandbox *sb;
	struct sbx_err err;

	sb = sbx_lookup(m, id, &err);
	if (!sb) {
		done(ctx, &err, NULL);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	*w = (struct ready_wait){.done = done, .ctx = ctx};
	sbx_hold(sb);
	sbx_when_ready(sb, ready_go, w);
}
