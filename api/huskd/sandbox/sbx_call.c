// SPDX-License-Identifier: MIT
/*
 * Agent requests on a sandbox's session: sbx_call() waits until the
 * sandbox is ready (resuming a paused one), sbx_call_now() sends at once
 * (its setup, while it starts). Every call holds the sandbox until its
 * done() has run. Also: an agent ERROR as a typed error, and writing a
 * list of files (setup, execute, the files API).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "sbx_int.h"
#include "sbx_text.h"

struct call {
	struct sandbox *sb;
	json_t *req;
	struct agent_input in;
	bool has_in;
	const struct sbx_call_ops *ops;
	void *arg;
	struct agent_call *ac;
	uv_timer_t deadline; /* armed while the agent owes an answer (ops->no_deadline: never) */
	bool timing;
	bool given_up;   /* the caller was told: what the agent still sends is dropped */
	bool cancelled;  /* the caller's data() wanted no more: the agent was told */
	bool input_done; /* all of in is queued: the agent owes the answer from then on */
	bool in_data;    /* inside the caller's data(): call_end() leaves the free to it */
	bool ended;      /* ... and call_end() ran meanwhile */
	void (*release)(void *release_arg); /* in's own */
	void *release_arg;
};

static void call_free(uv_handle_t *h)
{
	free(h->data);
}

static void call_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct call *c = arg;
	bool stop;

	if (c->given_up)
		return;
	if (c->timing) /* the deadline is for silence: each frame restarts it */
		uv_timer_again(&c->deadline);
	if (!c->ops->data)
		return;
	/*
	 * data() may end the sandbox, which ends the session and this call
	 * with it (call_done, call_end): c must outlive data() for the check below.
	 */
	c->in_data = true;
	stop = c->ops->data(c->arg, type, p, len);
	c->in_data = false;
	if (c->ended) {
		free(c);
		return;
	}
	if (stop && !c->cancelled && c->ac) {
		c->cancelled = true;
		agent_call_cancel(c->ac);
	}
}

static void call_end(struct call *c, int rc, json_t *reply, const struct sbx_err *err)
{
	struct sandbox *sb = c->sb;

	if (!c->given_up)
		c->ops->done(c->arg, rc, reply, err);
	json_decref(c->req);
	if (c->timing) {
		uv_timer_stop(&c->deadline);
		uv_close((uv_handle_t *)&c->deadline, call_free);
	} else if (c->in_data) {
		c->ended = true;
	} else {
		free(c);
	}
	sbx_drop(sb);
}

/*
 * What each side of a silent request stands at: huskd's session here, the
 * VMM's queues and vsock connections in its log (a guest that never got
 * the request, or an answer that never left the VMM, shows there).
 */
static void call_why_silent(struct sandbox *sb)
{
	if (sb->session)
		log_warn(sb->id,
		         "its agent session: %u requests in flight, %zu bytes not yet taken "
		         "by the VMM",
		         agent_session_calls(sb->session), agent_session_queued(sb->session));
	sbx_ctl_dump(sb);
}

/* The agent said nothing for too long: the caller hears so now, the agent gets a CANCEL. */
static void call_timed_out(uv_timer_t *t)
{
	struct call *c = t->data;
	struct sbx_err err;

	sbx_fail(&err, SBX_UNREACHABLE, -ETIMEDOUT,
	         "sandbox %s: its agent has said nothing for %llu s about this request, so it is "
	         "given up; try again (a busy or stuck guest answers slowly)",
	         c->sb->id, (unsigned long long)(c->sb->m->cfg.call_idle_ms / 1000));
	log_warn(c->sb->id, "%s", err.msg);
	call_why_silent(c->sb);
	uv_timer_stop(t);
	c->given_up = true;
	c->ops->done(c->arg, -ETIMEDOUT, NULL, &err);
	/*
	 * The agent's done() comes from its answer or the session's end, which
	 * frees the agent call. The caller's done() just now may have ended the
	 * session itself (a failed setup stops the sandbox): then it has ended.
	 */
	if (c->ac)
		agent_call_cancel(c->ac);
}

static void call_done(void *arg, int rc, json_t *reply)
{
	struct call *c = arg;
	struct sbx_err err;

	c->ac = NULL; /* freed by the session once this returns */
	if (rc < 0 && (c->sb->state == SBX_STOPPING || c->sb->state == SBX_GONE))
		sbx_fail(&err, SBX_ENDED, rc, "sandbox %s has ended (%s) during the request",
		         c->sb->id, c->sb->end_status ? c->sb->end_status : "stopped");
	else if (rc < 0)
		sbx_fail(&err, SBX_UNREACHABLE, rc,
		         "the sandbox's agent went away during the request (%s); it dials in again "
		         "by "
		         "itself: try again",
		         strerror(-rc));
	if (rc < 0) {
		call_end(c, rc, NULL, &err);
		return;
	}
	call_end(c, rc, reply, NULL);
}

static const struct agent_call_ops call_ops = {.data = call_data, .done = call_done};

