// SPDX-License-Identifier: MIT
/* Opening the store: the file made private, SQLite configured, the schema brought up to date. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/* Another connection (the sqlite3 shell, say) holding a lock: wait this long. */
#define BUSY_TIMEOUT_MS 2000

/*
 * sqlite3 creates the file with 0644 and gives its -wal and -shm files the
 * database's mode; the database holds sandbox environments (secrets), so
 * create it 0600 first.
 */
static int create_private(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

/*
 * WAL: readers (another thread's connection, the sqlite3 shell) never block
 * the writer and a commit is one append. synchronous=NORMAL: in WAL mode a
 * commit then survives a crash of huskd (the WAL is in the page cache) and
 * the database stays consistent after a power loss, which can only lose the
 * last commits, while FULL would fsync on every status change on the loop
 * thread. After a power loss every VMM is gone anyway and the adoption pass
 * marks the sandboxes failed.
 */
static int configure(struct store *s, char *err, size_t errlen)
{
	static const char *const pragmas[] = {
		"PRAGMA foreign_keys = ON",
		"PRAGMA synchronous = NORMAL",
		/* The schema is ours; never run functions a file's schema names. */
		"PRAGMA trusted_schema = OFF",
		/* A deleted row's bytes (a wrapped data key) are overwritten, not left in free
	           pages. */
		"PRAGMA secure_delete = ON",
	};
	sqlite3_stmt *st;
	const char *mode;
	int rc;

	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	/* The first read of the file: this is where a file that is not a database fails. */
	rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		snprintf(err, errlen, "damaged, or not an SQLite database: %s",
		         sqlite3_errmsg(s->db));
		sqlite3_finalize(st);
		return store_errno(rc) ?: -EIO;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	if (!mode || strcmp(mode, "wal"))
		store_logf(s, "journal mode is %s, not wal", mode ? mode : "?");
	sqlite3_finalize(st);
	for (size_t i = 0; i < ARRAY_SIZE(pragmas); i++) {
		rc = sqlite3_exec(s->db, pragmas[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			snprintf(err, errlen, "%s: %s", pragmas[i], sqlite3_errmsg(s->db));
			return store_errno(rc);
		}
	}
	return 0;
}

int store_set_exclusive(struct store *s)
{
	int rc;

	/*
	 * huskd is the database's one user: holding its locks for good spares
	 * the fcntl() locking around every statement (a third of the system
	 * calls of a command's run through the API). Taken at the next access.
	 */
	store_lock(s);
	rc = sqlite3_exec(s->db, "PRAGMA locking_mode = EXCLUSIVE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
	store_unlock(s);
	return rc == SQLITE_OK ? 0 : -EIO;
}

int store_set_durable(struct store *s)
{
	int rc;

	store_lock(s);
	rc = sqlite3_exec(s->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
	store_unlock(s);
	return rc == SQLITE_OK ? 0 : -EIO;
}

int store_scrub(struct store *s)
{
	int rc;

	/* The log's frames hold deleted rows' old bytes until it is checkpointed and cut. */
	store_lock(s);
	rc = sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	store_unlock(s);
	return rc == SQLITE_OK ? 0 : -EIO;
}

int store_open(const char *path, struct store **out, char *err, size_t errlen)
{
	/*
	 * NOMUTEX: SQLite's own locking is redundant, every use of the
	 * connection holds s->lock (store.h, Threads).
	 */
	const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
	                  SQLITE_OPEN_EXRESCODE;
	pthread_mutexattr_t attr;
	struct store *s;
	int ret, rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Recursive: a batch (store_batch_begin) holds it across the calls it groups. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&s->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	store_set_log(s, NULL, NULL);
	store_set_clock(s, NULL, NULL);
	ret = create_private(path, err, errlen);
	if (ret < 0)
		goto err_free;
	rc = sqlite3_open_v2(path, &s->db, flags, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path,
		         s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		ret = store_errno(rc) ?: -EIO;
		goto err_close;
	}
	sqlite3_extended_result_codes(s->db, 1);
	ret = configure(s, err, errlen);
	if (ret < 0)
		goto err_close;
	store_lock(s);
	ret = store_migrate(s, err, errlen);
	store_unlock(s);
	if (ret < 0)
		goto err_close;
	*out = s;
	return 0;

err_close:
	/* err names the path only where SQLite's message does not say which file. */
	if (err && errlen && !strstr(err, path)) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s: %s", path, err);
		snprintf(err, errlen, "%s", msg);
	}
	store_close(s);
	return ret;
err_free:
	pthread_mutex_destroy(&s->lock);
	free(s);
	return ret;
}
