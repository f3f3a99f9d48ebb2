// SPDX-License-Identifier: MIT
/*
 * Runtimes (API.md §5.6), loaded from the catalog images/runtimes/build.sh
 * writes. The catalog is the truth: loading it makes the table match it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define RT_COLUMNS "id, name, data"

static json_t *runtime_json(struct store *s, sqlite3_stmt *st)
{
	json_t *data = store_col_json(s, st, 2);
	json_t *rt;

	if (!data)
		return NULL;
	rt = json_pack("{s:s, s:s}", "id", store_col_text(st, 0), "name", store_col_text(st, 1));
	if (!rt || json_object_update_missing(rt, data)) {
		json_decref(rt);
		rt = NULL;
	}
	json_decref(data);
	return rt;
}

/* The private object of an entry: its "image", with "path" resolved against dir. */
static json_t *image_of(json_t *entry, const char *dir)
{
	json_t *image = json_object_get(entry, "image");
	const char *file = store_json_str(image, "file");
	json_t *priv = json_is_object(image) ? json_deep_copy(image) : json_object();
	char path[PATH_MAX];

	if (priv && file) {
		if (file[0] == '/' || !dir)
			snprintf(path, sizeof(path), "%s", file);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, file);
		if (json_object_set_new(priv, "path", json_string(path))) {
			json_decref(priv);
			priv = NULL;
		}
	}
	return priv;
}

static int upsert_one(struct store *s, json_t *entry, const char *dir, int64_t now)
{
	static const char *const moved[] = {"id", "name", "image", NULL};
	json_t *data = store_json_without(entry, moved);
	json_t *priv = image_of(entry, dir);
	int ret = -ENOMEM;

	if (data && priv)
		ret = store_run(
			s,
			"INSERT INTO runtimes (id, name, created_ms, updated_ms, data, private) "
			"VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
			"name = excluded.name, updated_ms = excluded.updated_ms, "
			"data = excluded.data, private = excluded.private",
			"ttiijj", store_json_str(entry, "id"), store_json_str(entry, "name"), now,
			now, data, priv);
	json_decref(data);
	json_decref(priv);
	return ret;
}

/* The ids of a catalog's entries, or NULL (with err) if one is malformed. */
static json_t *catalog_ids(json_t *catalog, char *err, size_t errlen)
{
	json_t *list = json_object_get(catalog, "runtimes");
	json_t *ids, *entry;
	size_t i;

	if (!json_is_array(list)) {
		snprintf(err, errlen, "catalog: no \"runtimes\" array");
		return NULL;
	}
	ids = json_array();
	json_array_foreach(list, i, entry)
	{
		const char *id = store_json_str(entry, "id");
		const char *name = store_json_str(entry, "name");

		if (!id || !*id || strlen(id) >= STORE_ID_LEN || !name || !*name) {
			snprintf(err, errlen, "catalog: runtime %zu has no string id and name", i);
			json_decref(ids);
			return NULL;
		}
		if (json_array_append_new(ids, json_string(id))) {
			snprintf(err, errlen, "out of memory");
			json_decref(ids);
			return NULL;
		}
	}
	return ids;
}

int store_runtimes_upsert(struct store *s, json_t *catalog, const char *dir, char *err,
                          size_t errlen)
{
	json_t *ids = catalog_ids(catalog, err, errlen);
	json_t *entry;
	int64_t now;
	size_t i;
	int ret;

	if (!ids)
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret == 0)
		ret = store_run(
			s,
			"DELETE FROM runtimes WHERE id NOT IN (SELECT value FROM json_each(?)) AND "
			"coalesce(json_extract(private, '$.imported'), 0) = 0",
			"j", ids);
	now = store_clock(s);
	json_array_foreach(json_object_get(catalog, "runtimes"), i, entry)
	{
		if (ret < 0)
			break;
		ret = upsert_one(s, entry, dir, now);
		if (ret == -EEXIST)
			snprintf(err, errlen, "catalog: runtime name %s is used twice",
			         store_json_str(entry, "name"));
	}
	ret = store_end(s, ret);
	store_unlock(s);
	if (ret < 0 && ret != -EEXIST)
		snprintf(err, errlen, "cannot store the runtimes: %s", strerror(-ret));
	json_decref(ids);
	return ret < 0 ? ret : 0;
}

