// SPDX-License-Identifier: MIT
/*
 * The store's connection: locking, logging, the clock, errors, cached
 * statements and transactions. Opening it is store_open.c, the schema
 * store_schema.c, the records store_<record>.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/*
 * Waits this long for a lock another process (the sqlite3 shell, a backup)
 * holds before a call fails with -EBUSY; our own threads never wait on
 * SQLite, they wait on the mutex.
 */

static void log_stderr(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "huskd: store: %s\n", msg);
}

void store_set_log(struct store *s, store_log_fn fn, void *ctx)
{
	store_lock(s);
	s->log = fn ? fn : log_stderr;
	s->log_ctx = fn ? ctx : NULL;
	store_unlock(s);
}

int64_t store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t clock_wall(void *ctx)
{
	(void)ctx;
	return store_now_ms();
}

void store_set_clock(struct store *s, store_clock_fn fn, void *ctx)
{
	store_lock(s);
	s->clock = fn ? fn : clock_wall;
	s->clock_ctx = fn ? ctx : NULL;
	store_unlock(s);
}

int64_t store_clock(struct store *s)
{
	return s->clock(s->clock_ctx);
}

void store_lock(struct store *s)
{
	pthread_mutex_lock(&s->lock);
}

void store_unlock(struct store *s)
{
	pthread_mutex_unlock(&s->lock);
}

void store_logf(struct store *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(s->log_ctx, msg);
}

int store_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CONSTRAINT:
		if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
			return -EEXIST;
		/* A row naming a sandbox (or other parent) that does not exist. */
		if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
			return -ENOENT;
		return -EINVAL;
	default:
		return -EIO;
	}
}

int store_sqlfail(struct store *s, int rc, const char *what)
{
	if ((rc & 0xff) != SQLITE_CONSTRAINT)
		store_logf(s, "%s: %s (%d)", what, sqlite3_errmsg(s->db), rc);
	return store_errno(rc);
}

int store_prepare(struct store *s, const char *sql, sqlite3_stmt **out)
{
	sqlite3_stmt *st;
	int rc;

	for (unsigned i = 0; i < s->nstmts; i++) {
		if (s->stmts[i].sql == sql) {
			*out = s->stmts[i].st;
			return 0;
		}
	}
	if (s->nstmts == STORE_MAX_STMTS) {
		store_logf(s, "more than %d cached statements", STORE_MAX_STMTS);
		return -ENOMEM;
	}
	rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
	if (rc != SQLITE_OK)
		return store_sqlfail(s, rc, sql);
	s->stmts[s->nstmts].sql = sql;
	s->stmts[s->nstmts++].st = st;
	*out = st;
	return 0;
}

void store_reset(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

int store_prepare_once(struct store *s, const char *sql, sqlite3_stmt **out)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, out, NULL);

	return rc == SQLITE_OK ? 0 : store_sqlfail(s, rc, sql);
}

static int bind_va(sqlite3_stmt *st, const char *fmt, va_list ap)
{
	for (int i = 1; *fmt; fmt++, i++) {
		const char *t;
		int64_t v;
		json_t *j;
		char *text;
		int rc;

		switch (*fmt) {
		case 't':
			t = va_arg(ap, const char *);
			rc = t ? sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT)
			       : sqlite3_bind_null(st, i);
			break;
		case 'i':
			v = va_arg(ap, int64_t);
			rc = v == STORE_NULL ? sqlite3_bind_null(st, i)
			                     : sqlite3_bind_int64(st, i, v);
			break;
		case 'j':
			j = va_arg(ap, json_t *);
			if (!j) {
				rc = sqlite3_bind_null(st, i);
				break;
			}
			text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
			if (!text)
				return -ENOMEM;
			/* SQLite frees text with free(), which is jansson's default allocator. */
			rc = sqlite3_bind_text(st, i, text, -1, free);
			break;
		default:
			return -EINVAL;
		}
		if (rc != SQLITE_OK)
			return store_errno(rc);
	}
	return 0;
}

int store_bind(sqlite3_stmt *st, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = bind_va(st, fmt, ap);
	va_end(ap);
	return ret;
}

int store_step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return store_sqlfail(s, rc, sqlite3_sql(st));
}

int store_run(struct store *s, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st;
	va_list ap;
	int ret;

	ret = store_prepare(s, sql, &st);
	if (ret < 0)
		return ret;
	va_start(ap, fmt);
	ret = bind_va(st, fmt, ap);
	va_end(ap);
	while (ret == 0 && (ret = store_step(s, st)) == 1)
		ret = 0;
	if (ret == 0)
		ret = sqlite3_changes(s->db);
	store_reset(st);
	return ret;
}

int store_begin(struct store *s)
{
	int ret = store_run(s, s->batch_open ? "SAVEPOINT store_call" : "BEGIN IMMEDIATE", "");

	return ret < 0 ? ret : 0;
}

/* A call's end inside a batch: its savepoint kept or undone, the batch left open. */
static int end_in_batch(struct store *s, int ret)
{
	int rc;

	if (ret < 0 &&
	    (rc = sqlite3_exec(s->db, "ROLLBACK TO store_call", NULL, NULL, NULL)) != SQLITE_OK)
		store_sqlfail(s, rc, "ROLLBACK TO");
	rc = sqlite3_exec(s->db, "RELEASE store_call", NULL, NULL, NULL);
	if (rc != SQLITE_OK && ret >= 0)
		ret = store_sqlfail(s, rc, "RELEASE");
	/* An I/O error can end the whole transaction: the batch's calls then commit alone. */
	if (sqlite3_get_autocommit(s->db))
		s->batch_open = false;
	return ret;
}

int store_end(struct store *s, int ret)
{
	int rc;

	if (s->batch_open)
		return end_in_batch(s, ret);
	if (ret < 0) {
		if (!sqlite3_get_autocommit(s->db) &&
		    (rc = sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL)) != SQLITE_OK)
			store_sqlfail(s, rc, "ROLLBACK");
		return ret;
	}
	rc = store_run(s, "COMMIT", "");
	if (rc < 0) {
		/* A failed COMMIT leaves the transaction open; close it. */
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return ret;
}

void store_batch_begin(struct store *s)
{
	store_lock(s);
	if (s->batch_depth++ == 0)
		s->batch_began = s->batch_open = store_run(s, "BEGIN IMMEDIATE", "") >= 0;
}

int store_batch_end(struct store *s)
{
	bool open = s->batch_open;
	int ret = 0;

	if (--s->batch_depth == 0 && s->batch_began) {
		s->batch_began = s->batch_open = false;
		/* Not open: an I/O error ended it early (logged then), and took its writes. */
		ret = open && !sqlite3_get_autocommit(s->db) ? store_end(s, 0) : -EIO;
	}
	store_unlock(s);
	return ret < 0 ? ret : 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nstmts; i++)
		sqlite3_finalize(s->stmts[i].st);
	if (s->db && sqlite3_close(s->db) != SQLITE_OK)
		store_logf(s, "close: %s", sqlite3_errmsg(s->db));
	pthread_mutex_destroy(&s->lock);
	free(s);
}
