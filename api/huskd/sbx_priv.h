/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_PRIV_H
#define HUSK_SBX_PRIV_H

/* The sandbox object, shared by sbx.c, sbx_create.c and sbx_exec.c only. */
#include "huskd.h"
#include "store.h"

struct agent_client;
struct vmm_proc;
struct vmm_spec;

struct ready_cb {
	void (*fn)(struct sandbox *sb, bool ready, void *arg);
	void *arg;
	struct ready_cb *next;
};

struct sandbox {
	struct huskd *d;
	char id[STORE_ID_LEN];
	char status[16];
	char *dir;   /* state/sandboxes/<id> */
	char *vsock; /* its VMM's vsock socket */
	struct vmm_proc *vmm;
	struct execution *current; /* the one execution at a time */
	json_t *env;               /* the sandbox's environment (create + setEnv) */
	json_t *files;             /* files to write during setup (create) */
	uint64_t exec_timeout_ms;  /* timeout.execution; 0 none */
	uint64_t idle_ms;          /* timeout.idle: reaped after this long idle; 0 never */
	uint64_t paused_ms;        /* timeout.paused: terminated after this long paused; 0 never */
	uv_timer_t *idle;          /* its timer (closed and freed apart from the sandbox) */
	struct ready_cb *waiting;  /* to run once setup ends */
	bool oneshot;
	bool ready;         /* setup done: the agent answers */
	bool setup_running; /* the setup task has not come back yet */
	bool ending;        /* destroy/terminate under way: the VMM's exit is expected */
	bool vmm_gone;
	bool pausing, resuming; /* a pause or resume task is under way (sbx_pause.c) */
	bool on_disk;           /* paused: its memory in dir/memory.snap, no VMM running */
	bool restoring;         /* a checkpoint is being made or restored (sbx_ckpt.c) */
	unsigned held;          /* a callback runs that may end it: not freed until it returns */
	/* What a VMM for it is started with (again, on resume). */
	uint64_t mem_mib;
	unsigned vcpus;
	int64_t cpu_millis; /* its cgroup's quota once ready (sbx_cpu_limit) */
	char *layer, *cgroup;
	char *base;                   /* the image its layers sit on (runtime or snapshot) */
	char base_snap[STORE_ID_LEN]; /* the snapshot that base is, "" for a runtime */
	struct sandbox *next;
};

struct sandbox *sbx_new(struct huskd *d, const char *id);
int sbx_start_vmm(struct sandbox *sb, const struct vmm_spec *spec, char *err, size_t errlen);
/* Ends a live sandbox: status (terminated, deleted, failed), cancel, kill, then free. */
void sbx_end(struct sandbox *sb, const char *status, const char *reason, json_t *patch);
/* Frees the sandbox once its VMM, setup and execution are all gone. */
void sbx_maybe_free(struct sandbox *sb);
/* Restarts the idle countdown (the sandbox just became idle). */
void sbx_idle_arm(struct sandbox *sb);
/* Unlinks and frees at once (a sandbox that never got a VMM). */
void sbx_free(struct sandbox *sb);
/* Removes a sandbox's folder and what huskd keeps in it. */
void sbx_remove_dir(const char *dir);
/* Writes [{path, content: base64}] into the sandbox (relative paths: the workspace). */
int sbx_write_files(struct agent_client *c, json_t *files, char *err, size_t errlen);
/* Setup failed or the sandbox ended before it was ready: tell who waited. */
void sbx_ready_fail(struct sandbox *sb);
/* The sandbox is ready (again): run who waited. */
void sbx_ready_run(struct sandbox *sb);
/* (Re)starts the sandbox's one timer (idle or paused countdown) with fn after ms. */
void sbx_timer_start(struct sandbox *sb, uv_timer_cb fn, uint64_t ms);
void sbx_timer_stop(struct sandbox *sb);
/* The VMM spec of the sandbox (with restore: start from that snapshot). */
void sbx_vmm_spec(struct sandbox *sb, const char *restore, struct vmm_spec *spec);
/* Called on the loop when a pause or resume that sbx_suspend/unsuspend began ends. */
typedef void (*sbx_then_fn)(struct sandbox *sb, int rc, const char *err, void *arg);
/* Pauses an idle sandbox to disk (its VMM ends) / resumes one from disk, then calls then. */
int sbx_suspend(struct sandbox *sb, const char *reason, sbx_then_fn then, void *arg);
int sbx_unsuspend(struct sandbox *sb, const char *reason, sbx_then_fn then, void *arg);
/* Sets (limited) or lifts the cgroup's cpu quota (sbx_create.c): lifted while it starts. */
void sbx_cpu_limit(struct sandbox *sb, bool limited);
/* Starts the setup task (sbx_setup.c; steals files); restored: resumed from a snapshot. */
int sbx_setup_start(struct sandbox *sb, json_t *files, bool restored);
/* Boots a fresh VMM on the sandbox's layer and sets it up (sbx_setup.c); ready after. */
int sbx_boot(struct sandbox *sb, char *err, size_t errlen);
/* The live sandbox id, or NULL after answering 404 or 409 (sbx_pause.c). */
struct sandbox *sbx_live(struct huskd *d, struct http_req *r, const char *id);
/* The live sandbox, idle or paused to disk, or NULL after answering 404/409 (what: "…are made"). */
struct sandbox *sbx_quiet(struct huskd *d, struct http_req *r, const char *id, const char *what);
/* What a new sandbox's layer goes on: a runtime, or a snapshot (and its runtime). */
struct sbx_base {
	json_t *rt, *rt_priv;     /* the runtime */
	json_t *snap, *snap_priv; /* the snapshot, NULL for none */
	const char *path;         /* the image */
};
/* From POST /sandbox's runtime, runtimeId or snapshot: 0, or an HTTP status and err. */
int sbx_base_find(struct huskd *d, json_t *body, struct sbx_base *b, char *err, size_t errlen);
void sbx_base_free(struct sbx_base *b);
/* Records the base in the new sandbox, its public ("snapshot") and private objects. */
void sbx_base_apply(struct sandbox *sb, const struct sbx_base *b, json_t *pub, json_t *priv);
/* The snapshot's memory file if a VM of this shape can resume from it, else NULL. */
const char *sbx_base_memory(const struct sbx_base *b, uint64_t mem_mib, unsigned vcpus);
/* A snapshot's end: rec (the SnapshotInfo, borrowed) or NULL and why not. */
typedef void (*sbx_snap_done_fn)(struct sandbox *sb, json_t *rec, const char *err, void *arg);
/*
 * Snapshots an idle sandbox as id (sbx_snap.c; the guest synced first):
 * body has name, tag, and optionally description, public, memory (default
 * true), message, userMetadata, files (SnapshotInfo fields) and contentHash,
 * env (kept privately); keepPaused leaves it paused on disk. done runs once
 * it runs again (or is paused, with keepPaused).
 */
int sbx_snapshot_take(struct sandbox *sb, const char *id, json_t *body, int64_t files,
                      sbx_snap_done_fn done, void *arg);
/* Pauses an idle sandbox to disk because it stayed idle (huskd --on-idle pause). */
int sbx_pause_idle(struct sandbox *sb);
/* A paused sandbox is asked for: resume it (sbx_pause.c); waiters run once it is. */
void sbx_wake(struct sandbox *sb);

#endif
