// SPDX-License-Identifier: MIT
/*
 * Executions (API.md §5.2) and jobs (§5.4): the same record twice, a
 * command in a sandbox with a status, start and end, so one implementation
 * driven by a table of what differs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

struct task_kind {
	const char *id_key;   /* "executionId" */
	const char *list_key; /* "executions" */
	const char *initial;  /* the status of a new record */
	const char *running;  /* becoming this sets startedAt */
	const char *const *statuses, *const *terminal, *const *state_keys;
	bool counted;  /* counted in the sandbox's "executions" */
	bool duration; /* keeps durationMs */
	json_t *(*row)(struct store *s, sqlite3_stmt *st); /* the record from TASK_COLUMNS */
	/* A table name cannot be a parameter: each kind has its statements. */
	const char *sql_insert, *sql_read, *sql_update, *sql_list, *sql_unfinished;
};

/* The columns task_json reads, then private. */
#define TASK_COLUMNS "id, sandbox_id, status, started_ms, completed_ms, data"

#define TASK_SQL(table, unfinished)                                                             \
	.sql_insert =                                                                           \
		"INSERT INTO " table " (id, sandbox_id, status, created_ms, started_ms, "       \
		"completed_ms, data, private) VALUES (?, ?, ?, ?, ?, ?, ?, coalesce(?, '{}'))", \
	.sql_read = "SELECT " TASK_COLUMNS ", private FROM " table                              \
		    " WHERE id = ?1 AND (?2 IS NULL OR sandbox_id = ?2)",                       \
	.sql_update = "UPDATE " table " SET status = ?, started_ms = ?, completed_ms = ?, "     \
		      "data = ?, private = ? WHERE id = ?",                                     \
	.sql_list = "SELECT " TASK_COLUMNS " FROM " table                                       \
		    " WHERE sandbox_id = ? ORDER BY seq DESC LIMIT ?",                          \
	.sql_unfinished = "SELECT id FROM " table                                               \
			  " WHERE sandbox_id = ? AND status IN " unfinished " ORDER BY seq"

static const char *const exec_statuses[] = {"queued",  "running",   "completed", "failed",
                                            "timeout", "cancelled", NULL};
static const char *const job_statuses[] = {"pending", "running",   "completed",
                                           "failed",  "cancelled", NULL};
static const char *const exec_terminal[] = {"completed", "failed", "timeout", "cancelled", NULL};
static const char *const job_terminal[] = {"completed", "failed", "cancelled", NULL};
static const char *const exec_keys[] = {"executionId", "sandboxId",   "status",
                                        "startedAt",   "completedAt", NULL};
static const char *const job_keys[] = {"jobId",     "sandboxId",   "status",
                                       "startedAt", "completedAt", NULL};

static json_t *execution_json(struct store *s, sqlite3_stmt *st);
static json_t *job_json(struct store *s, sqlite3_stmt *st);

static const struct task_kind executions = {
	.id_key = "executionId",
	.list_key = "executions",
	.initial = "queued",
	.running = "running",
	.statuses = exec_statuses,
	.terminal = exec_terminal,
	.state_keys = exec_keys,
	.counted = true,
	.duration = true,
	.row = execution_json,
	TASK_SQL("executions", "('queued', 'running')"),
};

static const struct task_kind jobs = {
	.id_key = "jobId",
	.list_key = "jobs",
	.initial = "pending",
	.running = "running",
	.statuses = job_statuses,
	.terminal = job_terminal,
	.state_keys = job_keys,
	.row = job_json,
	TASK_SQL("jobs", "('pending', 'running')"),
};

bool store_execution_status_valid(const char *status)
{
	return store_str_in(status, exec_statuses);
}

bool store_job_status_valid(const char *status)
{
	return store_str_in(status, job_statuses);
}

static int64_t col_ms(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? STORE_NULL
	                                                   : sqlite3_column_int64(st, col);
}

/* The record from a row of TASK_COLUMNS. */
static json_t *task_json(const struct task_kind *k, struct store *s, sqlite3_stmt *st)
{
	json_t *data = store_col_json(s, st, 5);
	int64_t started = col_ms(st, 3), completed = col_ms(st, 4);
	json_t *t;

	if (!data)
		return NULL;
	t = json_pack("{s:s, s:s}", k->id_key, store_col_text(st, 0), "sandboxId",
	              store_col_text(st, 1));
	if (!t || json_object_update(t, data) ||
	    json_object_set_new(t, "status", json_string(store_col_text(st, 2))) ||
	    (started != STORE_NULL && store_json_set_time(t, "startedAt", started) < 0) ||
	    (completed != STORE_NULL && store_json_set_time(t, "completedAt", completed) < 0)) {
		json_decref(t);
		t = NULL;
	}
	json_decref(data);
	return t;
}

