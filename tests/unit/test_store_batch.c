// SPDX-License-Identifier: MIT
/*
 * Store batches: the calls between store_batch_begin and store_batch_end
 * commit once, each still all or nothing; what another connection reading
 * the file sees tells whether they committed.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

/* Rows in table, as a second connection sees them (committed ones); -1 on error. */
static int committed(const char *path, const char *table)
{
	char sql[128];
	sqlite3 *db;
	sqlite3_stmt *st = NULL;
	int n = -1;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static int insert_exec(struct store *s, const char *sandbox, char eid[STORE_ID_LEN])
{
	json_t *e;
	int ret = store_new_id(STORE_PFX_EXECUTION, eid);

	if (ret)
		return ret;
	e = json_pack("{s:s, s:s, s:s}", "executionId", eid, "sandboxId", sandbox, "status",
	              "running");
	ret = e ? store_execution_insert(s, e, NULL) : -ENOMEM;
	json_decref(e);
	return ret;
}

UNIT_TEST(store_batch_commits_once_at_its_end)
{
	const char *path = tstore_path("batch.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN], eid[STORE_ID_LEN];
	json_t *rec = NULL;

	CHECK(s);
	CHECK(tstore_sandbox(s, "batched", id) == 0);
	CHECK(committed(path, "executions") == 0);
	store_batch_begin(s);
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == 0);
	CHECK(insert_exec(s, id, eid) == 0);
	/* Nested: only the outer end commits. */
	store_batch_begin(s);
	CHECK(store_execution_update(s, eid, "completed", NULL, NULL, NULL) == 0);
	CHECK(store_batch_end(s) == 0);
	/* This connection reads its own writes; no other sees them yet. */
	CHECK(store_execution_get(s, eid, &rec, NULL) == 0);
	CHECK(!strcmp(tstore_str(rec, "status"), "completed"));
	json_decref(rec);
	CHECK(committed(path, "executions") == 0);
	CHECK(store_batch_end(s) == 0);
	CHECK(committed(path, "executions") == 1);
	CHECK(store_execution_get(s, eid, &rec, NULL) == 0);
	CHECK(!strcmp(tstore_str(rec, "status"), "completed"));
	json_decref(rec);
	CHECK(!tstore_log()[0]);
	store_close(s);
}

UNIT_TEST(store_batch_keeps_the_others_when_one_call_fails)
{
	const char *path = tstore_path("batch_fail.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN], eid[STORE_ID_LEN], eid2[STORE_ID_LEN];
	json_t *e, *rec = NULL;
	int events;

	CHECK(s);
	CHECK(tstore_sandbox(s, "batched", id) == 0);
	events = committed(path, "events");
	store_batch_begin(s);
	CHECK(insert_exec(s, id, eid) == 0);
	/* The same id again: refused by the table, inside the batch. */
	e = json_pack("{s:s, s:s, s:s}", "executionId", eid, "sandboxId", id, "status", "running");
	CHECK(store_execution_insert(s, e, NULL) < 0);
	json_decref(e);
	/* A move the store refuses (creating -> deleted -> idle) after one it takes. */
	CHECK(store_sandbox_set_status(s, id, "deleted", "gone") == 0);
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) < 0);
	CHECK(insert_exec(s, id, eid2) == 0);
	CHECK(store_batch_end(s) == 0);
	CHECK(committed(path, "executions") == 2);
	CHECK(committed(path, "events") == events + 1);
	CHECK(store_sandbox_get(s, id, &rec, NULL) == 0);
	CHECK(!strcmp(tstore_str(rec, "status"), "deleted"));
	json_decref(rec);
	/* The store works on as before, each call its own commit. */
	CHECK(store_execution_update(s, eid2, "completed", NULL, NULL, NULL) == 0);
	CHECK(committed(path, "executions") == 2);
	store_close(s);
}
