// SPDX-License-Identifier: MIT
/* Helpers of the store tests (test_store.h), and tests of the store's small pieces. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"
#include "test_img.h"
#include "test_store.h"
#include "unit.h"

int64_t tstore_now = TSTORE_T0;
static char last_log[512];

const char *tstore_path(const char *name)
{
	/* The image tests' scratch directory serves the store's databases too. */
	const char *p = timg_path(name);
	char side[600];

	snprintf(side, sizeof(side), "%s-wal", p);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", p);
	unlink(side);
	return p;
}

static void capture(void *ctx, const char *msg)
{
	(void)ctx;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

const char *tstore_log(void)
{
	return last_log;
}

void tstore_log_clear(void)
{
	last_log[0] = '\0';
}

static int64_t test_clock(void *ctx)
{
	return *(int64_t *)ctx;
}

struct store *tstore_reopen(const char *path)
{
	struct store *s;
	char err[256];

	if (store_open(path, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "store_open %s: %s\n", path, err);
		return NULL;
	}
	store_set_log(s, capture, NULL);
	store_set_clock(s, test_clock, &tstore_now);
	tstore_log_clear();
	return s;
}

struct store *tstore_open(const char *name)
{
	tstore_now = TSTORE_T0;
	return tstore_reopen(tstore_path(name));
}

int tstore_sandbox(struct store *s, const char *name, char id[STORE_ID_LEN])
{
	json_t *info;
	int ret = store_new_id(STORE_PFX_SANDBOX, id);

	if (ret < 0)
		return ret;
	info = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "sandboxId", id, "name",
	                 name, "mode", "interactive", "runtime", "id", "srt_base", "name",
	                 "base:latest", "resources", "cpu", "1", "memory", "512Mi");
	if (!info)
		return -ENOMEM;
	ret = store_sandbox_insert(s, info, NULL, NULL);
	json_decref(info);
	return ret;
}

int tstore_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -1;
}

json_int_t tstore_int(json_t *obj, const char *key)
{
	return json_integer_value(json_object_get(obj, key));
}

const char *tstore_str(json_t *obj, const char *key)
{
	const char *v = json_string_value(json_object_get(obj, key));

	return v ? v : "";
}

UNIT_TEST(store_ids_are_prefixed_random_and_url_safe)
{
	char a[STORE_ID_LEN], b[STORE_ID_LEN];

	CHECK(store_new_id(STORE_PFX_SANDBOX, a) == 0);
	CHECK(store_new_id(STORE_PFX_SANDBOX, b) == 0);
	CHECK(strlen(a) == 4 + 24 && !strncmp(a, "sbx_", 4));
	CHECK(strcmp(a, b) != 0);
	CHECK(strspn(a, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(a));
	CHECK(store_new_id(STORE_PFX_CHECKPOINT, a) == 0 && !strncmp(a, "ckpt_", 5));
	CHECK(store_new_id("a_prefix_too_long_", a) == -EINVAL);
}

UNIT_TEST(store_iso8601_has_milliseconds_in_utc)
{
	char buf[STORE_ISO_LEN];

	CHECK(!strcmp(store_iso8601(1777636800000, buf), "2026-05-01T12:00:00.000Z"));
	CHECK(!strcmp(store_iso8601(1777636801250, buf), "2026-05-01T12:00:01.250Z"));
	CHECK(!strcmp(store_iso8601(0, buf), "1970-01-01T00:00:00.000Z"));
	CHECK(!strcmp(store_iso8601(-1, buf), "1969-12-31T23:59:59.999Z"));
	CHECK(store_now_ms() > 1700000000000);
}

UNIT_TEST(store_quantities)
{
	int64_t v;

	CHECK(store_parse_cpu("500m", &v) == 0 && v == 500);
	CHECK(store_parse_cpu("1", &v) == 0 && v == 1000);
	CHECK(store_parse_cpu("0.5", &v) == 0 && v == 500);
	CHECK(store_parse_cpu("2.25", &v) == 0 && v == 2250);
	CHECK(store_parse_cpu("", &v) == -EINVAL);
	CHECK(store_parse_cpu("m", &v) == -EINVAL);
	CHECK(store_parse_cpu("1x", &v) == -EINVAL);
	CHECK(store_parse_cpu("1mm", &v) == -EINVAL);
	CHECK(store_parse_bytes("512Mi", &v) == 0 && v == 512ll << 20);
	CHECK(store_parse_bytes("1Gi", &v) == 0 && v == 1ll << 30);
	CHECK(store_parse_bytes("1.5Gi", &v) == 0 && v == 3ll << 29);
	CHECK(store_parse_bytes("1G", &v) == 0 && v == 1000000000);
	CHECK(store_parse_bytes("4096", &v) == 0 && v == 4096);
	CHECK(store_parse_bytes("8Ei", &v) == -ERANGE);
	CHECK(store_parse_bytes("1Xi", &v) == -EINVAL);
	CHECK(store_parse_bytes("Mi", &v) == -EINVAL);
	CHECK(store_parse_bytes("1.2.3", &v) == -EINVAL);
	CHECK(store_parse_bytes("-1", &v) == -EINVAL);
	CHECK(store_parse_bytes("1234567890123456789", &v) == -EINVAL);
}

UNIT_TEST(store_merge_patch_follows_rfc7396)
{
	json_t *t = json_loads("{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"x\":[1]}", 0, NULL);
	json_t *p = json_loads("{\"a\":\"z\",\"c\":{\"f\":null},\"x\":{\"y\":null,\"k\":1},"
	                       "\"n\":null}",
	                       0, NULL);
	json_t *want = json_loads("{\"a\":\"z\",\"c\":{\"d\":\"e\"},\"x\":{\"k\":1}}", 0, NULL);

	CHECK(t && p && want);
	CHECK(store_json_patch(t, p) == 0);
	CHECK(json_equal(t, want));
	CHECK(store_json_patch(t, json_object_get(want, "a")) == -EINVAL);
	json_decref(t);
	json_decref(p);
	json_decref(want);
}
