// SPDX-License-Identifier: MIT
/*
 * Executions: one command at a time per sandbox, run as one exec request
 * on the sandbox's agent session. Its output frames go straight into the
 * execution's output streams (files that HTTP readers follow); its RESULT
 * ends it. Cancel is the protocol's CANCEL frame: the guest kills the
 * process group and the sandbox lives on. A sandbox that ends first records
 * its execution as cancelled at once, before its VMM goes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"
#include "proto.h"
#include "sbx_exec_io.h"
#include "sbx_int.h"

/* How long the guest waits after SIGTERM before SIGKILL, on cancel and timeout. */
#define GRACE_MS 2000

enum exec_phase {
	EXEC_QUEUED,  /* waiting for the sandbox to be ready */
	EXEC_FILES,   /* the request's files being written */
	EXEC_RUNNING, /* the exec request in flight */
	EXEC_LOST,    /* the agent's connection broke under it: why is not known yet */
	EXEC_ENDED,   /* recorded; waits only for its request's done() */
};

struct execution {
	struct sandbox *sb;
	char id[STORE_ID_LEN];
	enum exec_phase phase;
	json_t *req, *files;
	struct exec_io io;     /* its streams; io.call the exec request while in flight */
	bool in_flight;        /* its files or exec request have not had their done() */
	bool recorded_running; /* its record was born running (it started at once) */
	char cancel_why[256];
	/* sbx_exec_cancel callers, answered once it ended. */
	sbx_done_fn cancel_done;
	void *cancel_ctx;
};

/* The record's patch for a finished execution: status, exitCode, error, truncation. */
static json_t *result_patch(struct execution *e, int rc, json_t *r, const char *why,
                            const char **status)
{
	json_t *patch = json_object();
	json_int_t code;

	if (rc || !r) {
		*status = e->cancel_why[0] ? "cancelled" : "failed";
		code = e->cancel_why[0] ? 137 : 1;
		json_object_set_new(patch, "error",
		                    json_string(e->cancel_why[0] ? e->cancel_why
		                                : why            ? why
		                                      : "the sandbox's agent went away"));
	} else {
		code = json_integer_value(json_object_get(r, "exit_code"));
		if (json_is_true(json_object_get(r, "timed_out"))) {
			*status = "timeout";
			json_object_set_new(patch, "error",
			                    json_string("the command ran past its timeout"));
		} else if (json_is_true(json_object_get(r, "cancelled")) || e->cancel_why[0]) {
			*status = "cancelled";
			json_object_set_new(
				patch, "error",
				json_string(e->cancel_why[0] ? e->cancel_why : "cancelled"));
		} else {
			*status = code == 0 ? "completed" : "failed";
		}
		if (json_object_get(r, "duration_ms"))
			json_object_set(patch, "durationMs", json_object_get(r, "duration_ms"));
	}
	json_object_set_new(patch, "exitCode", json_integer(code));
	if (sbx_exec_io_truncated(&e->io))
		json_object_set_new(patch, "outputTruncated", json_true());
	return patch;
}

static void exec_free(struct execution *e)
{
	struct sandbox *sb = e->sb;

	sbx_exec_io_free(&e->io);
	json_decref(e->req);
	json_decref(e->files);
	free(e);
	sbx_drop(sb);
}

/*
 * Records the end (rc/r: the agent's answer; why: the reason without one)
 * and lets the sandbox go on: idle again, or ended after a oneshot.
 */
