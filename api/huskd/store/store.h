/* SPDX-License-Identifier: MIT */
#ifndef HUSK_STORE_H
#define HUSK_STORE_H

/*
 * huskd's state store: one SQLite database (WAL) holding sandboxes, their
 * events, executions, jobs and disk checkpoints, snapshots and the runtime
 * catalog, so that a restart of huskd loses nothing.
 *
 * Records go in and come out as jansson objects shaped like the `data`
 * objects of api/API.md, so handlers can answer with them directly. Each
 * table keeps a few typed, indexed columns that queries need beside a JSON
 * column with the rest of the object. Two kinds of field:
 *
 *  - descriptive fields (a sandbox's name, mode, runtime, resources; a
 *    snapshot's name, tag, sizes) live in the JSON; the columns that index
 *    them are copies the store takes from the JSON on every write;
 *  - state the store itself maintains (ids, statuses, createdAt and the other
 *    timestamps, the executions counter) lives only in columns and is added
 *    to the JSON when a record is read; such keys in an update are refused.
 *
 * Most records also have a private JSON object, never part of what the API
 * returns, for the manager's own fields. For a sandbox, by convention:
 * "vmmPid", "vmmStartTime" (field 22 of /proc/PID/stat, so that a reused pid
 * is not mistaken for our VMM), "vsockPath", "diskPath", "cgroupPath",
 * "runtime" (name), "resources", "timeouts", "env", "lastActivityMs".
 *
 * Ownership: a json_t passed in is borrowed and not modified; a json_t
 * handed out through an out-parameter is a new reference the caller owns.
 * Errors: functions return 0 or a negative errno: -ENOENT for an unknown
 * record, -EEXIST for a duplicate id or name, -EINVAL for a malformed record
 * or a refused transition, -EBUSY when another process holds the database
 * locked beyond the busy timeout, -ENOSPC, -ENOMEM, and -EIO for any other
 * SQLite failure. Every SQLite failure is also reported through the log
 * callback (store_set_log) with the statement and SQLite's message; nothing
 * aborts.
 *
 * Threads: one connection guarded by one mutex; every call holds it from
 * start to end (its transaction included), so the loop thread and worker
 * threads may share one store. Calls are short indexed queries; the usage
 * query is the only one that scans. The log callback runs with the mutex
 * held and must not call back into the store.
 *
 * Time: columns hold integer milliseconds since the epoch (UTC); the JSON
 * carries ISO 8601 strings with milliseconds ("2026-05-01T12:00:00.000Z").
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* The schema version this code writes; store_open migrates older ones up to it. */
#define STORE_SCHEMA_VERSION 3

/* ---- Opening ------------------------------------------------------------ */

/*
 * Opens (creating if needed, mode 0600: the database holds sandbox
 * environments) the database at path and migrates it to
 * STORE_SCHEMA_VERSION. Refuses, with a sentence in err: a file that is not
 * an SQLite database or fails its integrity check (-EIO), an SQLite database
 * of another application (-EINVAL), one written by a newer huskd (-ENOTSUP).
 */
int store_open(const char *path, struct store **out, char *err, size_t errlen)
	__attribute__((warn_unused_result));
/*
 * Every commit reaches the disk before it returns (synchronous=FULL): for a
 * huskd whose machine is routinely cut off, like the nested VM of
 * tools/husk-up, where a stop is a power loss. 0 or -EIO.
 */
int store_set_durable(struct store *s) __attribute__((warn_unused_result));
/*
 * What was deleted is gone from the files too: deleted rows are overwritten
 * in the database (secure_delete) and the write-ahead log, which still holds
 * their old pages, is checkpointed and cut to nothing. For a deleted data
 * key (keys/keystore.h). 0 or -EIO (the log is in use: done at a later call).
 */
int store_scrub(struct store *s) __attribute__((warn_unused_result));
/*
 * Keeps the database locked for this connection until it closes: no other
 * connection or program reads it meanwhile, and statements take no locks.
 * For huskd, the database's one user.
 */
int store_set_exclusive(struct store *s) __attribute__((warn_unused_result));
/* Closes the database (a checkpoint folds the WAL back in). NULL is fine. */
void store_close(struct store *s);

/*
 * A batch: the calls a thread makes between store_batch_begin and
 * store_batch_end are committed together, once (each still all or nothing
 * on its own, as a savepoint): one log write for what one event changes in
 * several places, where each call would commit its own. The batch holds the
 * store's mutex, so other threads wait; batches nest. A batch that cannot
 * begin leaves each call to commit alone. store_batch_end returns 0, or
 * the commit's -errno (logged; what the batch wrote is then lost).
 */
