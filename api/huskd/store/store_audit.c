// SPDX-License-Identifier: MIT
/*
 * The audit trail: per org, every call that changes something, each record
 * chained to the one before it by hash. Appended in one transaction that
 * reads the org's last hash, so the chain has no forks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "store_int.h"

int store_audit_text(char *buf, size_t len, int64_t seq, const struct store_audit *a,
                     int64_t created_ms, const char *prev)
{
	return snprintf(buf, len, "%" PRId64 "|%s|%s|%s|%s|%s|%d|%" PRId64 "|%s", seq, a->org_id,
	                a->key_id, a->action, a->target, a->sandbox_id ? a->sandbox_id : "",
	                a->status, created_ms, prev);
}

/* The hex SHA-256 of a record's text into out (65 bytes). */
static int audit_hash(int64_t seq, const struct store_audit *a, int64_t created_ms,
                      const char *prev, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	char text[4096];
	int n = store_audit_text(text, sizeof(text), seq, a, created_ms, prev);

	if (n < 0 || (size_t)n >= sizeof(text))
		return -ENAMETOOLONG;
	SHA256((const unsigned char *)text, (size_t)n, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return 0;
}

int store_audit_append(struct store *s, const struct store_audit *a)
{
	char prev[80], next[32], hash[65];
	int64_t now, seq;
	int ret;

	if (!a->org_id || !a->key_id || !a->action || !a->target)
		return -EINVAL;
	store_lock(s);
	ret = store_begin(s);
	if (ret < 0)
		goto out;
	ret = store_read_text(s,
	                      "SELECT hash FROM audit WHERE org_id = ? ORDER BY seq DESC LIMIT 1",
	                      a->org_id, prev, sizeof(prev));
	if (ret == -ENOENT) /* the org's first record */
		ret = 0;
	/* AUTOINCREMENT: the next seq is one past the highest ever given (none is deleted). */
	if (ret == 0)
		ret = store_read_text(s,
		                      "SELECT coalesce((SELECT seq FROM sqlite_sequence "
		                      "WHERE name = 'audit'), 0) + 1",
		                      NULL, next, sizeof(next));
	now = store_clock(s);
	seq = strtoll(next, NULL, 10);
	if (ret == 0)
		ret = audit_hash(seq, a, now, prev, hash);
	if (ret == 0)
		ret = store_run(
			s,
			"INSERT INTO audit (seq, org_id, key_id, action, target, sandbox_id, "
			"status, created_ms, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			"itttttiitt", seq, a->org_id, a->key_id, a->action, a->target,
			a->sandbox_id, (int64_t)a->status, now, prev, hash);
	ret = store_end(s, ret);
out:
	store_unlock(s);
	return ret < 0 ? ret : 0;
}

#define AUDIT_COLUMNS \
	"seq, org_id, key_id, action, target, sandbox_id, status, created_ms, prev, hash"

static json_t *audit_json(struct store *s, sqlite3_stmt *st)
{
	json_t *r =
		json_pack("{s:I, s:s, s:s, s:s, s:s, s:s?, s:I, s:s, s:s}", "seq",
	                  (json_int_t)sqlite3_column_int64(st, 0), "orgId", store_col_text(st, 1),
	                  "keyId", store_col_text(st, 2), "action", store_col_text(st, 3), "target",
	                  store_col_text(st, 4), "sandboxId", store_col_text(st, 5), "status",
	                  (json_int_t)sqlite3_column_int64(st, 6), "prev", store_col_text(st, 8),
	                  "hash", store_col_text(st, 9));

	(void)s;
	if (r && (json_object_set_new(r, "createdMs", json_integer(sqlite3_column_int64(st, 7))) ||
	          store_json_set_time(r, "createdAt", sqlite3_column_int64(st, 7)) < 0)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

int store_audit_list(struct store *s, const char *org, const char *sandbox_id, int64_t after_seq,
                     int limit, json_t **out)
{
	sqlite3_stmt *st;
	json_t *list = json_array();
	int ret;

	*out = NULL;
	if (!list)
		return -ENOMEM;
	store_lock(s);
	ret = store_prepare(s,
	                    "SELECT " AUDIT_COLUMNS " FROM audit WHERE org_id = ?1 AND seq > ?2 "
	                    "AND (?3 IS NULL OR sandbox_id = ?3) ORDER BY seq LIMIT ?4",
	                    &st);
	if (ret == 0) {
		ret = store_bind(st, "titi", org, after_seq, sandbox_id,
		                 (int64_t)(limit > 0 ? limit : -1));
		while (ret == 0 && (ret = store_step(s, st)) == 1) {
			json_t *r = audit_json(s, st);

			ret = !r || json_array_append_new(list, r) ? -ENOMEM : 0;
		}
		store_reset(st);
	}
	store_unlock(s);
	if (ret < 0) {
		json_decref(list);
		return ret;
	}
	*out = json_pack("{s:o}", "records", list);
	return *out ? 0 : -ENOMEM;
}

int store_audit_verify(struct store *s, const char *org, int64_t *count, int64_t *broken)
{
	sqlite3_stmt *st;
	char prev[80] = "", hash[65];
	int ret;

	*count = *broken = 0;
	store_lock(s);
	ret = store_prepare(s, "SELECT " AUDIT_COLUMNS " FROM audit WHERE org_id = ? ORDER BY seq",
	                    &st);
	if (ret == 0) {
		ret = store_bind(st, "t", org);
		while (ret == 0 && (ret = store_step(s, st)) == 1) {
			struct store_audit a = {
				.org_id = store_col_text(st, 1),
				.key_id = store_col_text(st, 2),
				.action = store_col_text(st, 3),
				.target = store_col_text(st, 4),
				.sandbox_id = store_col_text(st, 5),
				.status = (int)sqlite3_column_int64(st, 6),
			};
			const char *p = store_col_text(st, 8), *h = store_col_text(st, 9);
			int64_t seq = sqlite3_column_int64(st, 0);

			(*count)++;
			ret = a.key_id && a.action && a.target && p && h
			              ? audit_hash(seq, &a, sqlite3_column_int64(st, 7), p, hash)
			              : -EINVAL;
			if (ret < 0 || strcmp(p, prev) || strcmp(h, hash)) {
				*broken = seq;
				ret = 0;
				break;
			}
			snprintf(prev, sizeof(prev), "%s", h);
			ret = 0;
		}
		store_reset(st);
	}
	store_unlock(s);
	return ret < 0 ? ret : 0;
}
