// SPDX-License-Identifier: MIT
/*
 * Sandboxes: the record behind GET /sandbox/{id}, its status and the event
 * every change of status writes, in the same transaction.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

static const char *const statuses[] = {"creating",  "idle",       "running", "paused",  "stopping",
                                       "suspended", "terminated", "failed",  "deleted", NULL};
static const char *const ended[] = {"terminated", "failed", "deleted", NULL};

/* Kept in columns only (store.h); an update naming them is refused. */
static const char *const state_keys[] = {"sandboxId", "status", "createdAt", "executions", NULL};

/* SELECT list sandbox_json reads. */
#define INFO_COLUMNS "id, status, created_ms, executions, data"

bool store_sandbox_status_valid(const char *status)
{
	return store_str_in(status, statuses);
}

bool store_sandbox_status_live(const char *status)
{
	return store_sandbox_status_valid(status) && !store_str_in(status, ended);
}

/* The columns copied out of the public object on every write. */
struct columns {
	const char *name, *mode, *runtime, *project_id, *snapshot_id, *org_id;
	int64_t cpu_millis, memory_bytes;
};

/* A resource: its quantity string (or, from curl users, a number of units). */
static int resource(json_t *res, const char *key, int (*parse)(const char *, int64_t *),
                    int64_t unit, int64_t *v)
{
	json_t *q = json_object_get(res, key);

	*v = 0;
	if (!q)
		return 0;
	if (json_is_number(q) && json_number_value(q) >= 0 && json_number_value(q) < 1e15) {
		*v = (int64_t)(json_number_value(q) * (double)unit);
		return 0;
	}
	return parse(json_string_value(q), v);
}

static int columns_of(json_t *info, struct columns *c)
{
	json_t *rt = json_object_get(info, "runtime");
	json_t *res = json_object_get(info, "resources");
	int ret;

	c->name = store_json_str(info, "name");
	c->mode = store_json_str(info, "mode");
	c->runtime = json_is_string(rt) ? json_string_value(rt) : store_json_str(rt, "name");
	c->project_id = store_json_str(info, "projectId");
	if (!c->project_id)
		c->project_id = store_json_str(json_object_get(info, "project"), "id");
	c->snapshot_id = store_json_str(json_object_get(info, "snapshot"), "id");
	c->org_id = store_json_str(json_object_get(info, "org"), "id");
	if (!c->org_id)
		c->org_id = STORE_DEFAULT_ORG;
	ret = resource(res, "cpu", store_parse_cpu, 1000, &c->cpu_millis);
	if (ret == 0)
		ret = resource(res, "memory", store_parse_bytes, 1, &c->memory_bytes);
	return ret < 0 ? -EINVAL : 0;
}

/* SandboxInfo from a row of INFO_COLUMNS. */
static json_t *sandbox_json(struct store *s, sqlite3_stmt *st)
{
	json_t *data = store_col_json(s, st, 4);
	json_t *info;

	if (!data)
		return NULL;
	/* sandboxId first: the order people read the object in. */
	info = json_pack("{s:s}", "sandboxId", store_col_text(st, 0));
	if (!info || json_object_update(info, data) ||
	    json_object_set_new(info, "status", json_string(store_col_text(st, 1))) ||
	    store_json_set_time(info, "createdAt", sqlite3_column_int64(st, 2)) < 0 ||
	    json_object_set_new(info, "executions", json_integer(sqlite3_column_int64(st, 3)))) {
		json_decref(info);
		info = NULL;
	}
	json_decref(data);
	return info;
}

static int sandbox_read(struct store *s, const char *id, json_t **info, json_t **priv)
{
	return store_read_row(s, "SELECT " INFO_COLUMNS ", private FROM sandboxes WHERE id = ?", id,
	                      NULL, sandbox_json, 5, info, priv);
}

int store_sandbox_get(struct store *s, const char *id, json_t **info, json_t **priv)
{
	int ret;

	store_lock(s);
	ret = sandbox_read(s, id, info, priv);
	store_unlock(s);
	return ret;
}

