// SPDX-License-Identifier: MIT
/*
 * Jobs (API.md §5.4): background processes, which run beside the one
 * execution at a time. The agent runs them (job.start and friends); huskd
 * keeps a record per job, refreshed from the agent whenever one is asked
 * for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentop.h"
#include "handlers.h"
#include "json_resp.h"

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
static void job_refresh(struct op *op, const char *job_id, json_t *aj, bool stopped, json_t **out)
{
	const char *status;
	json_t *patch = job_patch(aj, stopped, &status);

	if (store_job_update(op->d->store, job_id, status, patch, NULL, out)) {
		/* A finished record stays as it was: terminal states are final. */
		json_decref(*out);
		*out = NULL;
		if (store_job_get(op->d->store, op->sandbox, job_id, out, NULL))
			*out = NULL;
	}
	json_decref(patch);
}

static void answer_created(struct op *op)
{
	const char *job_id = json_string_value(json_object_get(op->ctx, "jobId"));
	json_t *rec = NULL, *priv;

	if (op->rc) {
		answer_agent_error(op);
		return;
	}
	priv = json_pack("{sO}", "agentJob", json_object_get(op->out, "id"));
	if (store_job_insert(op->d->store, op->ctx, priv) ||
	    store_job_update(op->d->store, job_id, "running", NULL, NULL, &rec)) {
		json_decref(priv);
		api_error(op->r, 500, "INTERNAL", "cannot record the job");
		return;
	}
	json_decref(priv);
	api_ok(op->r, 200, rec);
}

HANDLER(h_job_create)
{
	json_t *body = body_object(r), *cmd, *v;
	char id[STORE_ID_LEN];
	struct op *op;
	size_t i;

	if (!body)
		return;
	cmd = json_object_get(body, "command");
	json_array_foreach(cmd, i, v)
	{
		if (!json_is_string(v))
			cmd = NULL;
	}
	if (!json_is_array(cmd) || !json_array_size(cmd) || store_new_id("job_", id)) {
		api_error(r, 400, "BAD_REQUEST", "command must be a non-empty array of strings");
		json_decref(body);
		return;
	}
	op = op_new(OP_CALL, answer_created);
	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		json_decref(body);
		return;
	}
	op->req = json_pack("{sssOss}", "op", "job.start", "argv", cmd, "cwd", WORKSPACE);
	op->ctx = json_pack("{sssssO}", "jobId", id, "sandboxId", p[0], "command", cmd);
	json_decref(body);
	op_submit(ctx, r, p[0], op);
}

static void answer_one(struct op *op)
{
	const char *job_id = json_string_value(json_object_get(op->ctx, "jobId"));
	bool stopped = json_is_true(json_object_get(op->ctx, "stopping"));
	json_t *rec = NULL;

	if (op->rc) {
		answer_agent_error(op);
		return;
	}
	job_refresh(op, job_id, op->out, stopped, &rec);
	if (rec)
		api_ok(op->r, 200, rec);
	else
		api_error(op->r, 500, "INTERNAL", "cannot read the job record");
}

/* GET or DELETE one job: the agent is asked (job.get, job.stop), the record refreshed. */
static void job_one(struct http_req *r, const char *const *p, void *ctx, bool stop)
{
	struct huskd *d = ctx;
	json_t *rec = NULL, *priv = NULL, *aid;
	char force[8] = "";
	struct op *op;

	if (store_job_get(d->store, p[0], p[1], &rec, &priv)) {
		api_error(r, 404, "JOB_NOT_FOUND", "job %s not found in sandbox %s", p[1], p[0]);
		return;
	}
	aid = json_object_get(priv, "agentJob");
	op = json_is_string(aid) ? op_new(OP_CALL, answer_one) : NULL;
	if (!op) {
		api_ok(r, 200, rec);
		json_decref(priv);
		return;
	}
	http_query_get(r, "force", force, sizeof(force));
	op->req = stop ? json_pack("{sssOsbsi}", "op", "job.stop", "id", aid, "force",
	                           !strcmp(force, "true"), "grace_ms", 2000)
	               : json_pack("{sssO}", "op", "job.get", "id", aid);
	op->ctx = json_pack("{sssb}", "jobId", p[1], "stopping", stop);
	json_decref(rec);
	json_decref(priv);
	op_submit(ctx, r, p[0], op);
}

HANDLER(h_job_get)
{
	job_one(r, p, ctx, false);
}

HANDLER(h_job_stop)
{
	job_one(r, p, ctx, true);
}

static void answer_list(struct op *op)
{
	json_t *jobs = NULL, *rec, *aj, *priv = NULL;
	size_t i, j;

	if (op->rc) {
		answer_agent_error(op);
		return;
	}
	if (store_job_list(op->d->store, op->sandbox, 0, &jobs)) {
		api_error(op->r, 500, "INTERNAL", "cannot list jobs");
		return;
	}
	/* Each record is matched with the agent's job by the id kept privately. */
	json_array_foreach(json_object_get(jobs, "jobs"), i, rec)
	{
		const char *jid = json_string_value(json_object_get(rec, "jobId"));
		json_t *fresh = NULL;

		if (store_job_get(op->d->store, op->sandbox, jid, NULL, &priv))
			continue;
		json_array_foreach(json_object_get(op->out, "jobs"), j, aj)
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
	api_ok(op->r, 200, jobs);
}

HANDLER(h_job_list)
{
	struct op *op = op_new(OP_CALL, answer_list);

	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->req = json_pack("{ss}", "op", "job.list");
	op_submit(ctx, r, p[0], op);
}
