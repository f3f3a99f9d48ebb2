// SPDX-License-Identifier: MIT
/*
 * Opening the state database: the schema, what survives a restart, and the
 * files it must refuse (newer schema, another program's, damaged, not SQLite).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_store.h"
#include "unit.h"

static int open_err(const char *path, char *err, size_t len)
{
	struct store *s = NULL;
	int ret = store_open(path, &s, err, len);

	store_close(s);
	return ret;
}

static int write_at(const char *path, off_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pwrite(fd, buf, len, off);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

UNIT_TEST(store_open_creates_a_private_wal_database)
{
	const char *path = tstore_path("new.db");
	struct store *s = tstore_reopen(path);
	char wal[600];
	struct stat st;
	json_t *list;

	CHECK(s);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	/* WAL mode: the -wal file exists while the store is open. */
	snprintf(wal, sizeof(wal), "%s-wal", path);
	CHECK(access(wal, F_OK) == 0);
	CHECK(store_sandbox_list(s, &(struct store_sandbox_filter){0}, &list) == 0);
	CHECK(tstore_int(list, "total") == 0);
	json_decref(list);
	store_close(s);
	store_close(NULL);
}

UNIT_TEST(store_restart_loses_nothing)
{
	const char *path = tstore_path("restart.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN], eid[STORE_ID_LEN];
	json_t *info, *priv, *events, *exec, *live;

	CHECK(s);
	CHECK(tstore_sandbox(s, "keep", id) == 0);
	priv = json_pack("{s:i, s:s}", "vmmPid", 4242, "vsockPath", "/run/husk/x.sock");
	CHECK(store_sandbox_update(s, id, NULL, priv, NULL) == 0);
	json_decref(priv);
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == 0);
	CHECK(store_new_id(STORE_PFX_EXECUTION, eid) == 0);
	exec = json_pack("{s:s, s:s, s:s, s:[s]}", "executionId", eid, "sandboxId", id, "status",
	                 "running", "command", "true");
	CHECK(store_execution_insert(s, exec, NULL) == 0);
	json_decref(exec);
	store_close(s);

	s = tstore_reopen(path);
	CHECK(s);
	CHECK(store_sandbox_get(s, id, &info, &priv) == 0);
	CHECK(!strcmp(tstore_str(info, "status"), "idle"));
	CHECK(!strcmp(tstore_str(info, "name"), "keep"));
	CHECK(tstore_int(info, "executions") == 1);
	CHECK(tstore_int(priv, "vmmPid") == 4242);
	CHECK(!json_object_get(info, "vmmPid"));
	json_decref(info);
	json_decref(priv);
	CHECK(store_event_list(s, id, 0, false, &events) == 0);
	CHECK(json_array_size(json_object_get(events, "events")) == 2);
	json_decref(events);
	CHECK(store_execution_get(s, eid, &exec, NULL) == 0);
	CHECK(!strcmp(tstore_str(exec, "status"), "running"));
	json_decref(exec);
	/* The adoption pass finds it with what it needs to find the VMM. */
	CHECK(store_sandboxes_live(s, &live) == 0);
	CHECK(json_array_size(live) == 1);
	CHECK(tstore_int(json_object_get(json_array_get(live, 0), "private"), "vmmPid") == 4242);
	json_decref(live);
	store_close(s);
}

UNIT_TEST(store_refuses_a_newer_schema)
{
	const char *path = tstore_path("newer.db");
	struct store *s = tstore_reopen(path);
	char err[256] = "";

	CHECK(s);
	store_close(s);
	CHECK(tstore_sql(path, "INSERT INTO schema_version VALUES (99, 0)") == 0);
	CHECK(open_err(path, err, sizeof(err)) == -ENOTSUP);
	CHECK(strstr(err, "schema version 99 is newer"));
	CHECK(strstr(err, path));
	/* Refusing it changed nothing: removing the row makes it usable again. */
	CHECK(tstore_sql(path, "DELETE FROM schema_version WHERE version = 99") == 0);
	s = tstore_reopen(path);
	CHECK(s);
	store_close(s);
}

UNIT_TEST(store_refuses_another_programs_database)
{
	const char *path = tstore_path("other.db");
	char err[256] = "";

	CHECK(tstore_sql(path, "CREATE TABLE notes (t TEXT)") == 0);
	CHECK(open_err(path, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "another program"));
}

UNIT_TEST(store_refuses_a_file_that_is_not_sqlite)
{
	const char *path = tstore_path("garbage.db");
	char junk[8192], err[256] = "";
	int fd;

	memset(junk, 'x', sizeof(junk));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	close(fd);
	CHECK(open_err(path, err, sizeof(err)) == -EIO);
	CHECK(strstr(err, "not a database"));
}

UNIT_TEST(store_refuses_a_damaged_database)
{
	const char *path = tstore_path("damaged.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN], junk[4096], err[256] = "";
	struct stat st;

	CHECK(s);
	for (int i = 0; i < 50; i++)
		CHECK(tstore_sandbox(s, "filler", id) == 0);
	store_close(s); /* folds the WAL into the file */
	CHECK(stat(path, &st) == 0 && st.st_size >= 4 * 4096);
	/* Pages 2 and 3 (the tables' b-trees) overwritten. */
	memset(junk, 0xa5, sizeof(junk));
	CHECK(write_at(path, 4096, junk, sizeof(junk)) == 0);
	CHECK(write_at(path, 2 * 4096, junk, sizeof(junk)) == 0);
	CHECK(open_err(path, err, sizeof(err)) == -EIO);
	CHECK(strstr(err, "damaged"));
}

UNIT_TEST(store_refuses_a_truncated_database)
{
	const char *path = tstore_path("truncated.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN], err[256] = "";
	struct stat st;

	CHECK(s);
	for (int i = 0; i < 200; i++)
		CHECK(tstore_sandbox(s, "filler", id) == 0);
	store_close(s);
	CHECK(stat(path, &st) == 0);
	CHECK(truncate(path, st.st_size / 2) == 0);
	CHECK(open_err(path, err, sizeof(err)) < 0);
	CHECK(strstr(err, "damaged"));
}

UNIT_TEST(store_open_reports_an_unusable_path)
{
	char err[256] = "";

	CHECK(open_err("/nonexistent-dir/x.db", err, sizeof(err)) == -ENOENT);
	CHECK(strstr(err, "/nonexistent-dir/x.db"));
}
