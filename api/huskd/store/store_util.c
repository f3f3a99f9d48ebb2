// SPDX-License-Identifier: MIT
/* The store's small pieces: ids, time, quantities, JSON helpers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "store_int.h"

#define ID_RANDOM_CHARS 24

int store_new_id(const char *prefix, char out[STORE_ID_LEN])
{
	/* Lowercase base32: [a-z2-7], 5 bits a character, URL- and DNS-safe. */
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char rnd[ID_RANDOM_CHARS];
	size_t n = strlen(prefix), got = 0;

	if (n > STORE_ID_LEN - 1 - ID_RANDOM_CHARS)
		return -EINVAL;
	while (got < sizeof(rnd)) {
		ssize_t r = getrandom(rnd + got, sizeof(rnd) - got, 0);

		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			got += (size_t)r;
	}
	memcpy(out, prefix, n);
	/* 256 is a multiple of 32, so the low 5 bits of a random byte are uniform. */
	for (size_t i = 0; i < ID_RANDOM_CHARS; i++)
		out[n + i] = b32[rnd[i] & 31];
	out[n + ID_RANDOM_CHARS] = '\0';
	return 0;
}

char *store_iso8601(int64_t ms, char buf[STORE_ISO_LEN])
{
	time_t sec = (time_t)(ms / 1000);
	int milli = (int)(ms % 1000);
	struct tm tm;
	size_t n;

	if (milli < 0) {
		milli += 1000;
		sec--;
	}
	if (!gmtime_r(&sec, &tm) ||
	    !(n = strftime(buf, STORE_ISO_LEN - 6, "%Y-%m-%dT%H:%M:%S", &tm)))
		n = (size_t)snprintf(buf, STORE_ISO_LEN, "1970-01-01T00:00:00");
	snprintf(buf + n, STORE_ISO_LEN - n, ".%03dZ", milli);
	return buf;
}

/*
 * "digits[.digits]" times mult, truncated: *out, and *end after it. At most
 * 18 digits, so the product of the mantissa (< 10^18) and mult (≤ 2^60)
 * fits 128 bits.
 */
static int scaled_decimal(const char *p, unsigned __int128 mult, int64_t *out, const char **end)
{
	unsigned __int128 m = 0, div = 1, v;
	int digits = 0;
	bool dot = false;

	for (;; p++) {
		if (*p >= '0' && *p <= '9') {
			if (++digits > 18)
				return -EINVAL;
			m = m * 10 + (unsigned)(*p - '0');
			if (dot)
				div *= 10;
		} else if (*p == '.' && !dot) {
			dot = true;
		} else {
			break;
		}
	}
	if (!digits)
		return -EINVAL;
	v = m * mult / div;
	if (v > INT64_MAX)
		return -ERANGE;
	*out = (int64_t)v;
	*end = p;
	return 0;
}

int store_parse_cpu(const char *text, int64_t *millis)
{
	const char *end;
	int64_t v;
	bool milli;
	int ret;

	if (!text)
		return -EINVAL;
	milli = text[0] && text[strlen(text) - 1] == 'm';
	ret = scaled_decimal(text, milli ? 1 : 1000, &v, &end);
	if (ret < 0)
		return ret;
	if (*end != (milli ? 'm' : '\0') || (milli && end[1]))
		return -EINVAL;
	*millis = v;
	return 0;
}

int store_parse_bytes(const char *text, int64_t *bytes)
{
	static const struct {
		const char *suffix;
		unsigned shift; /* binary: 2^shift */
		int exp10;      /* decimal: 10^exp10 */
	} units[] = {
		{"", 0, 0},    {"k", 0, 3},   {"K", 0, 3},   {"M", 0, 6},   {"G", 0, 9},
		{"T", 0, 12},  {"P", 0, 15},  {"E", 0, 18},  {"Ki", 10, 0}, {"Mi", 20, 0},
		{"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0}, {"Ei", 60, 0},
	};
	const char *end = text;
	int64_t v;

	if (!text)
		return -EINVAL;
	while ((*end >= '0' && *end <= '9') || *end == '.')
		end++;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		unsigned __int128 mult = (unsigned __int128)1 << units[i].shift;
		const char *after;
		int ret;

		if (strcmp(end, units[i].suffix))
			continue;
		for (int e = 0; e < units[i].exp10; e++)
			mult *= 10;
		ret = scaled_decimal(text, mult, &v, &after);
		if (ret < 0)
			return ret;
		if (after != end)
			return -EINVAL;
		*bytes = v;
		return 0;
	}
	return -EINVAL;
}