void store_batch_begin(struct store *s);
int store_batch_end(struct store *s) __attribute__((warn_unused_result));

/*
 * Where store errors go: fn(ctx, message) with one line, no newline. The
 * default prints "huskd: store: message" to stderr.
 */
typedef void (*store_log_fn)(void *ctx, const char *msg);
void store_set_log(struct store *s, store_log_fn fn, void *ctx);

/* The clock used for every timestamp the store writes (tests set it); NULL: store_now_ms. */
typedef int64_t (*store_clock_fn)(void *ctx);
void store_set_clock(struct store *s, store_clock_fn fn, void *ctx);

/* ---- Ids and time --------------------------------------------------------- */

/* Room for any id the store makes or accepts, with its NUL. */
#define STORE_ID_LEN 40

/* Id prefixes of API.md §4.3. */
#define STORE_PFX_SANDBOX "sbx_"
#define STORE_PFX_EXECUTION "exec_"
#define STORE_PFX_JOB "job_"
#define STORE_PFX_SNAPSHOT "snp_"
#define STORE_PFX_CHECKPOINT "ckpt_"
#define STORE_PFX_EVENT "evt_"
#define STORE_PFX_STREAM "str_"

/*
 * Writes prefix + 24 random lowercase base32 characters (120 bits from
 * getrandom) into out: URL-safe, [a-z0-9_] as API.md asks, never reused.
 * -EINVAL if the prefix is longer than 15 characters.
 */
int store_new_id(const char *prefix, char out[STORE_ID_LEN]) __attribute__((warn_unused_result));

/* Milliseconds since the epoch, wall clock. */
int64_t store_now_ms(void);

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" for ms since the epoch; returns buf. */
#define STORE_ISO_LEN 32
char *store_iso8601(int64_t ms, char buf[STORE_ISO_LEN]);

/*
 * Kubernetes-style quantities as API.md §4.2 writes resources: CPU in
 * millicores ("500m" → 500, "1" or "1.0" → 1000) and sizes in bytes
 * ("512Mi", "1Gi", "1G", "4096"). -EINVAL for anything else.
 */
int store_parse_cpu(const char *text, int64_t *millis) __attribute__((warn_unused_result));
int store_parse_bytes(const char *text, int64_t *bytes) __attribute__((warn_unused_result));

/* ---- Statuses ------------------------------------------------------------- */

/* True for the exact lowercase names of API.md §4.1. */
bool store_sandbox_status_valid(const char *status);
bool store_execution_status_valid(const char *status);
bool store_job_status_valid(const char *status);
/* Live: not terminated, failed or deleted (GET /sandbox?live=true). */
bool store_sandbox_status_live(const char *status);

/* ---- Sandboxes ------------------------------------------------------------ */

/*
 * Inserts a sandbox. info is its SandboxInfo (API.md §5.1 (3)) with
 * "sandboxId" (from store_new_id) and optionally "status" (default
 * "creating"); "createdAt" and "executions" are the store's. The list
 * filters read "name", "mode", "runtime"."name", "projectId" (or
 * "project"."id") and "snapshot"."id" from it; usage reads "resources"
 * ("cpu", "memory": -EINVAL if they do not parse), which should be what the
 * sandbox really gets. Fields every answer needs (e.g. "org", required in
 * list items) are best stored here once. priv may be NULL. Writes the
 * "create" event ({"to": status, "runtime": name}) in the same transaction.
 * out (may be NULL) receives the stored SandboxInfo.
 */
int store_sandbox_insert(struct store *s, json_t *info, json_t *priv, json_t **out)
	__attribute__((warn_unused_result));

/* The SandboxInfo and/or the private object of a sandbox (deleted ones too); either may be NULL. */
int store_sandbox_get(struct store *s, const char *id, json_t **info, json_t **priv)
	__attribute__((warn_unused_result));

/*
 * Merges patch into the sandbox's public object and priv_patch into its
 * private one (RFC 7396: null deletes a key, objects merge), either may be
 * NULL. -EINVAL if patch names sandboxId, status, createdAt or executions:
 * a status changes only through store_sandbox_transition, with its event.
 * out (may be NULL) receives the updated SandboxInfo.
 */
int store_sandbox_update(struct store *s, const char *id, json_t *patch, json_t *priv_patch,
                         json_t **out) __attribute__((warn_unused_result));