/* The agent owes an answer from now on (ops->no_deadline: no bound here). */
static void deadline_start(struct call *c)
{
	uint64_t ms = c->sb->m->cfg.call_idle_ms;

	if (c->ops->no_deadline || c->timing || c->given_up ||
	    uv_timer_init(c->sb->m->loop, &c->deadline))
		return;
	c->deadline.data = c;
	c->timing = true;
	uv_timer_start(&c->deadline, call_timed_out, ms, ms);
}

/* A big input takes its time going out: the deadline runs once all of it is queued. */
static void call_input_sent(void *arg)
{
	struct call *c = arg;

	if (c->release)
		c->release(c->release_arg);
	c->input_done = true;
	if (c->ac)
		deadline_start(c);
}

static struct agent_call *call_send(struct call *c)
{
	struct sandbox *sb = c->sb;
	struct agent_call *ac = NULL;
	struct sbx_err err;
	int rc;

	if (!sb->session) {
		sbx_fail(&err, SBX_UNREACHABLE, -ENOTCONN, "sandbox %s: its agent is not connected",
		         sb->id);
		call_end(c, -ENOTCONN, NULL, &err);
		return NULL;
	}
	rc = agent_call_start(sb->session, c->req, c->has_in ? &c->in : NULL, &call_ops, c, &ac);
	if (rc) {
		sbx_fail(&err, SBX_UNREACHABLE, rc, "sandbox %s: cannot reach its agent: %s",
		         sb->id, strerror(-rc));
		call_end(c, rc, NULL, &err);
		return NULL;
	}
	c->ac = ac;
	if (!c->has_in || c->input_done)
		deadline_start(c);
	return ac;
}

static void call_ready(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct call *c = arg;

	if (err) {
		call_end(c, -EIO, NULL, err);
		return;
	}
	sbx_touch(sb);
	call_send(c);
}

static struct call *call_new(struct sandbox *sb, json_t *req, const struct agent_input *in,
                             const struct sbx_call_ops *ops, void *arg)
{
	struct call *c = calloc(1, sizeof(*c));
	struct sbx_err err;

	if (!c) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		ops->done(arg, -ENOMEM, NULL, &err);
		return NULL;
	}
	*c = (struct call){.sb = sb, .req = json_incref(req), .ops = ops, .arg = arg};
	if (in) {
		c->in = *in;
		c->has_in = true;
		c->release = in->release;
		c->release_arg = in->release_arg;
		c->in.release = call_input_sent;
		c->in.release_arg = c;
	}
	sbx_hold(sb);
	return c;
}

void sbx_call(struct sandbox *sb, json_t *req, const struct agent_input *in,
              const struct sbx_call_ops *ops, void *arg)
{
	struct call *c = call_new(sb, req, in, ops, arg);

	if (c)
		sbx_when_ready(sb, call_ready, c);
}

struct agent_call *sbx_call_now(struct sandbox *sb, json_t *req, const struct agent_input *in,
                                const struct sbx_call_ops *ops, void *arg)
{
	struct call *c = call_new(sb, req, in, ops, arg);

	return c ? call_send(c) : NULL;
}

void sbx_agent_error(json_t *reply, struct sbx_err *err, const char *what)
{
	const char *code = json_string_value(json_object_get(reply, "code"));
	const char *msg = json_string_value(json_object_get(reply, "message"));
	enum sbx_fault f = SBX_INTERNAL;

	if (!code)
		f = SBX_INTERNAL;
	else if (!strcmp(code, "not_found"))
		f = SBX_NOT_FOUND;
	else if (!strcmp(code, "is_a_directory") || !strcmp(code, "not_a_directory") ||
	         !strcmp(code, "bad_request"))
		f = SBX_BAD_INPUT;
	else if (!strcmp(code, "exists") || !strcmp(code, "busy"))
		f = SBX_EXISTS;
	else if (!strcmp(code, "permission_denied"))
		f = SBX_DENIED;
	else if (!strcmp(code, "no_space"))
		f = SBX_NO_SPACE;
	sbx_fail(err, f, -EIO, "%s%s%s", what ? what : "", what ? ": " : "",
	         msg ? msg : "the sandbox refused the request");
}

/* ---- a list of files, one file.write each ---- */

struct files {
	struct sandbox *sb;
	json_t *files;
	size_t next;
	bool now; /* sbx_call_now: the sandbox is still starting */
	unsigned char *data;
	sbx_files_fn done;
	void *arg;
};

static void files_step(struct files *f);

static void file_written(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct files *f = arg;
	struct sbx_err e;
	const char *path =
		json_string_value(json_object_get(json_array_get(f->files, f->next - 1), "path"));

	free(f->data);
	f->data = NULL;
	if (rc) {
		if (rc > 0)
			sbx_agent_error(reply, &e, path);
		else
			e = *err;
		f->done(f->sb, &e, f->arg);
		sbx_drop(f->sb);
		json_decref(f->files);
		free(f);
		return;
	}
	files_step(f);
}

static const struct sbx_call_ops file_ops = {.done = file_written};