int store_runtimes_load(struct store *s, const char *catalog_path, char *err, size_t errlen)
{
	char dir[PATH_MAX], *slash;
	json_error_t e;
	json_t *catalog;
	int ret;

	catalog = json_load_file(catalog_path, 0, &e);
	if (!catalog) {
		snprintf(err, errlen, "%s:%d: %s", catalog_path, e.line, e.text);
		return -EINVAL;
	}
	/* Image paths are kept absolute: huskd's working directory is nobody's business. */
	if (!realpath(catalog_path, dir)) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", catalog_path, strerror(-ret));
		json_decref(catalog);
		return ret;
	}
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	ret = store_runtimes_upsert(s, catalog, dir, err, errlen);
	json_decref(catalog);
	return ret;
}

int store_runtime_get(struct store *s, const char *name_or_id, json_t **rt, json_t **priv)
{
	int ret;

	store_lock(s);
	ret = store_read_row(s,
	                     "SELECT " RT_COLUMNS
	                     ", private FROM runtimes WHERE id = ?1 OR name = ?1 "
	                     "ORDER BY id = ?1 DESC LIMIT 1",
	                     name_or_id, NULL, runtime_json, 3, rt, priv);
	store_unlock(s);
	return ret;
}

int store_runtime_list(struct store *s, const char *sort, bool descending, int limit, int offset,
                       json_t **out)
{
	static const char *const sorts[][2] = {
		{"name", "name"},
		{"created", "created_ms"},
		{NULL, NULL},
	};
	struct store_page p = {
		.table = "runtimes",
		.columns = RT_COLUMNS,
		.where = "",
		.order = store_sort_column(sorts, sort ? sort : "name"),
		.ascending = !descending,
		.limit = limit,
		.offset = offset,
		.key = "runtimes",
		.row = runtime_json,
	};

	return store_list_page(s, &p, out);
}

int store_runtime_add(struct store *s, json_t *entry, json_t *priv)
{
	static const char *const moved[] = {"id", "name", NULL};
	json_t *data = store_json_without(entry, moved);
	int64_t now;
	int ret = -ENOMEM;

	store_lock(s);
	now = store_clock(s);
	if (data)
		ret = store_run(
			s,
			"INSERT INTO runtimes (id, name, created_ms, updated_ms, data, private) "
			"VALUES (?, ?, ?, ?, ?, ?)",
			"ttiijj", store_json_str(entry, "id"), store_json_str(entry, "name"), now,
			now, data, priv);
	store_unlock(s);
	json_decref(data);
	return ret < 0 ? ret : 0;
}

int store_runtime_delete(struct store *s, const char *id)
{
	int ret;

	store_lock(s);
	ret = store_run(s, "DELETE FROM runtimes WHERE id = ?", "t", id);
	store_unlock(s);
	return ret < 0 ? ret : ret ? 0 : -ENOENT;
}

static int count_of(struct store *s, const char *sql, const char *a, const char *b, int64_t *n)
{
	sqlite3_stmt *st;
	int ret = store_prepare(s, sql, &st);

	if (ret)
		return ret;
	ret = store_bind(st, "tt", a, b);
	if (!ret)
		ret = store_step(s, st);
	*n = ret == 1 ? sqlite3_column_int64(st, 0) : 0;
	store_reset(st);
	return ret < 0 ? ret : 0;
}

int store_runtime_users(struct store *s, const char *id, const char *name, int64_t *sandboxes,
                        int64_t *snapshots)
{
	int ret;

	store_lock(s);
	/* A template's maker is huskd's, not a user's: it holds nothing up (sbx_tmpl_make.c). */
	ret = count_of(s,
	               "SELECT count(*) FROM sandboxes WHERE (runtime = ? OR runtime = ?) AND "
	               "deleted_ms IS NULL AND mode IS NOT 'template'",
	               id, name, sandboxes);
	if (!ret)
		ret = count_of(s, "SELECT count(*) FROM snapshots WHERE runtime_id IN (?, ?)", id,
		               name, snapshots);
	store_unlock(s);
	return ret;
}