/* A status change and what goes with it, written in one transaction. */
struct store_transition {
	const char *status;     /* the new status (required) */
	const char *event_type; /* NULL: derived, e.g. "pause", "lifecycle:failed" */
	json_t *event;          /* fields added to the event's payload, or NULL */
	json_t *patch;          /* merged into the public object, or NULL (e.g. exitCode) */
	json_t *priv_patch;     /* merged into the private object, or NULL */
};

/*
 * Moves a sandbox to t->status and appends the event recording it, whose
 * payload is {"from", "to"} plus t->event. The derived event types: "create"
 * (insert), "lifecycle:started" (creating → idle/running), "lifecycle:idle",
 * "lifecycle:running" (between those two), "pause", "resume" (from paused or
 * suspended), "lifecycle:suspended", "lifecycle:stopping",
 * "lifecycle:terminated", "lifecycle:failed", "destroy" (→ deleted).
 * The same status again changes nothing and writes no event (the patches
 * still apply). -EINVAL for an unknown status, any move out of "deleted", and
 * moves out of "terminated"/"failed" other than to "deleted"; -ENOENT for an
 * unknown sandbox. out (may be NULL) receives the SandboxInfo after the move.
 */
int store_sandbox_transition(struct store *s, const char *id, const struct store_transition *t,
                             json_t **out) __attribute__((warn_unused_result));

/* store_sandbox_transition with a payload {"reason": reason} (reason may be NULL). */
int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason) __attribute__((warn_unused_result));

enum store_tristate { STORE_ANY = 0, STORE_ONLY, STORE_EXCLUDE };
enum store_deleted { STORE_DELETED_HIDE = 0, STORE_DELETED_INCLUDE, STORE_DELETED_ONLY };

/* GET /sandbox's query (API.md §5.1 (2)); zero means "no filter" / the default. */
struct store_sandbox_filter {
	const char *name, *mode, *project_id, *snapshot_id, *runtime, *status;
	const char *org_id;         /* the caller's org; NULL: every org (huskd's own sweeps) */
	enum store_tristate live;   /* ONLY: live=true, EXCLUDE: live=false */
	enum store_deleted deleted; /* includeDeleted, deletedOnly; a status filter overrides it */
	const char *sort; /* name|created|updated|status|mode|execution_count; NULL: created */
	bool ascending;   /* default: descending */
	int limit;        /* <= 0: all (the API applies its default of 50 and max of 100) */
	int offset;
};

/*
 * The data object of GET /sandbox: {"sandboxes": [SandboxInfo...], "total": N}
 * with total counted before paging. -EINVAL for an unknown sort field or status.
 */
int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f, json_t **out)
	__attribute__((warn_unused_result));

/*
 * The sandboxes that should have a VMM (live statuses), for adoption after a
 * restart: an array of {"sandboxId", "status", "private": {...}}, oldest
 * first. Each one is then adopted, or moved to "failed" with a reason.
 */
int store_sandboxes_live(struct store *s, json_t **out) __attribute__((warn_unused_result));

/*
 * Removes a sandbox and everything that hangs off it (events, executions,
 * jobs, checkpoints) for good: the retention sweep, not DELETE /sandbox.
 */
int store_sandbox_purge(struct store *s, const char *id) __attribute__((warn_unused_result));

/* ---- Events ------------------------------------------------------------- */

/*
 * Appends an event that is not a status change (status changes write their
 * own): type is free (API.md §4.1), payload an object or NULL for {}.
 * out_id (may be NULL) receives the event's id.
 */
int store_event_append(struct store *s, const char *sandbox_id, const char *type, json_t *payload,
                       char out_id[STORE_ID_LEN]) __attribute__((warn_unused_result));

/*
 * The data object of GET .../events: {"events": [{eventId, sandboxId, type,
 * event, createdAt}...]}, the oldest limit events (the newest with
 * descending); limit <= 0: all. -ENOENT for an unknown sandbox.
 */
int store_event_list(struct store *s, const char *sandbox_id, int limit, bool descending,
                     json_t **out) __attribute__((warn_unused_result));

/* ---- Executions and jobs -------------------------------------------------- */

/*
 * Inserts an execution: exec is its ExecutionInfo (API.md §5.2 (10)) with
 * "executionId", "sandboxId" and "status" (default "queued"). Counts it in
 * the sandbox's "executions". -ENOENT for an unknown sandbox.
 */
int store_execution_insert(struct store *s, json_t *exec, json_t *priv)
	__attribute__((warn_unused_result));
