// SPDX-License-Identifier: MIT
/* The snapshot records: list, get, tag, lineage, delete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx_int.h"

int sbx_snap_list(struct sbx_mgr *m, const struct sbx_snap_query *q, json_t **out,
                  struct sbx_err *err)
{
	struct store_snapshot_filter f = {.public_only = q->public_only,
	                                  .sandbox_id = q->sandbox_id,
	                                  .sort = q->sort,
	                                  .ascending = q->ascending,
	                                  .limit = q->limit,
	                                  .offset = q->offset};

	if (store_snapshot_list(m->store, &f, out))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "sort must be one of name, created, size, files");
	return 0;
}

int sbx_snap_get(struct sbx_mgr *m, const char *ref, bool public_only, json_t **out,
                 struct sbx_err *err)
{
	if (store_snapshot_find(m->store, ref, out, NULL) ||
	    (public_only && !json_is_true(json_object_get(*out, "public")))) {
		json_decref(*out);
		*out = NULL;
		return sbx_fail(err, SBX_NOT_FOUND, -ENOENT,
		                "snapshot %s not found; GET /sandbox/snapshots lists them", ref);
	}
	return 0;
}

int sbx_snap_tag(struct sbx_mgr *m, const char *ref, json_t *tag, json_t **out, struct sbx_err *err)
{
	json_t *info = NULL, *patch = json_pack("{sO}", "tag", tag);
	char id[STORE_ID_LEN];
	int rc = store_snapshot_find(m->store, ref, &info, NULL);

	if (!rc) {
		snprintf(id, sizeof(id), "%s",
		         json_string_value(json_object_get(info, "snapshotId")));
		rc = store_snapshot_update(m->store, id, patch, NULL, out);
	}
	json_decref(info);
	json_decref(patch);
	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "snapshot %s not found", ref);
	return 0;
}

int sbx_snap_lineage(struct sbx_mgr *m, const char *ref, int limit, json_t **out,
                     struct sbx_err *err)
{
	json_t *info = NULL;
	int rc = store_snapshot_find(m->store, ref, &info, NULL);

	if (!rc)
		rc = store_snapshot_lineage(m->store,
		                            json_string_value(json_object_get(info, "snapshotId")),
		                            limit, out);
	json_decref(info);
	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "snapshot %s not found", ref);
	return 0;
}

int sbx_snap_delete(struct sbx_mgr *m, const char *ref, json_t **out, struct sbx_err *err)
{
	json_t *info = NULL, *priv = NULL, *users;
	const char *dir, *from;
	char id[STORE_ID_LEN];
	bool kept;
	int rc;

	*out = NULL;
	rc = store_snapshot_find(m->store, ref, &info, &priv);
	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "snapshot %s not found", ref);
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(info, "snapshotId")));
	rc = store_snapshot_delete(m->store, id);
	if (!rc)
		snap_gc(m);
	dir = json_string_value(json_object_get(priv, "dir"));
	from = json_string_value(json_object_get(info, "sandboxId"));
	kept = !rc && dir && access(dir, F_OK) == 0;
	users = json_array();
	for (struct sandbox *sb = m->sandboxes; kept && sb; sb = sb->next)
		if (sb->state != SBX_STOPPING && sb->state != SBX_GONE &&
		    (!strcmp(sb->base_snap, id) || (from && !strcmp(sb->id, from))))
			json_array_append_new(users, json_string(sb->id));
	if (!rc)
		*out = json_pack("{sssbsbsoss}", "snapshotId", id, "deleted", 1, "filesKept", kept,
		                 "usedBy", users, "message",
		                 kept ? "deleted; its files are kept while sandboxes or snapshots "
		                        "built on it exist, and go with the last of them"
		                      : "deleted; its files are removed");
	else
		json_decref(users);
	json_decref(info);
	json_decref(priv);
	if (rc)
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot delete snapshot %s: %s", ref,
		                strerror(-rc));
	return 0;
}