static void exec_end(struct execution *e, int rc, json_t *r, const char *why)
{
	struct sandbox *sb = e->sb;
	struct sbx_mgr *m = sb->m;
	const char *status;
	json_t *patch = result_patch(e, rc, r, why, &status), *rec = NULL, *sbpatch;
	struct sbx_reply reply = {0};

	e->phase = EXEC_ENDED;
	sbx_exec_io_end(&e->io);
	/* The record and the sandbox's move back to idle: one commit. */
	store_batch_begin(m->store);
	/* Read back only for a cancel's caller: the long-polls read it themselves. */
	if (store_execution_update(m->store, e->id, status, patch, NULL,
	                           e->cancel_done ? &rec : NULL))
		log_error(sb->id, "cannot record the end of %s", e->id);
	log_debug(sb->id, "%s %s (exit %lld)", e->id, status,
	          (long long)json_integer_value(json_object_get(patch, "exitCode")));
	if (sb->exec == e)
		sb->exec = NULL;
	sbx_notify(m, e->id);
	if (e->cancel_done) {
		reply.data = rec;
		e->cancel_done(e->cancel_ctx, NULL, &reply);
		e->cancel_done = NULL;
	}
	json_decref(rec);
	if (sb->state == SBX_RUNNING && !sb->oneshot)
		sbx_to(sb, SBX_IDLE, NULL, NULL);
	if (store_batch_end(m->store))
		log_error(sb->id, "cannot record the end of %s", e->id);
	if (sb->state == SBX_RUNNING) {
		if (sb->oneshot) {
			/* Its command ran to its end (a oneshot's whole purpose): said before it
			 * ends. */
			sbpatch = json_pack("{sssOss}", "executionId", e->id, "exitCode",
			                    json_object_get(patch, "exitCode"), "status", status);
			if (store_event_append(m->store, sb->id, "lifecycle:completed", sbpatch,
			                       NULL))
				log_warn(sb->id, "cannot record its lifecycle:completed event");
			json_decref(sbpatch);
			sbpatch = json_pack("{sO}", "exitCode", json_object_get(patch, "exitCode"));
			sbx_end(sb, "terminated", "its command ended", sbpatch);
			json_decref(sbpatch);
		}
	}
	json_decref(patch);
	if (!e->in_flight)
		exec_free(e);
}

static bool exec_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct execution *e = arg;

	if (e->phase == EXEC_RUNNING)
		sbx_exec_io_output(&e->io, type, p, len);
	return false;
}

static void exec_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct execution *e = arg;
	char why[600];

	e->in_flight = false;
	e->io.call = NULL;
	if (e->phase == EXEC_ENDED) {
		exec_free(e); /* recorded already: the sandbox stopped */
		return;
	}
	/*
	 * The connection broke, and the VMM's exit (if that is why) may not have
	 * come in yet: the command is lost with it, but its record waits for the
	 * cause (the sandbox's end, or the agent dialling in again).
	 */
	if (rc < 0 && err->fault == SBX_UNREACHABLE && !e->cancel_why[0]) {
		e->phase = EXEC_LOST;
		return;
	}
	if (rc > 0)
		snprintf(why, sizeof(why), "the agent refused the command: %s",
		         json_string_value(json_object_get(reply, "message")));
	else if (rc < 0)
		snprintf(why, sizeof(why), "%s", err->msg);
	exec_end(e, rc, rc ? NULL : reply, rc ? why : NULL);
}

void sbx_exec_lost(struct sandbox *sb)
{
	struct execution *e = sb->exec;

	if (e && e->phase == EXEC_LOST)
		exec_end(e, -ECONNRESET, NULL,
		         "the sandbox's agent connection broke; the command ended with it");
}

static const struct sbx_call_ops exec_ops = {
	.data = exec_data, .done = exec_done, .no_deadline = true};

static void run(struct sandbox *sb, struct execution *e)
{
	struct agent_input in;
	struct agent_call *call;

	e->phase = EXEC_RUNNING;
	e->in_flight = true;
	call = sbx_call_now(sb, e->req, sbx_exec_io_input(&e->io, &in), &exec_ops, e);
	/* NULL: done() ran already, and e may be gone. */
	if (call)
		e->io.call = call;
}

static void files_done(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct execution *e = arg;

	e->in_flight = false;
	if (e->phase == EXEC_ENDED)
		exec_free(e);
	else if (err)
		exec_end(e, -EIO, NULL, err->msg);
	else if (e->cancel_why[0])
		exec_end(e, -ECANCELED, NULL, e->cancel_why);
	else
		run(sb, e);
}

