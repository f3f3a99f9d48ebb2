/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HUSKD_H
#define HUSK_HUSKD_H

/*
 * huskd's shared state. Everything here lives on the event loop thread;
 * blocking work (the agent, disk images) runs in tasks (task.h) that hand
 * their results back to the loop.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "http.h"
#include "store.h"
#include "task.h"

struct sandbox;
/* The sandbox's working folder: relative paths in the API are under it. */
#define WORKSPACE "/home/agentuity"

struct execution;
struct waiter;

struct huskd {
	uv_loop_t *loop;
	struct store *store;
	struct task_runner *tasks;
	struct http_server *http;
	char *state;           /* state folder: huskd.db, sandboxes/, streams/, api-keys */
	char *streams;         /* captured output, one file per stream */
	char *vmm;             /* husk-vmm */
	char *kernel;          /* guest bzImage */
	char *initrd;          /* guest initramfs */
	char *public_url;      /* base of stream URLs; NULL: from each request's Host */
	char **keys;           /* accepted API keys, NULL-terminated */
	uint64_t output_limit; /* bytes kept per output stream */
	bool cgroups;          /* cpu.max can be set (cgroup v2 writable) */
	bool idle_pause;       /* --on-idle pause: timeout.idle pauses instead of terminating */
	char *cgroup_root;
	struct sandbox *sandboxes; /* the ones with a VMM (or about to have one) */
	struct waiter *waiters;    /* held long-polls */
};

/* Logs a line to stderr with a timestamp (and a sandbox id where there is one). */
void huskd_log(const char *sandbox_id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- sandboxes (sbx.c) ---- */

/* A live sandbox by id, or NULL. */
struct sandbox *sbx_find(struct huskd *d, const char *id);
const char *sbx_id(const struct sandbox *sb);

/*
 * Creates a sandbox from a POST /sandbox body: checks it, makes the layer,
 * starts the VMM. Returns 0 with the stored SandboxInfo in *info, or an
 * HTTP status with a message in err (and *code an API error code or NULL).
 */
int sbx_create(struct huskd *d, json_t *body, json_t **info, struct sandbox **out, char *err,
               size_t errlen);
/* DELETE: stops everything and marks it deleted. */
int sbx_destroy(struct huskd *d, const char *id, char *err, size_t errlen);
/* Moves a sandbox to status (with its event) and wakes long-polls. */
int sbx_transition(struct huskd *d, const char *id, const char *status, const char *reason,
                   json_t *patch);
/* huskd stops: lets go of a sandbox without touching its VMM (adopted at the next start). */
void sbx_forget(struct sandbox *sb);
/* After a restart: adopts the VMMs still running, fails the rest. */
void sbx_adopt_all(struct huskd *d);
/* POST /sandbox/{id}/pause and /resume: answer r themselves (sbx_pause.c). */
void sbx_pause(struct huskd *d, struct http_req *r, const char *id);
void sbx_resume(struct huskd *d, struct http_req *r, const char *id);
/* Disk checkpoints (sbx_ckpt.c): answer r themselves. */
void sbx_checkpoint_create(struct huskd *d, struct http_req *r, const char *id, const char *name);
void sbx_checkpoint_restore(struct huskd *d, struct http_req *r, const char *id, const char *ref);
/* POST /sandbox/{id}/snapshot with a checked body (sbx_snap.c). */
void sbx_snapshot_create(struct huskd *d, struct http_req *r, const char *id, json_t *body);
/* Marks it deleted, removes its files unless something is built on them; *out: the reply. */
int sbx_snapshot_delete(struct huskd *d, const char *ref, json_t **out);
/* Removes the files of deleted snapshots nothing is built on any more. */
void snap_gc(struct huskd *d);
/* Paused (or pausing): a request that needs the guest resumes it first. */
bool sbx_paused(const struct sandbox *sb);
/* Runs fn(sb, arg) once the sandbox is ready (now if it is), or with ready=false if it failed. */
void sbx_when_ready(struct sandbox *sb, void (*fn)(struct sandbox *sb, bool ready, void *arg),
                    void *arg);
/* The sandbox's current execution (busy), or NULL; set/cleared by sbx_exec.c. */
struct execution *sbx_current(const struct sandbox *sb);
void sbx_set_current(struct sandbox *sb, struct execution *e);

/* ---- executions (sbx_exec.c) ---- */

/*
 * Starts argv in the sandbox (once it is ready). Creates the execution
 * record and its streams; *exec gets the ExecutionInfo to answer with.
 * timeout_ms 0: the sandbox's default. Returns 0 or an HTTP status (409
 * busy ...) with err.
 */
int exec_start(struct huskd *d, struct sandbox *sb, json_t *argv, json_t *files,
               uint64_t timeout_ms, json_t *stream, const char *base, json_t **exec, char *err,
               size_t errlen);
/* Cancels the sandbox's running execution (destroy, VMM exit): it ends "cancelled". */
void exec_cancel(struct execution *e, const char *why);
/* Serves GET /streams/:id. */
void exec_serve_stream(struct huskd *d, struct http_req *r, const char *stream_id);

/* ---- long-polls (waiters.c) ---- */

/* Holds r until the sandbox's status is in set (comma-separated) or ms pass; answers the status. */
void wait_status(struct huskd *d, struct http_req *r, const char *sandbox_id, const char *set,
                 uint64_t ms);
/* Holds r until the execution is terminal or ms pass; answers the execution. */
void wait_execution(struct huskd *d, struct http_req *r, const char *exec_id, uint64_t ms);
/* Something about id (a sandbox or an execution) changed: answer who waited for it. */
void wait_kick(struct huskd *d, const char *id);
void wait_drop_all(struct huskd *d);

/* ---- helpers (util) ---- */

/* "250ms", "5m", "1h30m", "0s" → milliseconds; -EINVAL if it is not a Go duration. */
int parse_duration_ms(const char *s, uint64_t *ms);
/* The public base URL for stream links ("http://host:port"), from config or the request. */
int base_url(struct huskd *d, struct http_req *r, char *out, size_t outlen);

#endif
