/* SPDX-License-Identifier: MIT */
#ifndef HUSK_STORE_INT_H
#define HUSK_STORE_INT_H

/*
 * Shared by the store's files, not by its users. Everything named store_*
 * here expects the store's mutex to be held (see store.h, Threads).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "store.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Prepared statements kept for reuse, keyed by their SQL's address. */
#define STORE_MAX_STMTS 128

struct store {
	sqlite3 *db;
	pthread_mutex_t lock;
	store_log_fn log;
	void *log_ctx;
	store_clock_fn clock;
	void *clock_ctx;
	/* store_batch_begin's nesting; whether its transaction began, and is still open. */
	unsigned batch_depth;
	bool batch_began, batch_open;
	unsigned nstmts;
	struct {
		const char *sql;
		sqlite3_stmt *st;
	} stmts[STORE_MAX_STMTS];
};

void store_lock(struct store *s);
void store_unlock(struct store *s);
void store_logf(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The store's clock, in ms. */
int64_t store_clock(struct store *s);

/* An SQLite result code as a negative errno (store.h, Errors). */
int store_errno(int rc);
/* Logs "what: SQLite's message" (not for constraint violations: those are the caller's) and maps
 * rc. */
int store_sqlfail(struct store *s, int rc, const char *what);

/*
 * The cached statement for sql, which must be a string with static storage
 * (its address is the key). Give it back with store_reset after use.
 */
int store_prepare(struct store *s, const char *sql, sqlite3_stmt **out)
	__attribute__((warn_unused_result));
void store_reset(sqlite3_stmt *st);
/* A one-off statement (built at run time); sqlite3_finalize it. */
int store_prepare_once(struct store *s, const char *sql, sqlite3_stmt **out)
	__attribute__((warn_unused_result));

/* Binds from index 1 on: 't' const char * (NULL binds NULL), 'i' int64_t (STORE_NULL binds NULL),
 * 'j' json_t * (as compact text; NULL binds NULL). */
#define STORE_NULL INT64_MIN
int store_bind(sqlite3_stmt *st, const char *fmt, ...) __attribute__((warn_unused_result));
/* 1 for a row, 0 when done, or -errno (logged). */
int store_step(struct store *s, sqlite3_stmt *st) __attribute__((warn_unused_result));
/* Runs a cached statement with store_bind arguments to its end: rows changed, or -errno. */
int store_run(struct store *s, const char *sql, const char *fmt, ...)
	__attribute__((warn_unused_result));

/* Write transactions (BEGIN IMMEDIATE). store_end commits if ret >= 0, else rolls back; returns ret
 * or the commit's error. */
int store_begin(struct store *s) __attribute__((warn_unused_result));
int store_end(struct store *s, int ret) __attribute__((warn_unused_result));

/* The schema: checks and migrates (store_schema.c). */
int store_migrate(struct store *s, char *err, size_t errlen) __attribute__((warn_unused_result));

/* ---- Helpers (store_util.c) ---- */

/* True if s (may be NULL) is one of the NULL-terminated list. */
bool store_str_in(const char *s, const char *const *list);

/* The JSON object in a column, or NULL (logged as corruption) if it is not one. */
json_t *store_col_json(struct store *s, sqlite3_stmt *st, int col);
/* A column's text, or NULL. */
const char *store_col_text(sqlite3_stmt *st, int col);
/*
 * Reads the first row of sql, whose parameters are a and, if it has a
 * second, b: *obj = row(...) and *priv = the object in column priv_col;
 * either out may be NULL. -ENOENT without a row, -EIO for a bad row.
 */
int store_read_row(struct store *s, const char *sql, const char *a, const char *b,
                   json_t *(*row)(struct store *s, sqlite3_stmt *st), int priv_col, json_t **obj,
                   json_t **priv) __attribute__((warn_unused_result));
/*
 * The first column of sql's first row as text into out (len bytes; "" for
 * NULL); sql has one parameter, arg, or none (arg NULL). -ENOENT without a row.
 * The caller holds the lock.
 */
int store_read_text(struct store *s, const char *sql, const char *arg, char *out, size_t len)
	__attribute__((warn_unused_result));
/* store_read_row with up to three parameters. */
int store_read_row3(struct store *s, const char *sql, const char *a, const char *b, const char *c,
                    json_t *(*row)(struct store *s, sqlite3_stmt *st), int priv_col, json_t **obj,
                    json_t **priv) __attribute__((warn_unused_result));
/*
 * The JSON objects in columns 0 and 1 of the row sql (whose one parameter is
 * id) returns; either out may be NULL. -ENOENT without a row, -EIO if a
 * column does not hold an object.
 */
int store_read_objects(struct store *s, const char *sql, const char *id, json_t **a, json_t **b)
	__attribute__((warn_unused_result));
/* RFC 7396 merge of patch into target, in place; patch values are deep-copied. */
int store_json_patch(json_t *target, json_t *patch) __attribute__((warn_unused_result));
/* A shallow copy of obj without the NULL-terminated keys; NULL if obj is not an object. */
json_t *store_json_without(json_t *obj, const char *const *keys);
/* True if obj has any of the NULL-terminated keys. */
bool store_json_has_any(json_t *obj, const char *const *keys);
/* obj[key] if it is a string, else NULL. */
const char *store_json_str(json_t *obj, const char *key);
/* Sets obj[key] to the ISO 8601 form of ms. */
int store_json_set_time(json_t *obj, const char *key, int64_t ms)
	__attribute__((warn_unused_result));
/* {key: array} as the list endpoints answer, taking the array's reference. */
json_t *store_json_wrap(const char *key, json_t *array);

/*
 * One page of a list and the count before paging: {key: [row(...)...],
 * "total": N}. Takes the store's lock itself. The statements are built at
 * run time: table, columns, where (" AND ..." clauses or "") and order come
 * from the store's own strings, never from a request; the values are the
 * text params. -EINVAL if order is NULL (an unknown sort field).
 */
struct store_page {
	const char *table, *columns, *where, *order;
	const char *const *params;
	int nparams;
	bool ascending;
	int limit, offset; /* limit <= 0: all */
	const char *key;
	json_t *(*row)(struct store *s, sqlite3_stmt *st);
};
int store_list_page(struct store *s, const struct store_page *p, json_t **out)
	__attribute__((warn_unused_result));
/*
 * The records of one sandbox: {key: [row(...)...]} from sql, whose
 * parameters are the sandbox's id and, if it has a second, limit (<= 0: all).
 * Takes the store's lock itself. -ENOENT for an unknown sandbox.
 */
int store_list_rows(struct store *s, const char *sql, const char *sandbox_id, int limit,
                    json_t *(*row)(struct store *s, sqlite3_stmt *st), const char *key,
                    json_t **out) __attribute__((warn_unused_result));

/*
 * Every row of sql (no parameters) as row(...) in an array; takes the lock
 * itself. -EIO if a row cannot be read.
 */
int store_rows(struct store *s, const char *sql, json_t *(*row)(struct store *s, sqlite3_stmt *st),
               json_t **out) __attribute__((warn_unused_result));

/* The ORDER BY column for a sort name from a NULL-terminated {name, column} table, or NULL. */
const char *store_sort_column(const char *const (*map)[2], const char *sort);

/* ---- Events (store_event.c) ---- */

/* Appends an event; status is the status it moves to, or NULL for other events. */
int store_event_add(struct store *s, const char *sandbox_id, const char *type, const char *status,
                    json_t *payload, char out_id[STORE_ID_LEN]) __attribute__((warn_unused_result));
/* The event type of a move from → to (from NULL: the insert). */
const char *store_event_type(const char *from, const char *to);
/* 0 if the sandbox exists, -ENOENT if not. */
int store_sandbox_exists(struct store *s, const char *id) __attribute__((warn_unused_result));

#endif
