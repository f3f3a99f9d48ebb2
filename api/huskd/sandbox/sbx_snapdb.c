// SPDX-License-Identifier: MIT
/* The snapshot records: list, get, tag, lineage, delete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx_int.h"
#include "sbx_pool.h"

int sbx_snap_list(struct sbx_mgr *m, const struct sbx_snap_query *q, json_t **out,
                  struct sbx_err *err)
{
	struct store_snapshot_filter f = {.public_only = q->public_only,
	                                  .sandbox_id = q->sandbox_id,
	                                  .org_id = q->org,
	                                  .sort = q->sort,
	                                  .ascending = q->ascending,
	                                  .limit = q->limit,
	                                  .offset = q->offset};

	if (store_snapshot_list(m->store, &f, out))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "sort must be one of name, created, size, files");
	return 0;
}

/*
 * The snapshot ref names among what org sees; to change it (write), it must
 * be org's own: another org's public one is read-only to it.
 */
static int snap_find(struct sbx_mgr *m, const char *org, const char *ref, bool write, json_t **info,
                     json_t **priv, struct sbx_err *err)
{
	int rc = store_snapshot_find(m->store, org, ref, info, priv);

	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc,
		                "snapshot %s not found; GET /sandbox/snapshots lists them", ref);
	if (write && org && strcmp(sbx_info_org(*info), org)) {
		json_decref(*info);
		*info = NULL;
		if (priv) {
			json_decref(*priv);
			*priv = NULL;
		}
		return sbx_fail(err, SBX_FORBIDDEN, -EPERM,
		                "snapshot %s is another org's public snapshot: it can be read and "
		                "used, not changed",
		                ref);
	}
	return 0;
}

int sbx_snap_get(struct sbx_mgr *m, const char *org, const char *ref, bool public_only,
                 json_t **out, struct sbx_err *err)
{
	int rc = snap_find(m, org, ref, false, out, NULL, err);

	if (rc == 0 && public_only && !json_is_true(json_object_get(*out, "public"))) {
		json_decref(*out);
		*out = NULL;
		return sbx_fail(err, SBX_NOT_FOUND, -ENOENT,
		                "snapshot %s not found among the public ones", ref);
	}
	return rc;
}

int sbx_snap_tag(struct sbx_mgr *m, const char *org, const char *ref, json_t *tag, json_t **out,
                 struct sbx_err *err)
{
	json_t *info = NULL, *patch;
	char id[STORE_ID_LEN];
	int rc = snap_find(m, org, ref, true, &info, NULL, err);

	if (rc)
		return rc;
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(info, "snapshotId")));
	json_decref(info);
	patch = json_pack("{sO}", "tag", tag);
	rc = store_snapshot_update(m->store, id, patch, NULL, out);
	json_decref(patch);
	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "snapshot %s not found", ref);
	return 0;
}

/*
 * Another org's public snapshot may sit on that org's private ones: the
 * lineage stops before the first the caller may not see.
 */
static void hide_ancestors(json_t *lineage, const char *org)
{
	json_t *list = json_object_get(lineage, "lineage"), *v;
	size_t i;

	json_array_foreach(list, i, v)
	{
		if (!org || !strcmp(sbx_info_org(v), org) ||
		    json_is_true(json_object_get(v, "public")))
			continue;
		while (json_array_size(list) > i)
			json_array_remove(list, i);
		json_object_set_new(lineage, "total", json_integer((json_int_t)i));
		json_object_set_new(lineage, "hiddenAncestors", json_true());
		break;
	}
}

int sbx_snap_lineage(struct sbx_mgr *m, const char *org, const char *ref, int limit, json_t **out,
                     struct sbx_err *err)
{
	json_t *info = NULL;
	int rc = snap_find(m, org, ref, false, &info, NULL, err);

	if (rc)
		return rc;
	rc = store_snapshot_lineage(
		m->store, json_string_value(json_object_get(info, "snapshotId")), limit, out);
	json_decref(info);
	if (rc)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "snapshot %s not found", ref);
	hide_ancestors(*out, org);
	return 0;
}

/*
 * A deleted snapshot's memory goes at once, its key first: no sandbox starts
 * from a deleted snapshot, and only its disk may still be built on. Its disk
 * keys go from its record too: the sandboxes and snapshots built on its disk
 * hold their own copies, and it goes with the last of them.
 */
static int forget_data(struct sbx_mgr *m, const char *id, const char *dir, json_t *priv)
{
	char path[4200];
	json_t *patch;
	int rc;

	if (!json_object_get(priv, "memory") && !json_object_get(priv, "memKey") &&
	    !json_object_get(priv, "diskKeys"))
		return 0;
	patch = json_pack("{snsnsn}", "memory", "memKey", "diskKeys");

	rc = patch ? store_snapshot_update(m->store, id, NULL, patch, NULL) : -ENOMEM;
	json_decref(patch);
	for (const char *const *f = (const char *const[]){"memory.snap", "memory.raw", NULL};
	     !rc && dir && *f; f++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *f);
		unlink(path);
	}
	if (!rc && (json_object_get(priv, "memKey") || json_object_get(priv, "diskKeys")) &&
	    store_scrub(m->store))
		log_warn(NULL,
		         "snapshot %s: its deleted key may linger in the store's log until "
		         "the next scrub",
		         id);
	return rc;
}

int sbx_snap_delete(struct sbx_mgr *m, const char *org, const char *ref, json_t **out,
                    struct sbx_err *err)
{
	json_t *info = NULL, *priv = NULL, *users;
	const char *dir, *from;
	char id[STORE_ID_LEN];
	bool kept;
	int rc;

	*out = NULL;
	rc = snap_find(m, org, ref, true, &info, &priv, err);
	if (rc)
		return rc;
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(info, "snapshotId")));
	dir = json_string_value(json_object_get(priv, "dir"));
	rc = forget_data(m, id, dir, priv);
	if (!rc)
		rc = store_snapshot_delete(m->store, id);
	if (!rc)
		sbx_pool_forget_snap(m, id);
	if (!rc)
		snap_gc(m);
	from = json_string_value(json_object_get(info, "sandboxId"));
	kept = !rc && dir && access(dir, F_OK) == 0;
	users = json_array();
	for (struct sandbox *sb = m->sandboxes; kept && sb; sb = sb->next)
		if (sb->state != SBX_STOPPING && sb->state != SBX_GONE && !sb->pool.on &&
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
