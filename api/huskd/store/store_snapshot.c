// SPDX-License-Identifier: MIT
/*
 * Snapshots (API.md §5.8): file systems saved from a sandbox, found by id,
 * name, name:tag or tag, chained by parentSnapshotId. Deleting one only
 * marks it, so lineage can still show it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/* Kept in columns only; snapshotId and createdAt in an update are refused. */
static const char *const state_keys[] = {"snapshotId", "createdAt", NULL};

/* The columns snapshot_json reads, then private. */
#define SNAP_COLUMNS "id, created_ms, deleted_ms, data"

/* A lineage longer than this is a loop in corrupt data, not a history. */
#define MAX_LINEAGE 10000

struct columns {
	const char *name, *tag, *sandbox_id, *parent_id, *runtime_id, *org_id;
	int64_t public, size_bytes, file_count;
};

static int columns_of(json_t *info, struct columns *c)
{
	json_t *size = json_object_get(info, "sizeBytes");
	json_t *files = json_object_get(info, "fileCount");
	json_t *pub = json_object_get(info, "public");

	c->name = store_json_str(info, "name");
	c->tag = store_json_str(info, "tag");
	c->sandbox_id = store_json_str(info, "sandboxId");
	c->parent_id = store_json_str(info, "parentSnapshotId");
	c->runtime_id = store_json_str(info, "runtimeId");
	c->org_id = store_json_str(json_object_get(info, "org"), "id");
	if (!c->org_id)
		c->org_id = STORE_DEFAULT_ORG;
	c->public = json_is_true(pub);
	c->size_bytes = json_integer_value(size);
	c->file_count = json_integer_value(files);
	if (!c->name || !*c->name || !json_is_integer(size) || !json_is_integer(files) ||
	    c->size_bytes < 0 || c->file_count < 0 || (pub && !json_is_boolean(pub)))
		return -EINVAL;
	return 0;
}

/* SnapshotInfo from a row of SNAP_COLUMNS; deleted ones say so. */
static json_t *snapshot_json(struct store *s, sqlite3_stmt *st)
{
	json_t *data = store_col_json(s, st, 3);
	json_t *info;

	if (!data)
		return NULL;
	info = json_pack("{s:s}", "snapshotId", store_col_text(st, 0));
	if (!info || json_object_update(info, data) ||
	    store_json_set_time(info, "createdAt", sqlite3_column_int64(st, 1)) < 0 ||
	    (sqlite3_column_type(st, 2) != SQLITE_NULL &&
	     json_object_set_new(info, "deleted", json_true()))) {
		json_decref(info);
		info = NULL;
	}
	json_decref(data);
	return info;
}

/* The first row sql returns (parameters a and b), or -ENOENT. */
static int snapshot_query(struct store *s, const char *sql, const char *a, const char *b,
                          json_t **info, json_t **priv)
{
	return store_read_row(s, sql, a, b, snapshot_json, 4, info, priv);
}

