// SPDX-License-Identifier: MIT
/*
 * Orgs and API keys (tenants). A key is recorded by its SHA-256 alone;
 * huskd keeps the active ones in memory (api/huskd/tenant/) and checks a
 * request against that, so the store is read once at start and written
 * when keys are made or revoked.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

int store_org_find(struct store *s, const char *name, bool create, char id[STORE_ID_LEN])
{
	int ret;

	store_lock(s);
	ret = store_read_text(s, "SELECT id FROM orgs WHERE name = ?", name, id, STORE_ID_LEN);
	if (ret == -ENOENT && create) {
		ret = store_new_id(STORE_PFX_ORG, id);
		if (ret == 0)
			ret = store_run(s,
			                "INSERT INTO orgs (id, name, created_ms) VALUES (?, ?, ?)",
			                "tti", id, name, store_clock(s));
		ret = ret < 0 ? ret : 0;
	}
	store_unlock(s);
	return ret;
}

int store_org_name(struct store *s, const char *id, char *name, size_t len)
{
	int ret;

	store_lock(s);
	ret = store_read_text(s, "SELECT name FROM orgs WHERE id = ?", id, name, len);
	store_unlock(s);
	return ret;
}

int store_key_insert(struct store *s, const char *id, const char *org_id, const char *role,
                     const char *hash, const char *name)
{
	int ret;

	if (!id || strlen(id) >= STORE_ID_LEN || !org_id || !role || !hash || strlen(hash) != 64)
		return -EINVAL;
	store_lock(s);
	ret = store_run(s,
	                "INSERT INTO api_keys (id, org_id, role, hash, name, created_ms) "
	                "SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS "
	                "(SELECT 1 FROM orgs WHERE id = ?2)",
	                "ttttti", id, org_id, role, hash, name, store_clock(s));
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}

static json_t *key_json(struct store *s, sqlite3_stmt *st)
{
	json_t *k = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s}", "id", store_col_text(st, 0),
	                      "orgId", store_col_text(st, 1), "orgName", store_col_text(st, 2),
	                      "role", store_col_text(st, 3), "name", store_col_text(st, 4), "hash",
	                      store_col_text(st, 6));

	(void)s;
	if (k && store_json_set_time(k, "createdAt", sqlite3_column_int64(st, 5)) < 0) {
		json_decref(k);
		k = NULL;
	}
	return k;
}

int store_keys_active(struct store *s, json_t **out)
{
	return store_rows(s,
	                  "SELECT k.id, k.org_id, o.name, k.role, k.name, k.created_ms, k.hash "
	                  "FROM api_keys k JOIN orgs o ON o.id = k.org_id "
	                  "WHERE k.revoked_ms IS NULL ORDER BY k.seq",
	                  key_json, out);
}

int store_key_revoke(struct store *s, const char *id)
{
	int ret;

	store_lock(s);
	ret = store_run(s, "UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL",
	                "it", store_clock(s), id);
	store_unlock(s);
	return ret < 0 ? ret : ret == 0 ? -ENOENT : 0;
}