/* The queued command starts (the sandbox just became RUNNING). */
static void exec_begin(struct sandbox *sb)
{
	struct execution *e = sb->exec;

	if (!e || e->phase != EXEC_QUEUED)
		return;
	if (!e->recorded_running) {
		if (store_execution_update(sb->m->store, e->id, "running", NULL, NULL, NULL))
			log_error(sb->id, "cannot record %s as running", e->id);
		sbx_notify(sb->m, e->id);
	}
	if (json_array_size(e->files)) {
		e->phase = EXEC_FILES;
		e->in_flight = true;
		sbx_files_write(sb, e->files, true, files_done, e);
		return;
	}
	run(sb, e);
}

void sbx_up(struct sandbox *sb, const char *reason)
{
	if (!reason)
		reason = sb->up_reason;
	sb->up_reason = NULL;
	sbx_job_tails_up(sb);
	if (!sb->exec) {
		sbx_to(sb, SBX_IDLE, reason, NULL);
		return;
	}
	if (sbx_to(sb, SBX_RUNNING, reason, NULL) == 0)
		exec_begin(sb);
}

/* Asks the agent to stop e's command; its RESULT ends e as cancelled. */
static void cancel(struct execution *e, const char *why)
{
	if (!e->cancel_why[0])
		snprintf(e->cancel_why, sizeof(e->cancel_why), "%s", why);
	if (e->phase == EXEC_RUNNING && e->io.call)
		agent_call_cancel(e->io.call);
}

void sbx_exec_abort(struct sandbox *sb, const char *why, bool failed)
{
	struct execution *e = sb->exec;

	if (!e || e->phase == EXEC_ENDED)
		return;
	/* The guest may outlive this (a failed resume): stop the command there too. */
	cancel(e, why);
	if (failed)
		e->cancel_why[0] = '\0';
	exec_end(e, -ECANCELED, NULL, why);
}

static int check_request(const struct sbx_exec_req *req, struct sbx_err *err)
{
	json_t *v;
	size_t i;

	if (!json_is_array(req->argv) || !json_array_size(req->argv))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "command must be a non-empty array of strings (an empty one runs "
		                "an imported image's Entrypoint and Cmd, and this runtime has "
		                "neither)");
	json_array_foreach(req->argv, i, v)
	{
		if (!json_is_string(v))
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "command[%zu] must be a string", i);
	}
	if (req->files && !json_is_array(req->files))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "files must be an array of {path, content}");
	return 0;
}

/* Frees an execution that was never sent nor recorded. */
static void exec_discard(struct execution *e)
{
	sbx_exec_io_end(&e->io);
	sbx_exec_io_free(&e->io);
	json_decref(e->req);
	json_decref(e->files);
	free(e);
}

/*
 * An execution and its streams, not yet recorded nor attached to sb; *info
 * its ExecutionInfo, *priv its private part, both for the record.
 */
static int exec_new(struct sandbox *sb, const struct sbx_exec_req *req, bool now,
                    struct execution **out, json_t **info, json_t **priv, struct sbx_err *err)
{
	struct execution *e = calloc(1, sizeof(*e));
	uint64_t timeout_ms = req->timeout_ms ? req->timeout_ms : sb->exec_timeout_ms;
	int rc;