/* ExecutionInfo and/or private object; either may be NULL. */
int store_execution_get(struct store *s, const char *id, json_t **exec, json_t **priv)
	__attribute__((warn_unused_result));
/*
 * Moves an execution to status (NULL: unchanged) and merges the patches.
 * Becoming "running" sets startedAt; becoming terminal sets completedAt and,
 * unless the patch has one, durationMs. -EINVAL for an unknown status, a
 * move out of a terminal status, or a patch naming executionId, sandboxId,
 * status, startedAt or completedAt. out may be NULL.
 */
int store_execution_update(struct store *s, const char *id, const char *status, json_t *patch,
                           json_t *priv_patch, json_t **out) __attribute__((warn_unused_result));
/* {"executions": [...]} of a sandbox, newest first; limit <= 0: all. -ENOENT: unknown sandbox. */
int store_execution_list(struct store *s, const char *sandbox_id, int limit, json_t **out)
	__attribute__((warn_unused_result));

/* The same for jobs (API.md §5.4): "jobId", "sandboxId", "status" (default "pending"). */
int store_job_insert(struct store *s, json_t *job, json_t *priv)
	__attribute__((warn_unused_result));
/* sandbox_id may be NULL; if given, a job of another sandbox is -ENOENT. */
int store_job_get(struct store *s, const char *sandbox_id, const char *id, json_t **job,
                  json_t **priv) __attribute__((warn_unused_result));
int store_job_update(struct store *s, const char *id, const char *status, json_t *patch,
                     json_t *priv_patch, json_t **out) __attribute__((warn_unused_result));
/* {"jobs": [...]}, newest first. */
int store_job_list(struct store *s, const char *sandbox_id, int limit, json_t **out)
	__attribute__((warn_unused_result));

/*
 * *out = the ids of the output streams of every execution and job of the sandboxes
 * deleted in [from_ms, to_ms) (a JSON array of strings; the caller frees it).
 */
int store_streams_of_deleted(struct store *s, int64_t from_ms, int64_t to_ms, json_t **out)
	__attribute__((warn_unused_result));

/*
 * After a restart, for a sandbox whose commands huskd can no longer follow:
 * its queued/running executions become "failed" (exitCode 1 unless they had
 * one) and, with jobs, its pending/running jobs "failed", each with error =
 * reason, in one transaction. *count (may be NULL) gets how many records
 * changed.
 */
int store_abandon_unfinished(struct store *s, const char *sandbox_id, const char *reason, bool jobs,
                             int *count) __attribute__((warn_unused_result));

/* ---- Runtimes ------------------------------------------------------------- */

/*
 * Makes the runtimes table the catalog build/images/runtimes/catalog.json
 * ({"runtimes": [...], "total"}), in one transaction: upserts every entry by
 * id, removes runtimes the catalog no longer has. The public object is the
 * entry without "image"; the private object is the entry's "image" plus
 * "path", its "file" resolved against the catalog's directory (absolute).
 * -EINVAL (with err) for a malformed catalog, -EEXIST for a name used twice.
 */
int store_runtimes_load(struct store *s, const char *catalog_path, char *err, size_t errlen)
	__attribute__((warn_unused_result));
/* The same from a parsed catalog; image paths resolve against dir (may be NULL). */
int store_runtimes_upsert(struct store *s, json_t *catalog, const char *dir, char *err,
                          size_t errlen) __attribute__((warn_unused_result));
/* A Runtime (API.md §5.6) by name ("bun:1") or id ("srt_bun1"); either out may be NULL. */
int store_runtime_get(struct store *s, const char *name_or_id, json_t **rt, json_t **priv)
	__attribute__((warn_unused_result));
/*
 * An imported runtime (sbx_import.c): entry is the public object with "id"
 * and "name", priv has "path" and "imported": true, which keeps it when the
 * catalog is loaded again. -EEXIST if the id or name is taken.
 */
int store_runtime_add(struct store *s, json_t *entry, json_t *priv)
	__attribute__((warn_unused_result));
/* Removes a runtime's row (by id); -ENOENT if there is none. */
int store_runtime_delete(struct store *s, const char *id) __attribute__((warn_unused_result));
/* Sandboxes not deleted and snapshots that sit on the runtime (by id or name). */
int store_runtime_users(struct store *s, const char *id, const char *name, int64_t *sandboxes,
                        int64_t *snapshots) __attribute__((warn_unused_result));