bool store_str_in(const char *s, const char *const *list)
{
	if (!s)
		return false;
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

const char *store_col_text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

json_t *store_col_json(struct store *s, sqlite3_stmt *st, int col)
{
	const char *text = store_col_text(st, col);
	json_error_t e;
	json_t *j;

	if (!text) {
		store_logf(s, "column %s is NULL in: %s", sqlite3_column_name(st, col),
		           sqlite3_sql(st));
		return NULL;
	}
	j = json_loadb(text, (size_t)sqlite3_column_bytes(st, col), 0, &e);
	if (!json_is_object(j)) {
		store_logf(s, "column %s does not hold a JSON object (%s) in: %s",
		           sqlite3_column_name(st, col), j ? "not an object" : e.text,
		           sqlite3_sql(st));
		json_decref(j);
		return NULL;
	}
	return j;
}

int store_read_row(struct store *s, const char *sql, const char *a, const char *b,
                   json_t *(*row)(struct store *s, sqlite3_stmt *st), int priv_col, json_t **obj,
                   json_t **priv)
{
	return store_read_row3(s, sql, a, b, NULL, row, priv_col, obj, priv);
}

int store_read_row3(struct store *s, const char *sql, const char *a, const char *b, const char *c,
                    json_t *(*row)(struct store *s, sqlite3_stmt *st), int priv_col, json_t **obj,
                    json_t **priv)
{
	static const char *const fmts[] = {"", "t", "tt", "ttt"};
	json_t *o = NULL, *p = NULL;
	sqlite3_stmt *st;
	int ret, n;

	ret = store_prepare(s, sql, &st);
	if (ret < 0)
		return ret;
	n = sqlite3_bind_parameter_count(st);
	ret = n >= 1 && n <= 3 ? store_bind(st, fmts[n], a, b, c) : -EINVAL;
	if (ret == 0)
		ret = store_step(s, st);
	if (ret == 0)
		ret = -ENOENT;
	if (ret == 1) {
		ret = 0;
		if (obj && !(o = row(s, st)))
			ret = -EIO;
		if (!ret && priv && !(p = store_col_json(s, st, priv_col)))
			ret = -EIO;
	}
	store_reset(st);
	if (ret < 0) {
		json_decref(o);
		json_decref(p);
		return ret;
	}
	if (obj)
		*obj = o;
	if (priv)
		*priv = p;
	return 0;
}

static json_t *col0_json(struct store *s, sqlite3_stmt *st)
{
	return store_col_json(s, st, 0);
}

int store_read_objects(struct store *s, const char *sql, const char *id, json_t **a, json_t **b)
{
	return store_read_row(s, sql, id, NULL, col0_json, 1, a, b);
}

int store_json_patch(json_t *target, json_t *patch)
{
	const char *key;
	json_t *v;

	if (!json_is_object(target) || !json_is_object(patch))
		return -EINVAL;
	json_object_foreach(patch, key, v)
	{
		json_t *t;
		int ret;

		if (json_is_null(v)) {
			json_object_del(target, key);
			continue;
		}
		if (!json_is_object(v)) {
			if (json_object_set_new(target, key, json_deep_copy(v)))
				return -ENOMEM;
			continue;
		}
		t = json_object_get(target, key);
		if (!json_is_object(t)) {
			t = json_object();
			if (json_object_set_new(target, key, t))
				return -ENOMEM;
		}
		ret = store_json_patch(t, v);
		if (ret < 0)
			return ret;
	}
	return 0;
}

json_t *store_json_without(json_t *obj, const char *const *keys)
{
	json_t *c;

	if (!json_is_object(obj))
		return NULL;
	c = json_copy(obj);
	for (; c && *keys; keys++)
		json_object_del(c, *keys);
	return c;
}

bool store_json_has_any(json_t *obj, const char *const *keys)
{
	for (; *keys; keys++)
		if (json_object_get(obj, *keys))
			return true;
	return false;
}

const char *store_json_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

int store_json_set_time(json_t *obj, const char *key, int64_t ms)
{
	char buf[STORE_ISO_LEN];

	return json_object_set_new(obj, key, json_string(store_iso8601(ms, buf))) ? -ENOMEM : 0;
}

json_t *store_json_wrap(const char *key, json_t *array)
{
	json_t *obj = json_object();

	if (!obj) {
		json_decref(array);
		return NULL;
	}
	if (json_object_set_new(obj, key, array)) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

const char *store_sort_column(const char *const (*map)[2], const char *sort)
{
	for (; (*map)[0]; map++)
		if (!strcmp((*map)[0], sort))
			return (*map)[1];
	return NULL;
}

static int bind_params(sqlite3_stmt *st, const char *const *params, int n)
{
	for (int i = 0; i < n; i++)
		if (sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT) != SQLITE_OK)
			return -ENOMEM;
	return 0;
}

int store_list_page(struct store *s, const struct store_page *p, json_t **out)
{
	const char *dir = p->ascending ? "ASC" : "DESC";
	sqlite3_stmt *count = NULL, *page = NULL;
	char sql[1024];
	json_t *rows;
	int64_t total = 0;
	int ret;

	*out = NULL;
	if (!p->order)
		return -EINVAL;
	rows = json_array();
	if (!rows)
		return -ENOMEM;
	store_lock(s);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE 1%s", p->table, p->where);
	ret = store_prepare_once(s, sql, &count);
	if (ret == 0)
		ret = bind_params(count, p->params, p->nparams);
	if (ret == 0 && (ret = store_step(s, count)) == 1) {
		total = sqlite3_column_int64(count, 0);
		ret = 0;
	}
	if (ret == 0 &&
	    snprintf(sql, sizeof(sql),
	             "SELECT %s FROM %s WHERE 1%s ORDER BY %s %s, seq %s LIMIT %d OFFSET %d",
	             p->columns, p->table, p->where, p->order, dir, dir,
	             p->limit > 0 ? p->limit : -1,
	             p->offset > 0 ? p->offset : 0) >= (int)sizeof(sql))
		ret = -ENOMEM;
	if (ret == 0)
		ret = store_prepare_once(s, sql, &page);
	if (ret == 0)
		ret = bind_params(page, p->params, p->nparams);
	while (ret == 0 && (ret = store_step(s, page)) == 1) {
		json_t *row = p->row(s, page);

		ret = !row ? -EIO : json_array_append_new(rows, row) ? -ENOMEM : 0;
	}
	sqlite3_finalize(count);
	sqlite3_finalize(page);
	store_unlock(s);
	if (ret == 0)
		*out = json_pack("{s:O, s:I}", p->key, rows, "total", (json_int_t)total);
	json_decref(rows);
	return ret < 0 ? ret : *out ? 0 : -ENOMEM;
}

int store_list_rows(struct store *s, const char *sql, const char *sandbox_id, int limit,
                    json_t *(*row)(struct store *s, sqlite3_stmt *st), const char *key,
                    json_t **out)
{
	json_t *rows = json_array();
	sqlite3_stmt *st;
	int ret;

	*out = NULL;
	if (!rows)
		return -ENOMEM;
	store_lock(s);
	ret = store_sandbox_exists(s, sandbox_id);
	if (ret == 0)
		ret = store_prepare(s, sql, &st);
	if (ret == 0) {
		ret = sqlite3_bind_parameter_count(st) > 1
		              ? store_bind(st, "ti", sandbox_id, (int64_t)(limit > 0 ? limit : -1))
		              : store_bind(st, "t", sandbox_id);
		while (ret == 0 && (ret = store_step(s, st)) == 1) {
			json_t *r = row(s, st);

			ret = !r ? -EIO : json_array_append_new(rows, r) ? -ENOMEM : 0;
		}
		store_reset(st);
	}
	store_unlock(s);
	if (ret == 0)
		*out = store_json_wrap(key, json_incref(rows));
	json_decref(rows);
	return ret < 0 ? ret : *out ? 0 : -ENOMEM;
}

int store_sandbox_exists(struct store *s, const char *id)
{
	sqlite3_stmt *st;
	int ret;

	ret = store_prepare(s, "SELECT 1 FROM sandboxes WHERE id = ?", &st);
	if (ret < 0)
		return ret;
	ret = store_bind(st, "t", id);
	if (ret == 0)
		ret = store_step(s, st);
	store_reset(st);
	return ret == 1 ? 0 : ret == 0 ? -ENOENT : ret;
}

int store_rows(struct store *s, const char *sql, json_t *(*row)(struct store *s, sqlite3_stmt *st),
               json_t **out)
{
	json_t *list = json_array();
	sqlite3_stmt *st;
	int ret;

	*out = NULL;
	if (!list)
		return -ENOMEM;
	store_lock(s);
	ret = store_prepare(s, sql, &st);
	if (ret == 0) {
		while ((ret = store_step(s, st)) == 1) {
			json_t *one = row(s, st);

			if (!one || json_array_append_new(list, one)) {
				ret = -EIO;
				break;
			}
		}
		store_reset(st);
	}
	store_unlock(s);
	if (ret < 0) {
		json_decref(list);
		return ret;
	}
	*out = list;
	return 0;
}

int store_read_text(struct store *s, const char *sql, const char *arg, char *out, size_t len)
{
	sqlite3_stmt *st;
	int ret = store_prepare(s, sql, &st);

	out[0] = '\0';
	if (ret < 0)
		return ret;
	ret = arg ? store_bind(st, "t", arg) : 0;
	if (ret == 0)
		ret = store_step(s, st);
	if (ret == 1)
		snprintf(out, len, "%s", store_col_text(st, 0) ? store_col_text(st, 0) : "");
	store_reset(st);
	return ret == 1 ? 0 : ret == 0 ? -ENOENT : ret;
}