	*priv = json_object();
	if (!e || !*priv || store_new_id("exec_", e->id)) {
		free(e);
		json_decref(*priv);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	e->sb = sb;
	/* Starting at once: born running (one write to the store fewer on the way). */
	*info = json_pack("{sssssssOss}", "executionId", e->id, "sandboxId", sb->id, "type", "exec",
	                  "command", req->argv, "status", now ? "running" : "queued");
	e->recorded_running = now;
	rc = *info ? sbx_exec_io_open(&e->io, sb, req, *info, *priv, err)
	           : sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	if (rc) {
		json_decref(*info);
		*info = NULL;
		json_decref(*priv);
		free(e);
		return rc;
	}
	e->req = json_pack("{sssOsssOsbsIsIss*}", "op", "exec", "argv", req->argv, "cwd",
	                   sbx_workspace(sb), "env", sb->env, "stdin", e->io.in != NULL,
	                   "timeout_ms", (json_int_t)timeout_ms, "grace_ms", (json_int_t)GRACE_MS,
	                   "user", sbx_user(sb));
	e->files = req->files ? json_incref(req->files) : NULL;
	if (!e->req) {
		exec_discard(e);
		json_decref(*info);
		*info = NULL;
		json_decref(*priv);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	*out = e;
	return 0;
}

static void exec_attach(struct sandbox *sb, struct execution *e)
{
	sbx_hold(sb);
	sb->exec = e;
	sbx_touch(sb);
}

/*
 * An idle sandbox's command: the frame goes to the agent first, and the
 * record and the sandbox's move to running are written while the guest
 * runs it (they cost more than the frame, and were all on the round trip).
 * No one can read the record before this returns: the loop runs nothing
 * in between.
 */
static int exec_run_now(struct sandbox *sb, struct execution *e, json_t *info, json_t *priv,
                        struct sbx_err *err)
{
	int rc;

	exec_attach(sb, e);
	run(sb, e);
	if (sb->exec != e)
		/* Ended at once (it could not be sent): gone, and never recorded. */
		return sbx_fail(err, SBX_UNREACHABLE, -ENOTCONN,
		                "sandbox %s: the command could not be sent to its agent; try "
		                "again",
		                sb->id);
	sbx_job_tails_up(sb);
	/* One commit for the sandbox's move and the command's record. */
	store_batch_begin(sb->m->store);
	sbx_to(sb, SBX_RUNNING, NULL, NULL);
	rc = store_execution_insert(sb->m->store, info, priv);
	if (!rc)
		rc = store_batch_end(sb->m->store);
	else if (store_batch_end(sb->m->store))
		log_error(sb->id, "cannot record its move to running");
	if (rc) {
		/* Unrecorded, it would be a command no one can follow: it stops. */
		cancel(e, "its record could not be written");
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot record the command: %s",
		                strerror(-rc));
	}
	return 0;
}

/* An imported image's Entrypoint then Cmd, for a command given as []; NULL if it has none. */
static json_t *image_command(const struct sandbox *sb)
{
	json_t *argv = json_array();

	if (json_is_array(json_object_get(sb->image, "entrypoint")))
		json_array_extend(argv, json_object_get(sb->image, "entrypoint"));
	if (json_is_array(json_object_get(sb->image, "cmd")))
		json_array_extend(argv, json_object_get(sb->image, "cmd"));
	if (json_array_size(argv))
		return argv;
	json_decref(argv);
	return NULL;
}

static int exec_start(struct sandbox *sb, const char *id, const struct sbx_exec_req *req,
                      json_t **exec, bool *resumed, struct sbx_err *err);

int sbx_exec_start(struct sbx_mgr *m, const char *id, const struct sbx_exec_req *req, json_t **exec,
                   bool *resumed, struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);
	struct sbx_exec_req image_req;
	json_t *argv;
	int rc;

	*exec = NULL;
	*resumed = false;
	if (!sb)
		return -ENOENT;
	/* No command: the image's own, as `docker run IMAGE` runs it. */
	if (json_is_array(req->argv) && !json_array_size(req->argv) && (argv = image_command(sb))) {
		image_req = *req;
		image_req.argv = argv;
		rc = exec_start(sb, id, &image_req, exec, resumed, err);
		json_decref(argv);
		return rc;
	}
	return exec_start(sb, id, req, exec, resumed, err);
}

