// SPDX-License-Identifier: MIT
/*
 * Sandbox events (API.md §5.5). Status changes write theirs from
 * store_sandbox.c, in the transaction of the change; events with a status
 * are also the history store_usage.c reads.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

const char *store_event_type(const char *from, const char *to)
{
	static const char *const by_status[][2] = {
		{"creating", "lifecycle:creating"},
		{"paused", "pause"},
		{"suspended", "lifecycle:suspended"},
		{"stopping", "lifecycle:stopping"},
		{"terminated", "lifecycle:terminated"},
		{"failed", "lifecycle:failed"},
		{"deleted", "destroy"},
		{NULL, NULL},
	};
	const char *type;

	if (!from)
		return "create";
	if (!strcmp(to, "idle") || !strcmp(to, "running")) {
		if (!strcmp(from, "creating"))
			return "lifecycle:started";
		if (!strcmp(from, "paused") || !strcmp(from, "suspended"))
			return "resume";
		return !strcmp(to, "idle") ? "lifecycle:idle" : "lifecycle:running";
	}
	type = store_sort_column(by_status, to);
	return type ? type : "lifecycle:changed";
}

int store_event_add(struct store *s, const char *sandbox_id, const char *type, const char *status,
                    json_t *payload, char out_id[STORE_ID_LEN])
{
	char id[STORE_ID_LEN];
	json_t *empty = NULL;
	int ret;

	ret = store_new_id(STORE_PFX_EVENT, id);
	if (ret < 0)
		return ret;
	if (!payload)
		payload = empty = json_object();
	ret = store_run(s,
	                "INSERT INTO events (id, sandbox_id, type, status, created_ms, data) "
	                "VALUES (?, ?, ?, ?, ?, ?)",
	                "ttttij", id, sandbox_id, type, status, store_clock(s), payload);
	json_decref(empty);
	if (ret < 0)
		return ret;
	if (out_id)
		memcpy(out_id, id, STORE_ID_LEN);
	return 0;
}

int store_event_append(struct store *s, const char *sandbox_id, const char *type, json_t *payload,
                       char out_id[STORE_ID_LEN])
{
	int ret;

	if (!sandbox_id || !type || !*type || (payload && !json_is_object(payload)))
		return -EINVAL;
	store_lock(s);
	ret = store_event_add(s, sandbox_id, type, NULL, payload, out_id);
	store_unlock(s);
	return ret;
}

static json_t *event_json(struct store *s, sqlite3_stmt *st)
{
	json_t *payload = store_col_json(s, st, 4);
	json_t *ev;

	if (!payload)
		return NULL;
	ev = json_pack("{s:s, s:s, s:s, s:o}", "eventId", store_col_text(st, 0), "sandboxId",
	               store_col_text(st, 1), "type", store_col_text(st, 2), "event", payload);
	if (ev && store_json_set_time(ev, "createdAt", sqlite3_column_int64(st, 3)) < 0) {
		json_decref(ev);
		return NULL;
	}
	return ev;
}

int store_event_list(struct store *s, const char *sandbox_id, int limit, bool descending,
                     json_t **out)
{
	static const char asc[] = "SELECT id, sandbox_id, type, created_ms, data FROM events "
				  "WHERE sandbox_id = ? ORDER BY seq LIMIT ?";
	static const char desc[] = "SELECT id, sandbox_id, type, created_ms, data FROM events "
				   "WHERE sandbox_id = ? ORDER BY seq DESC LIMIT ?";

	return store_list_rows(s, descending ? desc : asc, sandbox_id, limit, event_json, "events",
	                       out);
}