int store_sandbox_insert(struct store *s, json_t *info, json_t *priv, json_t **out)
{
	const char *id = store_json_str(info, "sandboxId");
	const char *status = store_json_str(info, "status");
	json_t *data = NULL, *event = NULL;
	struct columns c;
	int64_t now;
	int ret;

	if (out)
		*out = NULL;
	if (!status)
		status = "creating";
	if (!id || !*id || strlen(id) >= STORE_ID_LEN || !store_sandbox_status_valid(status) ||
	    !strcmp(status, "deleted") || (priv && !json_is_object(priv)) ||
	    columns_of(info, &c) < 0)
		return -EINVAL;
	data = store_json_without(info, state_keys);
	event = c.runtime ? json_pack("{s:s, s:s}", "to", status, "runtime", c.runtime)
	                  : json_pack("{s:s}", "to", status);
	if (!data || !event) {
		ret = -ENOMEM;
		goto out;
	}
	store_lock(s);
	ret = store_begin(s);
	if (ret < 0)
		goto out_unlock;
	now = store_clock(s);
	ret = store_run(s,
	                "INSERT INTO sandboxes (id, status, name, mode, runtime, project_id, "
	                "snapshot_id, cpu_millis, memory_bytes, created_ms, updated_ms, status_ms, "
	                "data, private, org_id) "
	                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, '{}'), ?)",
	                "tttttttiiiiijjt", id, status, c.name, c.mode, c.runtime, c.project_id,
	                c.snapshot_id, c.cpu_millis, c.memory_bytes, now, now, now, data, priv,
	                c.org_id);
	if (ret >= 0)
		ret = store_event_add(s, id, store_event_type(NULL, status), status, event, NULL);
	ret = store_end(s, ret);
	if (ret >= 0 && out)
		ret = sandbox_read(s, id, out, NULL);
out_unlock:
	store_unlock(s);
out:
	json_decref(data);
	json_decref(event);
	return ret < 0 ? ret : 0;
}

/* Merges the patches into the row and refreshes the columns taken from the JSON. */
static int sandbox_patch(struct store *s, const char *id, json_t *patch, json_t *priv_patch)
{
	json_t *data = NULL, *priv = NULL;
	struct columns c;
	int ret;

	if (!patch && !priv_patch)
		return 0;
	ret = store_read_objects(s, "SELECT data, private FROM sandboxes WHERE id = ?", id, &data,
	                         &priv);
	if (ret == 0 && patch)
		ret = store_json_patch(data, patch);
	if (ret == 0 && priv_patch)
		ret = store_json_patch(priv, priv_patch);
	if (ret == 0)
		ret = columns_of(data, &c);
	if (ret == 0)
		ret = store_run(
			s,
			"UPDATE sandboxes SET name = ?, mode = ?, runtime = ?, project_id = ?, "
			"snapshot_id = ?, cpu_millis = ?, memory_bytes = ?, updated_ms = ?, "
			"data = ?, private = ? WHERE id = ?",
			"tttttiiijjt", c.name, c.mode, c.runtime, c.project_id, c.snapshot_id,
			c.cpu_millis, c.memory_bytes, store_clock(s), data, priv, id);
	json_decref(data);
	json_decref(priv);
	return ret < 0 ? ret : 0;
}

static bool patch_ok(json_t *patch, json_t *priv_patch)
{
	return (!patch || (json_is_object(patch) && !store_json_has_any(patch, state_keys))) &&
	       (!priv_patch || json_is_object(priv_patch));
}

int store_sandbox_update(struct store *s, const char *id, json_t *patch, json_t *priv_patch,
                         json_t **out)
{
	int ret;

	if (out)
		*out = NULL;
	if (!patch_ok(patch, priv_patch))
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = store_end(s, sandbox_patch(s, id, patch, priv_patch));
	/* Read back after the commit, under the same lock: nothing changes it in between. */
	if (ret == 0 && out)
		ret = sandbox_read(s, id, out, NULL);
	store_unlock(s);
	return ret;
}

/*
 * The store refuses only moves no manager should make: the rest of the state
 * machine (what pause needs, and so on) is the manager's.
 */
static bool move_ok(const char *from, const char *to)
{
	if (!strcmp(from, "deleted"))
		return !strcmp(to, "deleted");
	if (!strcmp(from, "terminated") || !strcmp(from, "failed"))
		return !strcmp(to, from) || !strcmp(to, "deleted");
	return true;
}

static int current_status(struct store *s, const char *id, char *buf, size_t len)
{
	sqlite3_stmt *st;
	int ret;

	ret = store_prepare(s, "SELECT status FROM sandboxes WHERE id = ?", &st);
	if (ret < 0)
		return ret;
	ret = store_bind(st, "t", id);
	if (ret == 0)
		ret = store_step(s, st);
	if (ret == 1)
		snprintf(buf, len, "%s", store_col_text(st, 0));
	store_reset(st);
	return ret == 1 ? 0 : ret == 0 ? -ENOENT : ret;
}

static int transition(struct store *s, const char *id, const struct store_transition *t)
{
	const char *to = t->status;
	char from[32];
	json_t *payload;
	int64_t now;
	int ret;

	ret = current_status(s, id, from, sizeof(from));
	if (ret < 0)
		return ret;
	if (!move_ok(from, to))
		return -EINVAL;
	ret = sandbox_patch(s, id, t->patch, t->priv_patch);
	if (ret < 0 || !strcmp(from, to))
		return ret;
	now = store_clock(s);
	ret = store_run(s,
	                "UPDATE sandboxes SET status = ?, status_ms = ?, updated_ms = ?, "
	                "deleted_ms = ? WHERE id = ?",
	                "tiiit", to, now, now, !strcmp(to, "deleted") ? now : STORE_NULL, id);
	if (ret < 0)
		return ret;
	payload = t->event ? json_deep_copy(t->event) : json_object();
	if (!payload || json_object_set_new(payload, "from", json_string(from)) ||
	    json_object_set_new(payload, "to", json_string(to))) {
		json_decref(payload);
		return -ENOMEM;
	}
	ret = store_event_add(s, id, t->event_type ? t->event_type : store_event_type(from, to), to,
	                      payload, NULL);
	json_decref(payload);
	return ret;
}