static int exec_start(struct sandbox *sb, const char *id, const struct sbx_exec_req *req,
                      json_t **exec, bool *resumed, struct sbx_err *err)
{
	struct execution *e = NULL;
	json_t *priv = NULL;
	int rc;

	rc = check_request(req, err);
	if (!rc)
		rc = sbx_streams_check(sb->m, sb->org, req->stream, err);
	if (rc)
		return rc;
	if (sb->exec)
		return sbx_fail(err, SBX_BUSY, -EBUSY,
		                "sandbox %s is already running a command; wait for its result", id);
	if ((sb->state == SBX_IDLE || sb->state == SBX_RUNNING) && !sb->session)
		return sbx_fail(err, SBX_UNREACHABLE, -ENOTCONN,
		                "sandbox %s: its agent is not connected (it dials in again by "
		                "itself; try again)",
		                id);
	rc = exec_new(sb, req, sb->state == SBX_IDLE, &e, exec, &priv, err);
	if (rc)
		return rc;
	if (sb->state == SBX_IDLE && !json_array_size(e->files)) {
		rc = exec_run_now(sb, e, *exec, priv, err);
		json_decref(priv);
		if (rc) {
			json_decref(*exec);
			*exec = NULL;
		}
		return rc;
	}
	rc = store_execution_insert(sb->m->store, *exec, priv);
	json_decref(priv);
	if (rc) {
		exec_discard(e);
		json_decref(*exec);
		*exec = NULL;
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot record the command: %s",
		                strerror(-rc));
	}
	exec_attach(sb, e);
	switch (sb->state) {
	case SBX_IDLE:
		sbx_up(sb, NULL); /* with files: they are written first */
		break;
	case SBX_PAUSED:
	case SBX_PAUSING:
	case SBX_FREEZING:
	case SBX_RESUMING:
		/* It runs once the sandbox is up again; a paused one resumes for it. */
		*resumed = true;
		sbx_wake(sb);
		break;
	default:
		break; /* starting: it runs once the sandbox is up */
	}
	return 0;
}

/* The live execution with id, or NULL. */
static struct execution *exec_find(struct sbx_mgr *m, const char *exec_id)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (sb->exec && !strcmp(sb->exec->id, exec_id))
			return sb->exec;
	return NULL;
}

struct sandbox *sbx_exec_sandbox(struct sbx_mgr *m, const char *exec_id)
{
	struct execution *e = exec_find(m, exec_id);

	return e ? e->sb : NULL;
}

void sbx_exec_cancel(struct sbx_mgr *m, const char *exec_id, sbx_done_fn done, void *ctx)
{
	struct execution *e = exec_find(m, exec_id);
	struct sbx_reply reply = {0};
	struct sbx_err err;
	json_t *rec = NULL;

	if (!e || e->phase == EXEC_ENDED || e->cancel_done) {
		if (store_execution_get(m->store, exec_id, &rec, NULL)) {
			sbx_fail(&err, SBX_NOT_FOUND, -ENOENT, "execution %s not found", exec_id);
			done(ctx, &err, NULL);
			return;
		}
		if (e && e->cancel_done) {
			sbx_fail(&err, SBX_STATE, -EALREADY, "execution %s is being cancelled",
			         exec_id);
			done(ctx, &err, NULL);
		} else {
			/* It ended already: its record says how. */
			reply.data = rec;
			done(ctx, NULL, &reply);
		}
		json_decref(rec);
		return;
	}
	e->cancel_done = done;
	e->cancel_ctx = ctx;
	log_info(e->sb->id, "cancelling %s by request", e->id);
	if (e->phase == EXEC_QUEUED || e->phase == EXEC_LOST) {
		snprintf(e->cancel_why, sizeof(e->cancel_why), "cancelled by request");
		exec_end(e, -ECANCELED, NULL, e->cancel_why);
		return;
	}
	cancel(e, "cancelled by request");
}

int sbx_stream(struct sbx_mgr *m, const char *stream_id, struct outbuf **live, char *path,
               size_t pathlen)
{
	*live = sbx_streams_live(m, stream_id);
	if (!*live)
		*live = sbx_job_tail_live(m, stream_id);
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		for (int i = 0; sb->exec && i < 2; i++)
			if (sb->exec->io.out[i] &&
			    !strcmp(outbuf_id(sb->exec->io.out[i]), stream_id))
				*live = sb->exec->io.out[i];
	return outbuf_file(m->streams, stream_id, path, pathlen);
}