/* {"runtimes": [...], "total": N}; sort "name" (default) or "created". -EINVAL: other sort. */
int store_runtime_list(struct store *s, const char *sort, bool descending, int limit, int offset,
                       json_t **out) __attribute__((warn_unused_result));

/* ---- Snapshots ------------------------------------------------------------ */

/*
 * Inserts a snapshot: info is its SnapshotInfo (API.md §5.8) with
 * "snapshotId", "name", "sizeBytes", "fileCount", and optionally "tag",
 * "parentSnapshotId", "runtimeId", "public", and "sandboxId" (the sandbox it
 * was taken from: a list filter, kept in the object). A tag is unique per
 * name: giving one moves it from the snapshot that had it.
 */
int store_snapshot_insert(struct store *s, json_t *info, json_t *priv)
	__attribute__((warn_unused_result));
/* SnapshotInfo and/or private object of a snapshot that is not deleted. */
int store_snapshot_get(struct store *s, const char *id, json_t **info, json_t **priv)
	__attribute__((warn_unused_result));
/*
 * Resolves what POST /sandbox's "snapshot" may hold: an id ("snp_…"),
 * "name:tag", a name (its newest snapshot) or a tag (the newest with it),
 * among what org sees: its own snapshots, then public ones (org NULL: the
 * public ones only).
 */
int store_snapshot_find(struct store *s, const char *org, const char *ref, json_t **info,
                        json_t **priv) __attribute__((warn_unused_result));
/*
 * Merges patches (RFC 7396). {"tag": null} clears the tag, {"tag": "x"} moves
 * tag x here. -EINVAL if patch names snapshotId or createdAt. out may be NULL.
 */
int store_snapshot_update(struct store *s, const char *id, json_t *patch, json_t *priv_patch,
                          json_t **out) __attribute__((warn_unused_result));
/* Marks deleted: gone from get, find and list, still shown in lineage with "deleted": true. */
int store_snapshot_delete(struct store *s, const char *id) __attribute__((warn_unused_result));

struct store_snapshot_filter {
	const char *sandbox_id; /* NULL: all */
	const char *org_id;     /* that org's only; NULL: every org's */
	bool public_only;
	const char *sort; /* name|created|size|files; NULL: created */
	bool ascending;   /* default: descending */
	int limit;        /* <= 0: all */
	int offset;
};
/* {"snapshots": [...], "total": N}. -EINVAL for an unknown sort field. */
int store_snapshot_list(struct store *s, const struct store_snapshot_filter *f, json_t **out)
	__attribute__((warn_unused_result));
/*
 * {"lineage": [...], "total": N}: the snapshot, then its parent, … to the
 * root (at most limit entries; limit <= 0: all); deleted ancestors are
 * included with "deleted": true, "public" is always present.
 */
int store_snapshot_lineage(struct store *s, const char *id, int limit, json_t **out)
	__attribute__((warn_unused_result));

/*
 * [{"id", "private"}] of the deleted snapshots whose files nothing needs any
 * more: no live sandbox started from or taken as it, no child whose files
 * are kept. Remove their files, then store_snapshot_purge each.
 */
int store_snapshot_unused(struct store *s, json_t **out) __attribute__((warn_unused_result));
/* Marks a deleted snapshot's files as removed. */
int store_snapshot_purge(struct store *s, const char *id) __attribute__((warn_unused_result));

/* ---- Disk checkpoints ----------------------------------------------------- */

/*
 * Inserts a checkpoint of a sandbox: ckpt is {"id", "name", "parent"} (API.md
 * §5.7; parent defaults to ""). -EEXIST if the sandbox has one of that name,
 * -ENOENT for an unknown sandbox.
 */
int store_checkpoint_insert(struct store *s, const char *sandbox_id, json_t *ckpt, json_t *priv)
	__attribute__((warn_unused_result));
/* A checkpoint of the sandbox by id or by name. */
int store_checkpoint_get(struct store *s, const char *sandbox_id, const char *id_or_name,
                         json_t **ckpt, json_t **priv) __attribute__((warn_unused_result));
/* {"checkpoints": [...]}, oldest first. -ENOENT for an unknown sandbox. */
int store_checkpoint_list(struct store *s, const char *sandbox_id, json_t **out)
	__attribute__((warn_unused_result));
/* Removes a checkpoint by id or name. */
int store_checkpoint_delete(struct store *s, const char *sandbox_id, const char *id_or_name)
	__attribute__((warn_unused_result));

/* ---- Orgs and API keys ------------------------------------------------------ */

