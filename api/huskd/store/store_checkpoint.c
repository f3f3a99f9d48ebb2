// SPDX-License-Identifier: MIT
/*
 * Disk checkpoints (API.md §5.7): per sandbox, names unique within it, found
 * by id or by name (the CLI restores "by checkpoint ID or name").
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

/* Every field of a Checkpoint is a column; data keeps anything else the caller adds. */
static const char *const state_keys[] = {"id", "name", "parent", "createdAt", NULL};

#define CKPT_COLUMNS "id, name, parent, created_ms, data"

/* ?1 the sandbox, ?2 an id or a name; an id match wins over a name match. */
#define CKPT_MATCH "sandbox_id = ?1 AND (id = ?2 OR name = ?2) ORDER BY id = ?2 DESC LIMIT 1"

static json_t *checkpoint_json(struct store *s, sqlite3_stmt *st)
{
	json_t *data = store_col_json(s, st, 4);
	json_t *c;

	if (!data)
		return NULL;
	c = json_pack("{s:s, s:s}", "id", store_col_text(st, 0), "name", store_col_text(st, 1));
	if (!c || store_json_set_time(c, "createdAt", sqlite3_column_int64(st, 3)) < 0 ||
	    json_object_set_new(c, "parent", json_string(store_col_text(st, 2))) ||
	    json_object_update_missing(c, data)) {
		json_decref(c);
		c = NULL;
	}
	json_decref(data);
	return c;
}

int store_checkpoint_insert(struct store *s, const char *sandbox_id, json_t *ckpt, json_t *priv)
{
	const char *id = store_json_str(ckpt, "id");
	const char *name = store_json_str(ckpt, "name");
	const char *parent = store_json_str(ckpt, "parent");
	json_t *data;
	int ret;

	if (!sandbox_id || !id || !*id || strlen(id) >= STORE_ID_LEN || !name || !*name ||
	    (priv && !json_is_object(priv)))
		return -EINVAL;
	data = store_json_without(ckpt, state_keys);
	if (!data)
		return -ENOMEM;
	store_lock(s);
	ret = store_run(s,
	                "INSERT INTO checkpoints (id, sandbox_id, name, parent, created_ms, data, "
	                "private) VALUES (?, ?, ?, ?, ?, ?, coalesce(?, '{}'))",
	                "ttttijj", id, sandbox_id, name, parent ? parent : "", store_clock(s), data,
	                priv);
	store_unlock(s);
	json_decref(data);
	return ret < 0 ? ret : 0;
}

int store_checkpoint_get(struct store *s, const char *sandbox_id, const char *id_or_name,
                         json_t **ckpt, json_t **priv)
{
	int ret;

	store_lock(s);
	ret = store_read_row(s,
	                     "SELECT " CKPT_COLUMNS ", private FROM checkpoints WHERE " CKPT_MATCH,
	                     sandbox_id, id_or_name, checkpoint_json, 5, ckpt, priv);
	store_unlock(s);
	return ret;
}

int store_checkpoint_list(struct store *s, const char *sandbox_id, json_t **out)
{
	return store_list_rows(s,
	                       "SELECT " CKPT_COLUMNS " FROM checkpoints "
	                       "WHERE sandbox_id = ? ORDER BY seq",
	                       sandbox_id, 0, checkpoint_json, "checkpoints", out);
}

int store_checkpoint_delete(struct store *s, const char *sandbox_id, const char *id_or_name)
{
	int ret;

	store_lock(s);
	ret = store_run(s,
	                "DELETE FROM checkpoints WHERE seq = "
	                "(SELECT seq FROM checkpoints WHERE " CKPT_MATCH ")",
	                "tt", sandbox_id, id_or_name);
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}
