// SPDX-License-Identifier: MIT
/*
 * The store's schema and its forward migrations. migrations[i] takes a
 * database from version i to i + 1; each runs in its own transaction with
 * the row in schema_version that records it, so a crash leaves the database
 * at one version or the next. Never edit a migration once released: add one.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/* PRAGMA application_id: "husk", so another program's SQLite file is refused. */
#define HUSK_APP_ID 0x6875736b

/*
 * Every table has an INTEGER PRIMARY KEY (seq) because a bare rowid may
 * change on VACUUM and lists are ordered by insertion; ids are UNIQUE text.
 * data is the public JSON, private the manager's. Events, executions, jobs
 * and checkpoints go with their sandbox only when it is purged: DELETE
 * /sandbox only marks it deleted, and API.md wants its records to outlive it.
 */
static const char *const migrations[] = {
	/* 0 → 1: the first schema. */
	"CREATE TABLE sandboxes ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  status TEXT NOT NULL,"
	"  name TEXT, mode TEXT, runtime TEXT, project_id TEXT, snapshot_id TEXT,"
	"  cpu_millis INTEGER NOT NULL DEFAULT 0,"
	"  memory_bytes INTEGER NOT NULL DEFAULT 0,"
	"  executions INTEGER NOT NULL DEFAULT 0,"
	"  created_ms INTEGER NOT NULL,"
	"  updated_ms INTEGER NOT NULL,"
	"  status_ms INTEGER NOT NULL," /* when the current status began */
	"  deleted_ms INTEGER,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL);"
	"CREATE INDEX sandboxes_status ON sandboxes(status);"
	"CREATE INDEX sandboxes_created ON sandboxes(created_ms);"
	"CREATE INDEX sandboxes_name ON sandboxes(name);"
	"CREATE INDEX sandboxes_project ON sandboxes(project_id);"
	"CREATE INDEX sandboxes_snapshot ON sandboxes(snapshot_id);"

	/* status: the status a transition moved to; NULL for other events. */
	"CREATE TABLE events ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  id TEXT NOT NULL UNIQUE,"
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  type TEXT NOT NULL,"
	"  status TEXT,"
	"  created_ms INTEGER NOT NULL,"
	"  data TEXT NOT NULL);"
	"CREATE INDEX events_sandbox ON events(sandbox_id, seq);"

	"CREATE TABLE executions ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  status TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  started_ms INTEGER,"
	"  completed_ms INTEGER,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL);"
	"CREATE INDEX executions_sandbox ON executions(sandbox_id, seq);"
	"CREATE INDEX executions_started ON executions(started_ms);"

	"CREATE TABLE jobs ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  status TEXT NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  started_ms INTEGER,"
	"  completed_ms INTEGER,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL);"
	"CREATE INDEX jobs_sandbox ON jobs(sandbox_id, seq);"

	"CREATE TABLE runtimes ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  name TEXT NOT NULL UNIQUE,"
	"  created_ms INTEGER NOT NULL,"
	"  updated_ms INTEGER NOT NULL,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL);"

	/* No foreign keys: a snapshot outlives its sandbox, lineage its deleted parents. */
	"CREATE TABLE snapshots ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  name TEXT NOT NULL,"
	"  tag TEXT,"
	"  sandbox_id TEXT,"
	"  parent_id TEXT,"
	"  runtime_id TEXT,"
	"  public INTEGER NOT NULL DEFAULT 0,"
	"  size_bytes INTEGER NOT NULL DEFAULT 0,"
	"  file_count INTEGER NOT NULL DEFAULT 0,"
	"  created_ms INTEGER NOT NULL,"
	"  deleted_ms INTEGER,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL);"
	"CREATE INDEX snapshots_name ON snapshots(name, created_ms);"
	"CREATE INDEX snapshots_sandbox ON snapshots(sandbox_id);"
	"CREATE UNIQUE INDEX snapshots_tag ON snapshots(name, tag)"
	"  WHERE tag IS NOT NULL AND deleted_ms IS NULL;"

	/* parent: the parent checkpoint's name, "" for the first (API.md §5.7). */
	"CREATE TABLE checkpoints ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  parent TEXT NOT NULL DEFAULT '',"
	"  created_ms INTEGER NOT NULL,"
	"  data TEXT NOT NULL,"
	"  private TEXT NOT NULL,"
	"  UNIQUE (sandbox_id, name));",

	/*
         * 1 → 2: tenants. Everything before belongs to the default org; a
         * snapshot's tag is unique within its org, not across orgs. Keys are
         * kept as SHA-256 only: the database never holds one that works.
         */
	"ALTER TABLE sandboxes ADD COLUMN org_id TEXT NOT NULL DEFAULT '" STORE_DEFAULT_ORG "';"
	"CREATE INDEX sandboxes_org ON sandboxes(org_id, created_ms);"
	"ALTER TABLE snapshots ADD COLUMN org_id TEXT NOT NULL DEFAULT '" STORE_DEFAULT_ORG "';"
	"CREATE INDEX snapshots_org ON snapshots(org_id, name, created_ms);"
	"DROP INDEX snapshots_tag;"
	"CREATE UNIQUE INDEX snapshots_tag ON snapshots(org_id, name, tag)"
	"  WHERE tag IS NOT NULL AND deleted_ms IS NULL;"
	"CREATE TABLE orgs ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  name TEXT NOT NULL UNIQUE,"
	"  created_ms INTEGER NOT NULL);"
	"INSERT INTO orgs (id, name, created_ms) VALUES ('" STORE_DEFAULT_ORG
	"', '" STORE_DEFAULT_ORG_NAME "', 0);"
	"CREATE TABLE api_keys ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE,"
	"  org_id TEXT NOT NULL REFERENCES orgs(id),"
	"  role TEXT NOT NULL,"
	"  hash TEXT NOT NULL UNIQUE,"
	"  name TEXT,"
	"  created_ms INTEGER NOT NULL,"
	"  revoked_ms INTEGER);",

	/*
         * 2 → 3: the audit trail. Each org's records form a chain: hash is the
         * SHA-256 of the record's fields and prev, the hash of the org's record
         * before it. The triggers keep SQL from changing or removing one; the
         * chain finds a record changed behind SQLite's back.
         */
	"CREATE TABLE audit ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  org_id TEXT NOT NULL,"
	"  key_id TEXT NOT NULL,"
	"  action TEXT NOT NULL,"
	"  target TEXT NOT NULL,"
	"  sandbox_id TEXT,"
	"  status INTEGER NOT NULL,"
	"  created_ms INTEGER NOT NULL,"
	"  prev TEXT NOT NULL,"
	"  hash TEXT NOT NULL);"
	"CREATE INDEX audit_org ON audit(org_id, seq);"
	"CREATE INDEX audit_sandbox ON audit(sandbox_id, seq);"
	"CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit "
	"  BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;"
	"CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit "
	"  BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;",
};

