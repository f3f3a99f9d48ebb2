// SPDX-License-Identifier: MIT
/*
 * Jobs (API.md §5.4): background processes, which run beside the one
 * execution at a time. The agent runs them (job.start and friends); huskd
 * keeps a record per job, refreshed from the agent whenever one is asked
 * for, and follows its output into its streams (sbx_job_tail.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"
#include "sbx_exec_io.h"
#include "sbx_int.h"

struct job_op {
	struct sbx_mgr *m;
	char sandbox[STORE_ID_LEN];
	char job[STORE_ID_LEN];
	json_t *ctx; /* create: the record to insert */
	bool stopping;
	int kind;
	int limit;             /* list: how many, newest first (0: all) */
	json_t *priv;          /* create: the record's private part (its stream ids) */
	struct outbuf *out[2]; /* create: its output streams, followed once it runs */
	sbx_done_fn done;
	void *done_ctx;
};

enum { JOB_CREATE, JOB_ONE, JOB_LIST };

/* The API's view of an agent job; stopped: huskd stopped it (cancelled). */
static json_t *job_patch(json_t *aj, bool stopped, const char **status)
{
	json_t *patch = json_object(), *code = json_object_get(aj, "exit_code");

	if (json_is_true(json_object_get(aj, "running"))) {
		*status = "running";
		return patch;
	}
	*status = stopped ? "cancelled" : json_integer_value(code) == 0 ? "completed" : "failed";
	if (json_is_integer(code))
		json_object_set(patch, "exitCode", code);
	return patch;
}

/* Brings the stored record up to date with the agent's job; *out gets the record. */
static void job_refresh(struct job_op *op, const char *job_id, json_t *aj, bool stopped,
                        json_t **out)
{
	const char *status;
	json_t *patch = job_patch(aj, stopped, &status);

	if (store_job_update(op->m->store, job_id, status, patch, NULL, out)) {
		/* A finished record stays as it was: terminal states are final. */
		json_decref(*out);
		*out = NULL;
		if (store_job_get(op->m->store, op->sandbox, job_id, out, NULL))
			*out = NULL;
	}
	json_decref(patch);
}

static json_t *answer_list(struct job_op *op, json_t *agent_jobs)
{
	json_t *jobs = NULL, *rec, *aj, *priv = NULL;
	size_t i, j;

	if (store_job_list(op->m->store, op->sandbox, op->limit, &jobs))
		return NULL;
	/* Each record is matched with the agent's job by the id kept privately. */
	json_array_foreach(json_object_get(jobs, "jobs"), i, rec)
	{
		const char *jid = json_string_value(json_object_get(rec, "jobId"));
		json_t *fresh = NULL;

		if (store_job_get(op->m->store, op->sandbox, jid, NULL, &priv))
			continue;
		json_array_foreach(agent_jobs, j, aj)
		{
			if (json_equal(json_object_get(aj, "id"),
			               json_object_get(priv, "agentJob"))) {
				job_refresh(op, jid, aj, false, &fresh);
				if (fresh)
					json_array_set_new(json_object_get(jobs, "jobs"), i, fresh);
				break;
			}
		}
		json_decref(priv);
		priv = NULL;
	}
	return jobs;
}

/* Its streams end (a job that never started wrote nothing) and are let go. */
static void job_op_free(struct job_op *op)
{
	for (int i = 0; i < 2; i++) {
		if (op->out[i])
			outbuf_close(op->out[i]);
		outbuf_unref(op->out[i]);
	}
	json_decref(op->priv);
	json_decref(op->ctx);
	free(op);
}

static void job_done(void *arg, int rc, json_t *out, const struct sbx_err *err)
{
	struct job_op *op = arg;
	struct sbx_reply reply = {0};
	struct sandbox *sb;
	struct sbx_err e;
	json_t *priv;

	if (rc > 0) {
		sbx_agent_error(out, &e, NULL);
		err = &e;
	} else if (!rc && op->kind == JOB_CREATE) {
		priv = op->priv;
		json_object_set(priv, "agentJob", json_object_get(out, "id"));
		if (store_job_insert(op->m->store, op->ctx, priv) ||
		    store_job_update(op->m->store, op->job, "running", NULL, NULL, &reply.data)) {
			sbx_fail(&e, SBX_INTERNAL, -EIO, "cannot record the job");
			err = &e;
		} else if ((sb = sbx_find(op->m, op->sandbox))) {
			sbx_job_tails_start(sb, op->job,
			                    json_string_value(json_object_get(out, "id")), op->out);
			/* The tails hold them now: let go without ending them. */
			for (int i = 0; i < 2; i++) {
				outbuf_unref(op->out[i]);
				op->out[i] = NULL;
			}
		}
	} else if (!rc && op->kind == JOB_ONE) {
		job_refresh(op, op->job, out, op->stopping, &reply.data);
		if (!reply.data) {
			sbx_fail(&e, SBX_INTERNAL, -EIO, "cannot read the job record");
			err = &e;
		}
	} else if (!rc) {
		reply.data = answer_list(op, json_object_get(out, "jobs"));
		if (!reply.data) {
			sbx_fail(&e, SBX_INTERNAL, -EIO, "cannot list jobs");
			err = &e;
		}
	}
	op->done(op->done_ctx, rc || reply.data == NULL ? err : NULL, &reply);
	json_decref(reply.data);
	job_op_free(op);
}