static void files_step(struct files *f)
{
	json_t *file = json_array_get(f->files, f->next), *req;
	const char *path, *b64;
	struct agent_input in = {.type = FRAME_DATA};
	char full[4096];
	struct sbx_err err;
	size_t len = 0;

	if (!file) {
		f->done(f->sb, NULL, f->arg);
		sbx_drop(f->sb);
		json_decref(f->files);
		free(f);
		return;
	}
	f->next++;
	path = json_string_value(json_object_get(file, "path"));
	b64 = json_string_value(json_object_get(file, "content"));
	f->data = b64 ? base64_decode(b64, &len) : NULL;
	if (!path || !f->data) {
		sbx_fail(&err, SBX_BAD_INPUT, -EINVAL, "files[%zu] needs a path and base64 content",
		         f->next - 1);
		f->done(f->sb, &err, f->arg);
		sbx_drop(f->sb);
		json_decref(f->files);
		free(f);
		return;
	}
	workspace_path(sbx_workspace(f->sb), path, full, sizeof(full));
	in.data = f->data;
	in.len = len;
	req = json_pack("{sssssbss*}", "op", "file.write", "path", full, "mkdirs", 1, "user",
	                json_string_value(json_object_get(file, "user")));
	if (f->now)
		sbx_call_now(f->sb, req, &in, &file_ops, f);
	else
		sbx_call(f->sb, req, &in, &file_ops, f);
	json_decref(req);
}

void sbx_files_write(struct sandbox *sb, json_t *files, bool now, sbx_files_fn done, void *arg)
{
	struct files *f = calloc(1, sizeof(*f));
	struct sbx_err err;

	if (!f) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(sb, &err, arg);
		return;
	}
	*f = (struct files){
		.sb = sb, .files = json_incref(files), .now = now, .done = done, .arg = arg};
	sbx_hold(sb);
	files_step(f);
}

/* ---- a command run for huskd's own purposes, its output captured ---- */

struct run {
	struct sandbox *sb;
	json_t *req;
	struct sbx_run_out out;
	size_t cap;
	sbx_run_fn done;
	void *arg;
};

static bool run_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct run *r = arg;

	if (type == FRAME_STDERR) {
		size_t room = sizeof(r->out.err) - 1 - r->out.err_len;

		len = len < room ? len : room;
		memcpy(r->out.err + r->out.err_len, p, len);
		r->out.err_len += len;
		r->out.err[r->out.err_len] = '\0';
		return false;
	}
	if (type != FRAME_STDOUT || r->out.buf.over)
		return r->out.fd >= 0 && r->out.buf.over;
	if (r->out.fd < 0) {
		sbx_buf_add(&r->out.buf, p, len, r->cap);
		return false;
	}
	if (len > r->cap - r->out.buf.len ||
	    pwrite(r->out.fd, p, len, (off_t)r->out.buf.len) != (ssize_t)len) {
		/* Past the cap (or the disk is full): nothing more is kept, or wanted. */
		r->out.buf.over = true;
		return true;
	}
	r->out.buf.len += len;
	return false;
}

static void run_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct run *r = arg;
	struct sbx_err e;

	if (rc > 0) {
		sbx_agent_error(reply, &e, "the sandbox refused the command");
		err = &e;
	}
	if (!rc)
		r->out.exit_code = (int)json_integer_value(json_object_get(reply, "exit_code"));
	/* The first line of stderr says why, as a shell would. */
	r->out.err[strcspn(r->out.err, "\n")] = '\0';
	r->done(r->sb, rc ? err : NULL, &r->out, r->arg);
	free(r->out.buf.data);
	json_decref(r->req);
	sbx_drop(r->sb);
	free(r);
}

static const struct sbx_call_ops run_ops = {
	.data = run_data, .done = run_done, .no_deadline = true};

static void run_start(struct sandbox *sb, json_t *argv, const struct agent_input *in, size_t cap,
                      int fd, bool now, sbx_run_fn done, void *arg)
{
	struct run *r = calloc(1, sizeof(*r));
	struct sbx_err err;

	if (!r) {
		json_decref(argv);
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(sb, &err, NULL, arg);
		return;
	}
	*r = (struct run){.sb = sb, .cap = cap, .done = done, .arg = arg};
	r->out.fd = fd;
	r->req = json_pack("{sssoss}", "op", "exec", "argv", argv, "cwd", "/");
	if (r->req && in)
		json_object_set_new(r->req, "stdin", json_true());
	sbx_hold(sb);
	if (now)
		(void)sbx_call_now(sb, r->req, in, &run_ops, r);
	else
		sbx_call(sb, r->req, in, &run_ops, r);
}

void sbx_run(struct sandbox *sb, json_t *argv, const struct agent_input *in, size_t cap,
             sbx_run_fn done, void *arg)
{
	run_start(sb, argv, in, cap, -1, false, done, arg);
}

void sbx_run_to(struct sandbox *sb, json_t *argv, const struct agent_input *in, size_t cap, int fd,
                sbx_run_fn done, void *arg)
{
	run_start(sb, argv, in, cap, fd, false, done, arg);
}

void sbx_run_now(struct sandbox *sb, json_t *argv, sbx_run_fn done, void *arg)
{
	run_start(sb, argv, NULL, 0, -1, true, done, arg);
}