/* What existed before tenants, and the keys huskd makes at first start, belong here. */
#define STORE_DEFAULT_ORG "org_local"
#define STORE_DEFAULT_ORG_NAME "local"
#define STORE_PFX_ORG "org_"
#define STORE_PFX_KEY "key_"

/*
 * The id of the org called name into id; with create, an org that does not
 * exist is made (a new id). -ENOENT without create for an unknown name.
 */
int store_org_find(struct store *s, const char *name, bool create, char id[STORE_ID_LEN])
	__attribute__((warn_unused_result));
/* The name of the org whose id is id into name (len bytes): 0 or -ENOENT. */
int store_org_name(struct store *s, const char *id, char *name, size_t len)
	__attribute__((warn_unused_result));

/*
 * Records a key: hash is the hex SHA-256 of the key (the key itself is never
 * stored), role "admin", "member" or "read-only", name free text or NULL.
 * -ENOENT for an unknown org, -EEXIST for a hash already recorded.
 */
int store_key_insert(struct store *s, const char *id, const char *org_id, const char *role,
                     const char *hash, const char *name) __attribute__((warn_unused_result));
/*
 * The keys not revoked, oldest first: [{"id", "orgId", "orgName", "role",
 * "name", "createdAt", "hash"}...].
 */
int store_keys_active(struct store *s, json_t **out) __attribute__((warn_unused_result));
/* Marks a key revoked (it stops working at once); -ENOENT if unknown or revoked. */
int store_key_revoke(struct store *s, const char *id) __attribute__((warn_unused_result));

/* ---- Audit trail ------------------------------------------------------------ */

struct store_audit {
	const char *org_id, *key_id;
	const char *action;     /* "POST /sandbox/:id/execute" */
	const char *target;     /* the path it was asked for */
	const char *sandbox_id; /* the sandbox it is about, or NULL */
	int status;             /* the HTTP status it was answered with */
};
#define STORE_PFX_AUDIT "aud_"
/*
 * Appends a record to its org's chain: {"seq", "orgId", "keyId", "action",
 * "target", "sandboxId", "status", "createdAt", "prev", "hash"} with hash the
 * hex SHA-256 of store_audit_text() and prev the org's last record's hash
 * ("" for its first).
 */
int store_audit_append(struct store *s, const struct store_audit *a)
	__attribute__((warn_unused_result));
/*
 * An org's records oldest first, from after_seq on (0: the start), at most
 * limit (<= 0: all), only those about sandbox_id if not NULL: {"records": [...]}.
 */
int store_audit_list(struct store *s, const char *org, const char *sandbox_id, int64_t after_seq,
                     int limit, json_t **out) __attribute__((warn_unused_result));
/*
 * Walks org's whole chain: *count records, *broken the seq of the first whose
 * hash or link does not hold (0: none).
 */
int store_audit_verify(struct store *s, const char *org, int64_t *count, int64_t *broken)
	__attribute__((warn_unused_result));
/*
 * The text a record's hash is taken of (also for verifiers outside huskd):
 * "seq|org|key|action|target|sandbox|status|createdMs|prev", sandbox "" for
 * none. Writes at most len bytes; returns the length it needs.
 */
int store_audit_text(char *buf, size_t len, int64_t seq, const struct store_audit *a,
                     int64_t created_ms, const char *prev);

/* ---- Usage ---------------------------------------------------------------- */

/*
 * Usage over the window [from_ms, to_ms), from the sandboxes' status events
 * and their executions: time alive (idle or running) clipped to the window,
 * so a sandbox that started before it or is still running counts only its
 * part inside; an interval still open ends at the store's clock. Returns
 *   {"from", "to",
 *    "sandboxes": [{"sandboxId", "aliveMs", "executions", "execMs",
 *                   "cpuAllocatedMs", "memoryAllocatedByteSec"}...],
 *    "total": {"sandboxes", "aliveMs", "executions", "execMs",
 *              "cpuAllocatedMs", "memoryAllocatedByteSec"}}
 * with "executions" the executions started in the window, "execMs" the
 * part of every execution's run time inside it, cpuAllocatedMs = CPUs
 * (resources.cpu) × aliveMs and memoryAllocatedByteSec = bytes
 * (resources.memory) × alive seconds. Sandboxes with nothing in the window
 * are left out; purged ones are gone. -EINVAL if to_ms < from_ms. org: that
 * org's sandboxes only (NULL: every org's).
 */
int store_usage(struct store *s, const char *org, int64_t from_ms, int64_t to_ms, json_t **out)
	__attribute__((warn_unused_result));

#endif