static const struct sbx_call_ops job_ops = {.done = job_done};

/* Sends req (stolen) for op to the sandbox's agent. */
static void job_send(struct sbx_mgr *m, const char *id, struct job_op *op, json_t *req)
{
	struct sbx_err err;
	struct sandbox *sb = sbx_lookup(m, id, &err);

	if (!sb || !req) {
		if (sb)
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		op->done(op->done_ctx, &err, NULL);
		json_decref(req);
		job_op_free(op);
		return;
	}
	sbx_call(sb, req, NULL, &job_ops, op);
	json_decref(req);
}

static struct job_op *job_op_new(struct sbx_mgr *m, const char *id, int kind, sbx_done_fn done,
                                 void *ctx)
{
	struct job_op *op = calloc(1, sizeof(*op));
	struct sbx_err err;

	if (!op) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return NULL;
	}
	*op = (struct job_op){.m = m, .kind = kind, .done = done, .done_ctx = ctx};
	snprintf(op->sandbox, sizeof(op->sandbox), "%s", id);
	return op;
}

/* A job's streams name its stdout and stderr, nothing else (no stdin, no timestamps). */
static bool streams_only_outputs(json_t *streams, struct sbx_err *err)
{
	const char *k;
	json_t *v;

	json_object_foreach(streams, k, v)
	{
		if (strcmp(k, "stdout") && strcmp(k, "stderr")) {
			sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			         "streams.%s is not a job's: streams takes stdout and stderr", k);
			return false;
		}
	}
	return true;
}

void sbx_job_create(struct sbx_mgr *m, const char *id, json_t *argv, json_t *streams,
                    const char *base, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb;
	struct job_op *op;
	struct sbx_err err;
	json_t *v;
	size_t i;

	json_array_foreach(argv, i, v)
	{
		if (!json_is_string(v))
			argv = NULL;
	}
	if (!json_is_array(argv) || !json_array_size(argv)) {
		sbx_fail(&err, SBX_BAD_INPUT, -EINVAL,
		         "command must be a non-empty array of strings");
		done(ctx, &err, NULL);
		return;
	}
	op = job_op_new(m, id, JOB_CREATE, done, ctx);
	if (!op)
		return;
	if (store_new_id("job_", op->job)) {
		free(op);
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of ids");
		done(ctx, &err, NULL);
		return;
	}
	op->ctx = json_pack("{sssssO}", "jobId", op->job, "sandboxId", id, "command", argv);
	op->priv = json_object();
	sb = sbx_lookup(m, id, &err);
	if (!sb || !op->ctx || !op->priv || !streams_only_outputs(streams, &err) ||
	    sbx_streams_check(m, sb->org, streams, &err) ||
	    sbx_exec_io_outputs(sb, streams, base, op->out, op->ctx, op->priv, &err)) {
		if (sb && (!op->ctx || !op->priv))
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		job_op_free(op);
		return;
	}
	job_send(m, id, op,
	         json_pack("{sssOssss*}", "op", "job.start", "argv", argv, "cwd", sbx_workspace(sb),
	                   "user", sb ? sbx_user(sb) : NULL));
}

void sbx_job_list(struct sbx_mgr *m, const char *id, int limit, sbx_done_fn done, void *ctx)
{
	struct job_op *op = job_op_new(m, id, JOB_LIST, done, ctx);

	if (!op)
		return;
	op->limit = limit > 0 ? limit : 0;
	job_send(m, id, op, json_pack("{ss}", "op", "job.list"));
}

/* GET or DELETE one job: the agent is asked (job.get, job.stop), the record refreshed. */
static void job_one(struct sbx_mgr *m, const char *id, const char *job, bool stop, bool force,
                    sbx_done_fn done, void *ctx)
{
	json_t *rec = NULL, *priv = NULL, *aid;
	struct sbx_reply reply = {0};
	struct sbx_err err;
	struct job_op *op;

	if (store_job_get(m->store, id, job, &rec, &priv)) {
		sbx_fail(&err, SBX_NOT_FOUND, -ENOENT, "job %s not found in sandbox %s", job, id);
		done(ctx, &err, NULL);
		return;
	}
	aid = json_object_get(priv, "agentJob");
	if (!json_is_string(aid)) {
		reply.data = rec;
		done(ctx, NULL, &reply);
		json_decref(rec);
		json_decref(priv);
		return;
	}
	op = job_op_new(m, id, JOB_ONE, done, ctx);
	if (op) {
		snprintf(op->job, sizeof(op->job), "%s", job);
		op->stopping = stop;
		job_send(m, id, op,
		         stop ? json_pack("{sssOsbsi}", "op", "job.stop", "id", aid, "force", force,
		                          "grace_ms", 2000)
		              : json_pack("{sssO}", "op", "job.get", "id", aid));
	}
	json_decref(rec);
	json_decref(priv);
}

void sbx_job_get(struct sbx_mgr *m, const char *id, const char *job, sbx_done_fn done, void *ctx)
{
	job_one(m, id, job, false, false, done, ctx);
}

void sbx_job_stop(struct sbx_mgr *m, const char *id, const char *job, bool force, sbx_done_fn done,
                  void *ctx)
{
	job_one(m, id, job, true, force, done, ctx);
}