_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION,
               "STORE_SCHEMA_VERSION is the number of migrations");

/* One integer from a query without parameters (not cached: used once per open). */
static int sql_int(struct store *s, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	int ret = store_prepare_once(s, sql, &st);

	if (ret < 0)
		return ret;
	ret = store_step(s, st);
	if (ret == 1) {
		*v = sqlite3_column_int64(st, 0);
		ret = 0;
	} else if (ret == 0) {
		*v = 0;
	}
	sqlite3_finalize(st);
	return ret;
}

/*
 * Reads what the file is, inside the migration's transaction so that two
 * processes opening a new file do not both create the schema.
 */
static int schema_version(struct store *s, int64_t *version, char *err, size_t errlen)
{
	int64_t app_id, tables, has_versions;
	int ret;

	ret = sql_int(s, "PRAGMA application_id", &app_id);
	if (!ret)
		ret = sql_int(s, "SELECT count(*) FROM sqlite_schema", &tables);
	if (!ret)
		ret = sql_int(s,
		              "SELECT count(*) FROM sqlite_schema "
		              "WHERE type = 'table' AND name = 'schema_version'",
		              &has_versions);
	if (ret < 0) {
		snprintf(err, errlen, "cannot read the schema: %s", sqlite3_errmsg(s->db));
		return ret;
	}
	if (app_id == 0 && tables == 0) {
		*version = 0;
		return 0;
	}
	if (app_id != HUSK_APP_ID || !has_versions) {
		snprintf(err, errlen,
		         "an SQLite database of another program (application_id %#llx), "
		         "not huskd's state",
		         (unsigned long long)app_id);
		return -EINVAL;
	}
	ret = sql_int(s, "SELECT max(version) FROM schema_version", version);
	if (ret < 0)
		snprintf(err, errlen, "cannot read the schema version: %s", sqlite3_errmsg(s->db));
	return ret;
}

static int migrate_one(struct store *s, int64_t to, char *err, size_t errlen)
{
	char sql[128];
	int rc;

	if (to == 1) {
		snprintf(sql, sizeof(sql),
		         "PRAGMA application_id = %d;"
		         "CREATE TABLE schema_version (version INTEGER PRIMARY KEY,"
		         " applied_ms INTEGER NOT NULL);",
		         HUSK_APP_ID);
		rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto err;
	}
	rc = sqlite3_exec(s->db, migrations[to - 1], NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto err;
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%lld, %lld)", (long long)to,
	         (long long)store_clock(s));
	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto err;
	return 0;
err:
	snprintf(err, errlen, "migration to schema version %lld failed: %s", (long long)to,
	         sqlite3_errmsg(s->db));
	return store_sqlfail(s, rc, "migration");
}

/*
 * A full read of every page: a damaged file is refused at start with a clear
 * message instead of failing some later request. The state database is
 * small, so this costs milliseconds.
 */
static int check_integrity(struct store *s, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	const char *res;
	int ret = store_prepare_once(s, "PRAGMA quick_check(1)", &st);

	if (ret < 0)
		goto err;
	ret = store_step(s, st);
	res = ret == 1 ? store_col_text(st, 0) : NULL;
	if (ret == 1 && res && !strcmp(res, "ok")) {
		sqlite3_finalize(st);
		return 0;
	}
	if (ret >= 0) {
		snprintf(err, errlen, "the database is damaged (integrity check: %s)",
		         res ? res : "no answer");
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_finalize(st);
err:
	snprintf(err, errlen, "the database is damaged or not a database: %s",
	         sqlite3_errmsg(s->db));
	return ret;
}

int store_migrate(struct store *s, char *err, size_t errlen)
{
	int64_t version;
	int ret;

	ret = check_integrity(s, err, errlen);
	if (ret < 0)
		return ret;
	for (;;) {
		ret = store_begin(s);
		if (ret < 0) {
			snprintf(err, errlen, "cannot lock the database: %s",
			         sqlite3_errmsg(s->db));
			return ret;
		}
		ret = schema_version(s, &version, err, errlen);
		if (ret == 0 && version > STORE_SCHEMA_VERSION) {
			snprintf(err, errlen,
			         "schema version %lld is newer than this huskd knows (%d); "
			         "run the huskd that wrote it, or a newer one",
			         (long long)version, STORE_SCHEMA_VERSION);
			ret = -ENOTSUP;
		}
		if (ret == 0 && version == STORE_SCHEMA_VERSION)
			return store_end(s, 0);
		if (ret == 0)
			ret = migrate_one(s, version + 1, err, errlen);
		ret = store_end(s, ret);
		if (ret < 0)
			return ret;
	}
}