static int task_insert(const struct task_kind *k, struct store *s, json_t *obj, json_t *priv)
{
	const char *id = store_json_str(obj, k->id_key);
	const char *sandbox_id = store_json_str(obj, "sandboxId");
	const char *status = store_json_str(obj, "status");
	int64_t now, started, completed;
	json_t *data;
	int ret;

	if (!status)
		status = k->initial;
	if (!id || !*id || strlen(id) >= STORE_ID_LEN || !sandbox_id ||
	    !store_str_in(status, k->statuses) || (priv && !json_is_object(priv)))
		return -EINVAL;
	data = store_json_without(obj, k->state_keys);
	if (!data)
		return -ENOMEM;
	store_lock(s);
	ret = store_begin(s);
	if (ret < 0)
		goto out;
	now = store_clock(s);
	/* A record may be born finished (a command that could not start). */
	completed = store_str_in(status, k->terminal) ? now : STORE_NULL;
	started = !strcmp(status, k->running) ? now : STORE_NULL;
	ret = store_run(s, k->sql_insert, "tttiiijj", id, sandbox_id, status, now, started,
	                completed, data, priv);
	if (ret >= 0 && k->counted)
		ret = store_run(s,
		                "UPDATE sandboxes SET executions = executions + 1, updated_ms = ? "
		                "WHERE id = ?",
		                "it", now, sandbox_id);
	ret = store_end(s, ret);
out:
	store_unlock(s);
	json_decref(data);
	return ret < 0 ? ret : 0;
}

static json_t *execution_json(struct store *s, sqlite3_stmt *st)
{
	return task_json(&executions, s, st);
}

static json_t *job_json(struct store *s, sqlite3_stmt *st)
{
	return task_json(&jobs, s, st);
}

/* Reads a record; sandbox_id, if given, must be its sandbox. */
static int task_read(const struct task_kind *k, struct store *s, const char *sandbox_id,
                     const char *id, json_t **obj, json_t **priv)
{
	return store_read_row(s, k->sql_read, id, sandbox_id, k->row, 6, obj, priv);
}

static int task_get(const struct task_kind *k, struct store *s, const char *sandbox_id,
                    const char *id, json_t **obj, json_t **priv)
{
	int ret;

	store_lock(s);
	ret = task_read(k, s, sandbox_id, id, obj, priv);
	store_unlock(s);
	return ret;
}

/* The record's current state, as task_change needs it. */
struct task_row {
	char status[32];
	int64_t started, completed;
	json_t *data, *priv;
};

static int task_row_read(const struct task_kind *k, struct store *s, const char *id,
                         struct task_row *r)
{
	sqlite3_stmt *st;
	int ret;

	r->data = r->priv = NULL;
	ret = store_prepare(s, k->sql_read, &st);
	if (ret < 0)
		return ret;
	ret = store_bind(st, "t", id);
	if (ret == 0)
		ret = store_step(s, st);
	if (ret == 1) {
		snprintf(r->status, sizeof(r->status), "%s", store_col_text(st, 2));
		r->started = col_ms(st, 3);
		r->completed = col_ms(st, 4);
		r->data = store_col_json(s, st, 5);
		r->priv = store_col_json(s, st, 6);
		ret = r->data && r->priv ? 0 : -EIO;
	} else if (ret == 0) {
		ret = -ENOENT;
	}
	store_reset(st);
	return ret;
}

/* Status change and patches of one record, in the caller's transaction. */
static int task_change(const struct task_kind *k, struct store *s, const char *id,
                       const char *status, json_t *patch, json_t *priv_patch)
{
	struct task_row r;
	int ret;

	ret = task_row_read(k, s, id, &r);
	if (ret < 0)
		goto out;
	if (status && strcmp(status, r.status)) {
		int64_t now = store_clock(s);

		if (store_str_in(r.status, k->terminal)) {
			ret = -EINVAL;
			goto out;
		}
		if (!strcmp(status, k->running) && r.started == STORE_NULL)
			r.started = now;
		if (store_str_in(status, k->terminal)) {
			r.completed = now;
			if (k->duration && r.started != STORE_NULL &&
			    json_object_set_new(r.data, "durationMs",
			                        json_integer(r.completed - r.started))) {
				ret = -ENOMEM;
				goto out;
			}
		}
		snprintf(r.status, sizeof(r.status), "%s", status);
	}
	if (patch)
		ret = store_json_patch(r.data, patch);
	if (ret == 0 && priv_patch)
		ret = store_json_patch(r.priv, priv_patch);
	if (ret == 0)
		ret = store_run(s, k->sql_update, "tiijjt", r.status, r.started, r.completed,
		                r.data, r.priv, id);
out:
	json_decref(r.data);
	json_decref(r.priv);
	return ret < 0 ? ret : 0;
}

static int task_update(const struct task_kind *k, struct store *s, const char *id,
                       const char *status, json_t *patch, json_t *priv_patch, json_t **out)
{
	int ret;

	if (out)
		*out = NULL;
	if ((status && !store_str_in(status, k->statuses)) ||
	    (patch && (!json_is_object(patch) || store_json_has_any(patch, k->state_keys))) ||
	    (priv_patch && !json_is_object(priv_patch)))
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = store_end(s, task_change(k, s, id, status, patch, priv_patch));
	/* Read back after the commit, under the same lock: nothing changes it in between. */
	if (ret == 0 && out)
		ret = task_read(k, s, NULL, id, out, NULL);
	store_unlock(s);
	return ret;
}

