/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_STORE_H
#define HUSK_TEST_STORE_H

/*
 * Helpers for the state store's unit tests: databases in one temporary
 * directory, a clock the test sets, and the store's log captured instead of
 * printed.
 */
#include <jansson.h>
#include <stdint.h>

#include "store.h"

/* The store's clock in every store tstore_open made; tests move it. */
extern int64_t tstore_now;
/* Where tstore_open sets it: 2026-05-01T12:00:00.000Z. */
#define TSTORE_T0 1777636800000

/* A path in the tests' scratch directory (timg_path), made fresh: no old file, -wal or -shm. */
const char *tstore_path(const char *name);
/*
 * store_open on a fresh path with tstore_now (reset to TSTORE_T0) as clock
 * and the log captured; NULL on failure.
 */
struct store *tstore_open(const char *name);
/* Opens an existing path (reopen after close) the same way; NULL on failure. */
struct store *tstore_reopen(const char *path);
/* The last line the store logged ("" if none), and forgetting it. */
const char *tstore_log(void);
void tstore_log_clear(void);

/* A sandbox with a new id, runtime, 1 CPU and 512Mi; the id goes to id. 0 or -errno. */
int tstore_sandbox(struct store *s, const char *name, char id[STORE_ID_LEN]);
/* Runs sql on the file with a connection of its own (sqlite3 shell style). 0 or -1. */
int tstore_sql(const char *path, const char *sql);
/* Integer or string members, for short CHECKs. */
json_int_t tstore_int(json_t *obj, const char *key);
const char *tstore_str(json_t *obj, const char *key);

#endif
