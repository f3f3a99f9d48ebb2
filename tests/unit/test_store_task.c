// SPDX-License-Identifier: MIT
/* Executions and jobs in the state store. */
#include <errno.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

static int add_exec(struct store *s, const char *sandbox_id, const char *id, const char *status)
{
	json_t *e = json_pack("{s:s, s:s, s:s, s:[s,s], s:s}", "executionId", id, "sandboxId",
	                      sandbox_id, "type", "exec", "command", "python3", "main.py",
	                      "stdoutStreamUrl", "http://h/streams/str_1");
	int ret;

	if (status)
		json_object_set_new(e, "status", json_string(status));
	ret = store_execution_insert(s, e, NULL);
	json_decref(e);
	return ret;
}

UNIT_TEST(store_execution_lifecycle)
{
	struct store *s = tstore_open("exec.db");
	char sbx[STORE_ID_LEN], id[STORE_ID_LEN];
	json_t *e, *patch, *priv, *info;

	CHECK(s);
	CHECK(tstore_sandbox(s, "x", sbx) == 0);
	CHECK(store_new_id(STORE_PFX_EXECUTION, id) == 0);
	CHECK(add_exec(s, sbx, id, NULL) == 0);
	CHECK(add_exec(s, sbx, id, NULL) == -EEXIST);
	CHECK(add_exec(s, "sbx_missing", "exec_orphan", NULL) == -ENOENT);
	CHECK(add_exec(s, sbx, "exec_bad", "done") == -EINVAL);
	CHECK(store_execution_get(s, id, &e, NULL) == 0);
	CHECK(!strcmp(tstore_str(e, "status"), "queued"));
	CHECK(!strcmp(tstore_str(e, "sandboxId"), sbx));
	CHECK(!json_object_get(e, "startedAt") && !json_object_get(e, "exitCode"));
	json_decref(e);

	tstore_now += 100;
	priv = json_pack("{s:i}", "agentRequest", 7);
	CHECK(store_execution_update(s, id, "running", NULL, priv, NULL) == 0);
	json_decref(priv);
	tstore_now += 1250;
	patch = json_pack("{s:i, s:b}", "exitCode", 0, "outputTruncated", 0);
	CHECK(store_execution_update(s, id, "completed", patch, NULL, &e) == 0);
	json_decref(patch);
	/* The shape GET /sandbox/execution/{id} answers with. */
	CHECK(!strcmp(tstore_str(e, "executionId"), id));
	CHECK(!strcmp(tstore_str(e, "status"), "completed"));
	CHECK(json_is_integer(json_object_get(e, "exitCode")) && tstore_int(e, "exitCode") == 0);
	CHECK(tstore_int(e, "durationMs") == 1250);
	CHECK(!strcmp(tstore_str(e, "startedAt"), "2026-05-01T12:00:00.100Z"));
	CHECK(!strcmp(tstore_str(e, "completedAt"), "2026-05-01T12:00:01.350Z"));
	CHECK(json_is_false(json_object_get(e, "outputTruncated")));
	CHECK(!strcmp(json_string_value(json_array_get(json_object_get(e, "command"), 1)),
	              "main.py"));
	json_decref(e);
	CHECK(store_execution_get(s, id, NULL, &priv) == 0);
	CHECK(tstore_int(priv, "agentRequest") == 7);
	json_decref(priv);

	/* Terminal is terminal; later patches (no status) still apply. */
	CHECK(store_execution_update(s, id, "running", NULL, NULL, NULL) == -EINVAL);
	patch = json_pack("{s:b}", "outputTruncated", 1);
	CHECK(store_execution_update(s, id, NULL, patch, NULL, NULL) == 0);
	json_decref(patch);
	patch = json_pack("{s:s}", "startedAt", "yesterday");
	CHECK(store_execution_update(s, id, NULL, patch, NULL, NULL) == -EINVAL);
	json_decref(patch);
	CHECK(store_execution_update(s, "exec_missing", "running", NULL, NULL, NULL) == -ENOENT);
	CHECK(store_execution_update(s, id, "sleeping", NULL, NULL, NULL) == -EINVAL);

	/* Counted on the sandbox. */
	CHECK(store_sandbox_get(s, sbx, &info, NULL) == 0);
	CHECK(tstore_int(info, "executions") == 1);
	json_decref(info);
	CHECK(!tstore_log()[0]);
	store_close(s);
}

UNIT_TEST(store_execution_list_newest_first)
{
	struct store *s = tstore_open("exec_list.db");
	char sbx[STORE_ID_LEN], other[STORE_ID_LEN];
	json_t *list, *info;

	CHECK(s);
	CHECK(tstore_sandbox(s, "x", sbx) == 0);
	CHECK(tstore_sandbox(s, "y", other) == 0);
	CHECK(add_exec(s, sbx, "exec_1", "completed") == 0);
	CHECK(add_exec(s, sbx, "exec_2", "failed") == 0);
	CHECK(add_exec(s, sbx, "exec_3", "running") == 0);
	CHECK(add_exec(s, other, "exec_4", NULL) == 0);
	CHECK(store_execution_list(s, sbx, 2, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "executions")) == 2);
	CHECK(!strcmp(
		tstore_str(json_array_get(json_object_get(list, "executions"), 0), "executionId"),
		"exec_3"));
	CHECK(!strcmp(
		tstore_str(json_array_get(json_object_get(list, "executions"), 1), "executionId"),
		"exec_2"));
	json_decref(list);
	CHECK(store_execution_list(s, sbx, 0, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "executions")) == 3);
	json_decref(list);
	CHECK(store_execution_list(s, "sbx_missing", 0, &list) == -ENOENT);
	/* Records outlive their sandbox (API.md §5.2 (10)). */
	CHECK(store_sandbox_set_status(s, sbx, "deleted", NULL) == 0);
	CHECK(store_execution_get(s, "exec_1", &info, NULL) == 0);
	json_decref(info);
	CHECK(store_sandbox_get(s, sbx, &info, NULL) == 0);
	CHECK(tstore_int(info, "executions") == 3);
	json_decref(info);
	store_close(s);
}