static const char sql_by_id[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots "
				"WHERE id = ? AND deleted_ms IS NULL";

int store_snapshot_get(struct store *s, const char *id, json_t **info, json_t **priv)
{
	int ret;

	store_lock(s);
	ret = snapshot_query(s, sql_by_id, id, NULL, info, priv);
	store_unlock(s);
	return ret;
}

/*
 * What an org sees: its own snapshots and every public one, its own first.
 * ?1 is the org, ?2 and ?3 what is looked for.
 */
#define VISIBLE                                                    \
	" AND deleted_ms IS NULL AND (org_id = ?1 OR public = 1) " \
	"ORDER BY org_id = ?1 DESC, created_ms DESC, seq DESC LIMIT 1"

int store_snapshot_find(struct store *s, const char *org, const char *ref, json_t **info,
                        json_t **priv)
{
	static const char by_id[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots "
				    "WHERE id = ?2" VISIBLE;
	static const char by_name_tag[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots "
					  "WHERE name = ?2 AND tag = ?3" VISIBLE;
	static const char by_name[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots "
				      "WHERE name = ?2" VISIBLE;
	static const char by_tag[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots "
				     "WHERE tag = ?2" VISIBLE;
	const char *colon, *slash;
	char name[256];
	int ret;

	/* "@org/name:tag" (a fullName): the name and tag say which. */
	if (ref[0] == '@' && (slash = strchr(ref, '/')))
		ref = slash + 1;
	if (!org)
		org = ""; /* no org's own: public ones only */
	store_lock(s);
	ret = store_read_row3(s, by_id, org, ref, NULL, snapshot_json, 4, info, priv);
	colon = strrchr(ref, ':');
	if (ret == -ENOENT && colon && (size_t)(colon - ref) < sizeof(name)) {
		snprintf(name, sizeof(name), "%.*s", (int)(colon - ref), ref);
		ret = store_read_row3(s, by_name_tag, org, name, colon + 1, snapshot_json, 4, info,
		                      priv);
	}
	if (ret == -ENOENT && !colon)
		ret = store_read_row3(s, by_name, org, ref, NULL, snapshot_json, 4, info, priv);
	if (ret == -ENOENT && !colon)
		ret = store_read_row3(s, by_tag, org, ref, NULL, snapshot_json, 4, info, priv);
	store_unlock(s);
	return ret;
}

/* A tag names one snapshot of a name: take it from whichever had it. */
static int take_tag(struct store *s, const char *id, const struct columns *c)
{
	if (!c->tag)
		return 0;
	return store_run(s,
	                 "UPDATE snapshots SET tag = NULL, data = json_remove(data, '$.tag') "
	                 "WHERE name = ? AND tag = ? AND id != ? AND org_id = ? "
	                 "AND deleted_ms IS NULL",
	                 "tttt", c->name, c->tag, id, c->org_id);
}

int store_snapshot_insert(struct store *s, json_t *info, json_t *priv)
{
	const char *id = store_json_str(info, "snapshotId");
	struct columns c;
	json_t *data;
	int ret;

	if (!id || !*id || strlen(id) >= STORE_ID_LEN || (priv && !json_is_object(priv)) ||
	    columns_of(info, &c) < 0)
		return -EINVAL;
	data = store_json_without(info, state_keys);
	if (!data)
		return -ENOMEM;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = take_tag(s, id, &c);
	if (ret >= 0)
		ret = store_run(s,
		                "INSERT INTO snapshots (id, name, tag, sandbox_id, parent_id, "
		                "runtime_id, public, size_bytes, file_count, created_ms, data, "
		                "private, org_id) "
		                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, '{}'), ?)",
		                "ttttttiiiijjt", id, c.name, c.tag, c.sandbox_id, c.parent_id,
		                c.runtime_id, c.public, c.size_bytes, c.file_count, store_clock(s),
		                data, priv, c.org_id);
	ret = store_end(s, ret);
	store_unlock(s);
	json_decref(data);
	return ret < 0 ? ret : 0;
}

static int snapshot_patch(struct store *s, const char *id, json_t *patch, json_t *priv_patch)
{
	json_t *data = NULL, *priv = NULL;
	struct columns c;
	int ret;

	ret = store_read_objects(s,
	                         "SELECT data, private FROM snapshots "
	                         "WHERE id = ? AND deleted_ms IS NULL",
	                         id, &data, &priv);
	if (ret == 0 && patch)
		ret = store_json_patch(data, patch);
	if (ret == 0 && priv_patch)
		ret = store_json_patch(priv, priv_patch);
	if (ret == 0)
		ret = columns_of(data, &c);
	if (ret == 0)
		ret = take_tag(s, id, &c);
	if (ret >= 0)
		ret = store_run(s,
		                "UPDATE snapshots SET name = ?, tag = ?, sandbox_id = ?, "
		                "parent_id = ?, runtime_id = ?, public = ?, size_bytes = ?, "
		                "file_count = ?, data = ?, private = ? WHERE id = ?",
		                "tttttiiijjt", c.name, c.tag, c.sandbox_id, c.parent_id,
		                c.runtime_id, c.public, c.size_bytes, c.file_count, data, priv, id);
	json_decref(data);
	json_decref(priv);
	return ret < 0 ? ret : 0;
}

int store_snapshot_update(struct store *s, const char *id, json_t *patch, json_t *priv_patch,
                          json_t **out)
{
	int ret;

	if (out)
		*out = NULL;
	if ((patch && (!json_is_object(patch) || store_json_has_any(patch, state_keys))) ||
	    (priv_patch && !json_is_object(priv_patch)))
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = store_end(s, snapshot_patch(s, id, patch, priv_patch));
	/* Read back after the commit, under the same lock: nothing changes it in between. */
	if (ret == 0 && out)
		ret = snapshot_query(s, sql_by_id, id, NULL, out, NULL);
	store_unlock(s);
	return ret;
}

int store_snapshot_delete(struct store *s, const char *id)
{
	int ret;

	store_lock(s);
	ret = store_run(s,
	                "UPDATE snapshots SET deleted_ms = ? WHERE id = ? AND deleted_ms IS NULL",
	                "it", store_clock(s), id);
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}

int store_snapshot_list(struct store *s, const struct store_snapshot_filter *f, json_t **out)
{
	static const char *const sorts[][2] = {
		{"name", "name"},       {"created", "created_ms"},
		{"size", "size_bytes"}, {"files", "file_count"},
		{NULL, NULL},
	};
	char where[160];
	const char *params[2];
	int n = 0;
	struct store_page p = {
		.table = "snapshots",
		.columns = SNAP_COLUMNS,
		.where = where,
		.params = params,
		.order = store_sort_column(sorts, f->sort ? f->sort : "created"),
		.ascending = f->ascending,
		.limit = f->limit,
		.offset = f->offset,
		.key = "snapshots",
		.row = snapshot_json,
	};

	if (f->sandbox_id)
		params[n++] = f->sandbox_id;
	if (f->org_id && !f->public_only)
		params[n++] = f->org_id;
	p.nparams = n;
	snprintf(where, sizeof(where), " AND deleted_ms IS NULL%s%s%s",
	         f->sandbox_id ? " AND sandbox_id = ?" : "",
	         f->org_id && !f->public_only ? " AND org_id = ?" : "",
	         f->public_only ? " AND public = 1" : "");
	return store_list_page(s, &p, out);
}

/* Appends the lineage of id to list (up to limit entries) and counts all of it in *total. */
static int lineage(struct store *s, const char *id, int limit, json_t *list, int *total)
{
	static const char any[] = "SELECT " SNAP_COLUMNS ", private FROM snapshots WHERE id = ?";
	char next[STORE_ID_LEN];
	int n = 0, ret;

	snprintf(next, sizeof(next), "%s", id);
	while (next[0]) {
		const char *parent;
		json_t *info;

		if (n == MAX_LINEAGE) {
			store_logf(s, "snapshot %s: lineage longer than %d, a loop?", id,
			           MAX_LINEAGE);
			return -EIO;
		}
		ret = snapshot_query(s, any, next, NULL, &info, NULL);
		if (ret == -ENOENT && n > 0)
			break; /* a parent purged by hand: the chain ends there */
		if (ret < 0)
			return ret;
		n++;
		parent = store_json_str(info, "parentSnapshotId");
		snprintf(next, sizeof(next), "%s", parent ? parent : "");
		if (!json_object_get(info, "public") &&
		    json_object_set_new(info, "public", json_false())) {
			json_decref(info);
			return -ENOMEM;
		}
		if (limit > 0 && n > limit) {
			json_decref(info);
			continue;
		}
		if (json_array_append_new(list, info))
			return -ENOMEM;
	}
	*total = n;
	return 0;
}

int store_snapshot_lineage(struct store *s, const char *id, int limit, json_t **out)
{
	json_t *list = json_array();
	int total = 0, ret;

	*out = NULL;
	if (!list)
		return -ENOMEM;
	store_lock(s);
	/* The start must exist and not be deleted; its ancestors may be deleted. */
	ret = snapshot_query(s, sql_by_id, id, NULL, NULL, NULL);
	if (ret == 0)
		ret = lineage(s, id, limit, list, &total);
	store_unlock(s);
	if (ret == 0)
		*out = json_pack("{s:O, s:i}", "lineage", list, "total", total);
	json_decref(list);
	return ret < 0 ? ret : *out ? 0 : -ENOMEM;
}

static json_t *unused_json(struct store *s, sqlite3_stmt *st)
{
	json_t *priv = store_col_json(s, st, 1);

	return priv ? json_pack("{s:s, s:o}", "id", store_col_text(st, 0), "private", priv) : NULL;
}

/*
 * A deleted snapshot's files stay while something is built on them: a live
 * sandbox started from it or that it was taken from (whose layer may sit on
 * it), or a child snapshot whose files are still kept.
 */
int store_snapshot_unused(struct store *s, json_t **out)
{
	static const char sql[] =
		"SELECT s.id, s.private FROM snapshots s WHERE s.deleted_ms IS NOT NULL "
		"AND json_extract(s.private, '$.purged') IS NULL "
		"AND NOT EXISTS (SELECT 1 FROM sandboxes b WHERE (b.snapshot_id = s.id OR "
		"  b.id = s.sandbox_id) AND b.status NOT IN ('terminated', 'failed', 'deleted')) "
		"AND NOT EXISTS (SELECT 1 FROM snapshots c WHERE c.parent_id = s.id "
		"  AND json_extract(c.private, '$.purged') IS NULL)";

	return store_rows(s, sql, unused_json, out);
}

int store_snapshot_purge(struct store *s, const char *id)
{
	int ret;

	store_lock(s);
	ret = store_run(s,
	                "UPDATE snapshots SET private = json_set(private, '$.purged', 1) "
	                "WHERE id = ? AND deleted_ms IS NOT NULL",
	                "t", id);
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}
