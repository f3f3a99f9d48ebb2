// SPDX-License-Identifier: MIT
/* The records the routes read: sandboxes, their events, executions, runtimes, usage. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_int.h"

/* What the record cannot hold: a running VMM's egress count so far. */
static void live_fields(struct sbx_mgr *m, json_t *info)
{
	struct sandbox *sb = sbx_find(m, json_string_value(json_object_get(info, "sandboxId")));

	if (sb && sb->net)
		json_object_set_new(info, "networkEgressBytes",
		                    json_integer((json_int_t)sbx_net_egress(sb)));
	if (sb)
		sbx_meter_fields(sb, info);
}

int sbx_get(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
{
	if (store_sandbox_get(m->store, id, out, NULL) || sbx_info_hidden(*out)) {
		json_decref(*out);
		*out = NULL;
		return sbx_fail(err, SBX_NO_SANDBOX, -ENOENT, "sandbox %s not found", id);
	}
	live_fields(m, *out);
	return 0;
}

int sbx_status(struct sbx_mgr *m, const char *id, json_t **out)
{
	json_t *info = NULL;
	int rc = store_sandbox_get(m->store, id, &info, NULL);

	if (!rc && sbx_info_hidden(info))
		rc = -ENOENT;
	if (rc) {
		json_decref(info);
		return rc;
	}
	*out = json_pack("{sssO}", "sandboxId", id, "status", json_object_get(info, "status"));
	if (*out && json_object_get(info, "exitCode"))
		json_object_set(*out, "exitCode", json_object_get(info, "exitCode"));
	json_decref(info);
	return *out ? 0 : -ENOMEM;
}

/* A live sandbox's egress so far, from counts (every slot's, or NULL: asked alone). */
static uint64_t egress_of(struct sandbox *sb, const uint64_t *counts)
{
	if (sb->net_slot < 0)
		return sb->egress_bytes;
	return counts ? sb->egress_bytes + counts[sb->net_slot] : sbx_net_egress(sb);
}

int sbx_list(struct sbx_mgr *m, const struct sbx_list_query *q, json_t **out, struct sbx_err *err)
{
	struct store_sandbox_filter f = {.name = q->name,
	                                 .mode = q->mode,
	                                 .project_id = q->project_id,
	                                 .snapshot_id = q->snapshot_id,
	                                 .org_id = q->org,
	                                 .status = q->status,
	                                 .sort = q->sort,
	                                 .ascending = q->ascending,
	                                 .limit = q->limit,
	                                 .offset = q->offset};
	uint64_t *counts = NULL;
	bool asked = false;
	struct sandbox *sb;
	json_t *v;
	size_t i;

	f.live = q->live > 0 ? STORE_ONLY : q->live < 0 ? STORE_EXCLUDE : STORE_ANY;
	f.deleted = q->deleted == 2   ? STORE_DELETED_ONLY
	            : q->deleted == 1 ? STORE_DELETED_INCLUDE
	                              : STORE_DELETED_HIDE;
	if (store_sandbox_list(m->store, &f, out))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "bad list query (sort or status)");
	json_array_foreach(json_object_get(*out, "sandboxes"), i, v)
	{
		sb = sbx_find(m, json_string_value(json_object_get(v, "sandboxId")));
		if (sb)
			sbx_meter_fields(sb, v);
		if (!sb || !sb->net)
			continue;
		/* Every counter in one query, at the first sandbox that needs one. */
		if (sb->net_slot >= 0 && !asked) {
			counts = sbx_net_egress_all(m);
			asked = true;
		}
		json_object_set_new(v, "networkEgressBytes",
		                    json_integer((json_int_t)egress_of(sb, counts)));
	}
	free(counts);
	return 0;
}

int sbx_events(struct sbx_mgr *m, const char *id, int limit, bool descending, json_t **out)
{
	return store_event_list(m->store, id, limit, descending, out);
}

int sbx_runtimes(struct sbx_mgr *m, const char *sort, bool descending, int limit, int offset,
                 json_t **out)
{
	return store_runtime_list(m->store, sort, descending, limit, offset, out);
}

int sbx_usage(struct sbx_mgr *m, const char *org, int64_t from_ms, int64_t to_ms, json_t **out)
{
	struct store_sandbox_filter f = {.org_id = org, .live = STORE_ONLY};
	json_t *usage = NULL, *live = NULL, *counts, *v;
	size_t i;

	/* The records' consumption figures are as of now, not as of the last tick. */
	sbx_meter_flush(m);
	if (store_usage(m->store, org, from_ms, to_ms, &usage) ||
	    store_sandbox_list(m->store, &f, &live)) {
		json_decref(usage);
		return -EIO;
	}
	counts = json_pack("{s:i, s:i, s:i, s:i, s:i}", "totalActive",
	                   (int)json_array_size(json_object_get(live, "sandboxes")), "running", 0,
	                   "idle", 0, "creating", 0, "paused", 0);
	json_array_foreach(json_object_get(live, "sandboxes"), i, v)
	{
		const char *st = json_string_value(json_object_get(v, "status"));
		json_t *n = st && counts ? json_object_get(counts, st) : NULL;

		if (n)
			json_integer_set(n, json_integer_value(n) + 1);
	}
	json_decref(live);
	if (!counts || json_object_set_new(usage, "live", counts)) {
		json_decref(usage);
		return -ENOMEM;
	}
	*out = usage;
	return 0;
}

int sbx_execution_get(struct sbx_mgr *m, const char *exec_id, json_t **out, bool *terminal)
{
	const char *st;
	int rc = store_execution_get(m->store, exec_id, out, NULL);

	if (rc)
		return rc;
	st = json_string_value(json_object_get(*out, "status"));
	*terminal = st && (!strcmp(st, "completed") || !strcmp(st, "failed") ||
	                   !strcmp(st, "timeout") || !strcmp(st, "cancelled"));
	return 0;
}

int sbx_executions(struct sbx_mgr *m, const char *id, int limit, json_t **out)
{
	return store_execution_list(m->store, id, limit, out);
}