UNIT_TEST(store_job_lifecycle)
{
	struct store *s = tstore_open("jobs.db");
	char sbx[STORE_ID_LEN], other[STORE_ID_LEN], id[STORE_ID_LEN];
	json_t *job, *list, *patch, *info;

	CHECK(s);
	CHECK(tstore_sandbox(s, "x", sbx) == 0);
	CHECK(tstore_sandbox(s, "y", other) == 0);
	CHECK(store_new_id(STORE_PFX_JOB, id) == 0);
	job = json_pack("{s:s, s:s, s:[s,s,s], s:s, s:n, s:n}", "jobId", id, "sandboxId", sbx,
	                "command", "bun", "run", "server.ts", "status", "running", "exitCode",
	                "error");
	CHECK(store_job_insert(s, job, NULL) == 0);
	json_decref(job);
	CHECK(store_job_get(s, sbx, id, &job, NULL) == 0);
	CHECK(!strcmp(tstore_str(job, "status"), "running"));
	CHECK(!strcmp(tstore_str(job, "startedAt"), "2026-05-01T12:00:00.000Z"));
	CHECK(json_is_null(json_object_get(job, "exitCode")));
	json_decref(job);
	CHECK(store_job_get(s, other, id, &job, NULL) == -ENOENT);
	CHECK(store_job_get(s, NULL, id, &job, NULL) == 0);
	json_decref(job);

	tstore_now += 500;
	patch = json_pack("{s:i}", "exitCode", 143);
	CHECK(store_job_update(s, id, "cancelled", patch, NULL, &job) == 0);
	json_decref(patch);
	CHECK(tstore_int(job, "exitCode") == 143);
	CHECK(!strcmp(tstore_str(job, "completedAt"), "2026-05-01T12:00:00.500Z"));
	CHECK(!json_object_get(job, "durationMs"));
	json_decref(job);
	CHECK(store_job_update(s, id, "queued", NULL, NULL, NULL) == -EINVAL);
	CHECK(store_job_list(s, sbx, 10, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "jobs")) == 1);
	json_decref(list);
	/* Jobs do not count as executions. */
	CHECK(store_sandbox_get(s, sbx, &info, NULL) == 0);
	CHECK(tstore_int(info, "executions") == 0);
	json_decref(info);
	store_close(s);
}

UNIT_TEST(store_abandon_unfinished_after_restart)
{
	struct store *s = tstore_open("abandon.db");
	char sbx[STORE_ID_LEN];
	json_t *job, *e;
	int n;

	CHECK(s);
	CHECK(tstore_sandbox(s, "x", sbx) == 0);
	CHECK(add_exec(s, sbx, "exec_done", "completed") == 0);
	CHECK(add_exec(s, sbx, "exec_run", "running") == 0);
	CHECK(add_exec(s, sbx, "exec_queued", NULL) == 0);
	job = json_pack("{s:s, s:s, s:[s]}", "jobId", "job_1", "sandboxId", sbx, "command",
	                "sleep");
	CHECK(store_job_insert(s, job, NULL) == 0);
	json_decref(job);

	/* Jobs run on in the guest: kept unless asked for. */
	CHECK(store_abandon_unfinished(s, sbx, "huskd restarted", false, &n) == 0);
	CHECK(n == 2);
	CHECK(store_job_get(s, sbx, "job_1", &job, NULL) == 0);
	CHECK(!strcmp(tstore_str(job, "status"), "pending"));
	json_decref(job);
	CHECK(store_abandon_unfinished(s, sbx, "its guest is gone", true, &n) == 0);
	CHECK(n == 1);
	CHECK(store_execution_get(s, "exec_run", &e, NULL) == 0);
	CHECK(!strcmp(tstore_str(e, "status"), "failed"));
	CHECK(tstore_int(e, "exitCode") == 1);
	CHECK(!strcmp(tstore_str(e, "error"), "huskd restarted"));
	CHECK(json_object_get(e, "completedAt"));
	json_decref(e);
	CHECK(store_execution_get(s, "exec_done", &e, NULL) == 0);
	CHECK(!strcmp(tstore_str(e, "status"), "completed") && !json_object_get(e, "error"));
	json_decref(e);
	CHECK(store_job_get(s, sbx, "job_1", &job, NULL) == 0);
	CHECK(!strcmp(tstore_str(job, "status"), "failed"));
	json_decref(job);
	CHECK(store_abandon_unfinished(s, sbx, "again", true, &n) == 0 && n == 0);
	store_close(s);
}