static int task_list(const struct task_kind *k, struct store *s, const char *sandbox_id, int limit,
                     json_t **out)
{
	return store_list_rows(s, k->sql_list, sandbox_id, limit, k->row, k->list_key, out);
}

/* Fails every unfinished record of the sandbox; adds how many to *count. */
static int task_abandon(const struct task_kind *k, struct store *s, const char *sandbox_id,
                        json_t *patch, int *count)
{
	json_t *ids = json_array();
	sqlite3_stmt *st;
	size_t i;
	json_t *id;
	int ret;

	if (!ids)
		return -ENOMEM;
	/* Ids first: no updates to a table while a statement walks it. */
	ret = store_prepare(s, k->sql_unfinished, &st);
	if (ret == 0) {
		ret = store_bind(st, "t", sandbox_id);
		while (ret == 0 && (ret = store_step(s, st)) == 1)
			ret = json_array_append_new(ids, json_string(store_col_text(st, 0)))
			              ? -ENOMEM
			              : 0;
		store_reset(st);
	}
	json_array_foreach(ids, i, id)
	{
		if (ret < 0)
			break;
		ret = task_change(k, s, json_string_value(id), "failed", patch, NULL);
		(*count)++;
	}
	json_decref(ids);
	return ret;
}

int store_abandon_unfinished(struct store *s, const char *sandbox_id, const char *reason,
                             bool jobs_too, int *count)
{
	json_t *exec_patch = json_pack("{s:s?, s:i}", "error", reason, "exitCode", 1);
	json_t *job_patch = json_pack("{s:s?}", "error", reason);
	int n = 0, ret;

	if (!exec_patch || !job_patch) {
		ret = -ENOMEM;
		goto out;
	}
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = task_abandon(&executions, s, sandbox_id, exec_patch, &n);
	if (ret == 0 && jobs_too)
		ret = task_abandon(&jobs, s, sandbox_id, job_patch, &n);
	ret = store_end(s, ret);
	store_unlock(s);
out:
	json_decref(exec_patch);
	json_decref(job_patch);
	if (count)
		*count = ret < 0 ? 0 : n;
	return ret;
}

int store_execution_insert(struct store *s, json_t *exec, json_t *priv)
{
	return task_insert(&executions, s, exec, priv);
}

int store_execution_get(struct store *s, const char *id, json_t **exec, json_t **priv)
{
	return task_get(&executions, s, NULL, id, exec, priv);
}

int store_execution_update(struct store *s, const char *id, const char *status, json_t *patch,
                           json_t *priv_patch, json_t **out)
{
	return task_update(&executions, s, id, status, patch, priv_patch, out);
}

int store_execution_list(struct store *s, const char *sandbox_id, int limit, json_t **out)
{
	return task_list(&executions, s, sandbox_id, limit, out);
}

int store_job_insert(struct store *s, json_t *job, json_t *priv)
{
	return task_insert(&jobs, s, job, priv);
}

int store_job_get(struct store *s, const char *sandbox_id, const char *id, json_t **job,
                  json_t **priv)
{
	return task_get(&jobs, s, sandbox_id, id, job, priv);
}

int store_job_update(struct store *s, const char *id, const char *status, json_t *patch,
                     json_t *priv_patch, json_t **out)
{
	return task_update(&jobs, s, id, status, patch, priv_patch, out);
}

int store_job_list(struct store *s, const char *sandbox_id, int limit, json_t **out)
{
	return task_list(&jobs, s, sandbox_id, limit, out);
}

int store_streams_of_deleted(struct store *s, int64_t from_ms, int64_t to_ms, json_t **out)
{
	static const char sql[] = "SELECT json_extract(e.private, '$.stdoutStream'), "
				  "json_extract(e.private, '$.stderrStream') FROM executions e "
				  "JOIN sandboxes x ON x.id = e.sandbox_id "
				  "WHERE x.deleted_ms >= ?1 AND x.deleted_ms < ?2 "
				  "UNION ALL SELECT json_extract(j.private, '$.stdoutStream'), "
				  "json_extract(j.private, '$.stderrStream') FROM jobs j "
				  "JOIN sandboxes x ON x.id = j.sandbox_id "
				  "WHERE x.deleted_ms >= ?1 AND x.deleted_ms < ?2";
	json_t *ids = json_array();
	sqlite3_stmt *st;
	int ret;

	if (!ids)
		return -ENOMEM;
	store_lock(s);
	ret = store_prepare(s, sql, &st);
	if (ret == 0) {
		ret = store_bind(st, "ii", from_ms, to_ms);
		while (ret == 0 && (ret = store_step(s, st)) == 1) {
			for (int c = 0; c < 2 && ret >= 0; c++) {
				const char *id = store_col_text(st, c);

				if (id && json_array_append_new(ids, json_string(id)))
					ret = -ENOMEM;
			}
			ret = ret < 0 ? ret : 0;
		}
		store_reset(st);
	}
	store_unlock(s);
	if (ret < 0) {
		json_decref(ids);
		return ret;
	}
	*out = ids;
	return 0;
}