int store_sandbox_transition(struct store *s, const char *id, const struct store_transition *t,
                             json_t **out)
{
	int ret;

	if (out)
		*out = NULL;
	if (!store_sandbox_status_valid(t->status) || (t->event && !json_is_object(t->event)) ||
	    !patch_ok(t->patch, t->priv_patch))
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = store_end(s, transition(s, id, t));
	/* Read back after the commit, under the same lock: nothing changes it in between. */
	if (ret == 0 && out)
		ret = sandbox_read(s, id, out, NULL);
	store_unlock(s);
	return ret;
}

int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason)
{
	struct store_transition t = {.status = status};
	int ret;

	if (reason && !(t.event = json_pack("{s:s}", "reason", reason)))
		return -ENOMEM;
	ret = store_sandbox_transition(s, id, &t, NULL);
	json_decref(t.event);
	return ret;
}

/* The WHERE clause of a filter and its parameters (all text), appended to sql. */
static int filter_where(const struct store_sandbox_filter *f, char *sql, size_t len,
                        const char **params, int *nparams)
{
	const struct {
		const char *value, *clause;
	} eq[] = {
		{f->name, " AND name = ?"},
		{f->mode, " AND mode = ?"},
		{f->project_id, " AND project_id = ?"},
		{f->snapshot_id, " AND snapshot_id = ?"},
		{f->runtime, " AND runtime = ?"},
		{f->status, " AND status = ?"},
		{f->org_id, " AND org_id = ?"},
	};
	size_t n = strlen(sql);

	if (f->status && !store_sandbox_status_valid(f->status))
		return -EINVAL;
	*nparams = 0;
	for (size_t i = 0; i < ARRAY_SIZE(eq); i++) {
		if (!eq[i].value)
			continue;
		n += (size_t)snprintf(sql + n, len - n, "%s", eq[i].clause);
		params[(*nparams)++] = eq[i].value;
	}
	/* A template's maker is huskd's own (api/huskd/sandbox/sbx_tmpl.c): never listed. */
	n += (size_t)snprintf(sql + n, len - n, " AND mode IS NOT 'template'");
	if (f->live != STORE_ANY)
		n += (size_t)snprintf(sql + n, len - n,
		                      " AND status %s ('terminated', 'failed', 'deleted')",
		                      f->live == STORE_ONLY ? "NOT IN" : "IN");
	if (!f->status && f->deleted == STORE_DELETED_HIDE)
		n += (size_t)snprintf(sql + n, len - n, " AND status != 'deleted'");
	if (!f->status && f->deleted == STORE_DELETED_ONLY)
		n += (size_t)snprintf(sql + n, len - n, " AND status = 'deleted'");
	return n < len ? 0 : -ENOMEM;
}

int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f, json_t **out)
{
	static const char *const sorts[][2] = {
		{"name", "name"},     {"created", "created_ms"}, {"updated", "updated_ms"},
		{"status", "status"}, {"mode", "mode"},          {"execution_count", "executions"},
		{NULL, NULL},
	};
	char where[512] = "";
	const char *params[7];
	struct store_page p = {
		.table = "sandboxes",
		.columns = INFO_COLUMNS,
		.where = where,
		.params = params,
		.order = store_sort_column(sorts, f->sort ? f->sort : "created"),
		.ascending = f->ascending,
		.limit = f->limit,
		.offset = f->offset,
		.key = "sandboxes",
		.row = sandbox_json,
	};
	int ret;

	*out = NULL;
	ret = filter_where(f, where, sizeof(where), params, &p.nparams);
	if (ret < 0)
		return ret;
	return store_list_page(s, &p, out);
}

static json_t *live_json(struct store *s, sqlite3_stmt *st)
{
	json_t *priv = store_col_json(s, st, 2);

	return priv ? json_pack("{s:s, s:s, s:o}", "sandboxId", store_col_text(st, 0), "status",
	                        store_col_text(st, 1), "private", priv)
	            : NULL;
}

int store_sandboxes_live(struct store *s, json_t **out)
{
	return store_rows(s,
	                  "SELECT id, status, private FROM sandboxes "
	                  "WHERE status NOT IN ('terminated', 'failed', 'deleted') ORDER BY seq",
	                  live_json, out);
}

int store_sandbox_purge(struct store *s, const char *id)
{
	int ret;

	store_lock(s);
	ret = store_run(s, "DELETE FROM sandboxes WHERE id = ?", "t", id);
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}
