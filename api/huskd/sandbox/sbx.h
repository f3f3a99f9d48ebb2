/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_H
#define HUSK_SBX_H

/*
 * The sandbox manager: what huskd's routes may call, and all they may call.
 * It never sees an HTTP request or status: a call returns 0 or -errno and
 * fills a typed error (struct sbx_err); one that waits for a sandbox (an
 * agent request, a pause) answers through a callback later instead. Every
 * function runs on the loop thread and every callback runs there.
 *
 * A sandbox's life is the state machine of sbx_state.c (api/huskd/README.md
 * draws it); the manager keeps one agent session per sandbox (the
 * connection its guest's agent dialled in on) and one husk-vmm process.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct store;
struct sbx_mgr;
struct outbuf;

/* What went wrong, by kind; the routes choose the HTTP status and code. */
enum sbx_fault {
	SBX_OK = 0,
	SBX_BAD_INPUT,   /* the request itself is wrong: msg names the field and the fix */
	SBX_NO_SANDBOX,  /* no such sandbox */
	SBX_ENDED,       /* the sandbox has ended (terminated, failed, deleted) */
	SBX_BUSY,        /* it runs a command and takes one at a time */
	SBX_STATE,       /* not in a state for this (paused, pausing, ...) */
	SBX_EXISTS,      /* a name already taken */
	SBX_NOT_FOUND,   /* the thing named (file, checkpoint, snapshot, job, build) */
	SBX_TOO_LARGE,   /* over a size limit */
	SBX_DENIED,      /* the guest refused for permissions */
	SBX_NO_SPACE,    /* the guest's disk is full */
	SBX_STEP_FAILED, /* a command the manager ran in the sandbox failed (build, archive) */
	SBX_UNREACHABLE, /* the sandbox's agent is gone */
	SBX_FULL,        /* the host cannot take another sandbox of this size now */
	SBX_UNAVAILABLE, /* out of memory or descriptors: try again */
	SBX_INTERNAL,    /* huskd's own failure (logged with its cause) */
	SBX_FORBIDDEN,   /* the caller's org may see it but not change it */
};

struct sbx_err {
	enum sbx_fault fault;
	char msg[512];
};

/* A finished asynchronous call: data and bytes (either may be NULL) are borrowed. */
struct sbx_reply {
	json_t *data;
	const void *bytes;
	size_t len;
	/* Or the answer is a file's whole content: fd (borrowed: dup it to keep it), len bytes. */
	bool has_fd;
	int fd;
	/* ... still being written: follow it to its end (take a reference: outbuf_ref). */
	struct outbuf *live;
};
/* err is NULL on success. */
typedef void (*sbx_done_fn)(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply);
/* One step of long work (borrowed event: {step, of, message} or {detail}). */
typedef void (*sbx_progress_fn)(void *ctx, json_t *event);

struct sbx_config {
	const char *state;      /* state folder: sandboxes/, streams/, snapshots/, builds/ */
	const char *vmm;        /* husk-vmm */
	const char *kernel;     /* guest kernel: vmlinux or bzImage */
	const char *initrd;     /* guest initramfs */
	uint64_t output_limit;  /* bytes kept per output stream */
	bool idle_pause;        /* timeout.idle pauses to disk instead of terminating */
	const char *cgroup_dir; /* cgroup v2 folder for sandboxes' cpu.max, NULL: none */
	uint64_t ready_ms;     /* a guest's agent must dial in this soon after a start (0: 180 s) */
	uint64_t call_idle_ms; /* an agent request (files, env, jobs) silent this long is given up
	                          (0: 120 s) */
	uint64_t read_max;     /* a file read's bytes at most (0: no bound but the disk's) */
	uint64_t memory_mib; /* guest memory the host may hand out in all (0: from /proc/meminfo) */
	unsigned max_sandboxes;   /* running at once (0: from the machine's memory) */
	unsigned max_vcpus;       /* vCPUs of running sandboxes in all (0: 8 per host CPU) */
	uint64_t min_free_disk;   /* bytes kept free under the state folder (0: 1 GiB) */
	uint64_t stream_max_age;  /* seconds an output stream is kept (0: 7 days) */
	uint64_t disk_bps;        /* a sandbox's bytes per second each way on the state
	                             folder's disk (io.max), 0: no limit */
	uint64_t disk_iops;       /* its operations per second each way, 0: no limit */
	const char *jail;         /* husk-jail, which starts a networked VMM in its namespace */
	uint16_t dns_port;        /* UDP port of the sandboxes' DNS forwarder (0: 10053) */
	const char *dns_upstream; /* the resolver it asks (NULL: /etc/resolv.conf's) */
	uint64_t egress_rate;     /* bytes per second a sandbox may send, unless it asks less */
	const char *apt_source;   /* apt's sources for dependencies (a one-line list), NULL: the
	                             runtime's own */
	/* Added to every networked sandbox's lists (huskd --egress-allow/--egress-deny). */
	const char *const *egress_allow, *const *egress_deny;
	const char *importer;      /* husk-import (runtime imports), NULL: none */
	uint64_t import_max_bytes; /* an imported image, as sent and unpacked (0: 16 GiB) */
	bool templates;     /* creates restore a template of their runtime and shape (sbx_tmpl.c) */
	unsigned warm_pool; /* warm VMMs kept per template and org (sbx_pool.c), 0: none */
	unsigned resume_ahead; /* paused sandboxes with a VMM made ahead (sbx_ahead.c), 0: none */
	/* Data keys wrapped by org keys (keys/keystore.h), borrowed; opens sealed snapshots. */
	struct keystore *keys;
	bool seal; /* with keys: a pause seals its memory with a new key of the sandbox's org */
};

int sbx_mgr_open(uv_loop_t *loop, struct store *store, const struct sbx_config *cfg,
                 struct sbx_mgr **out) __attribute__((warn_unused_result));
/* After a huskd restart: adopts the VMMs still running, fails the sandboxes whose VMM is gone. */
void sbx_mgr_adopt(struct sbx_mgr *m);
/*
 * Lets go of every sandbox without touching its VMM (adopted at the next
 * start): no callback reaches the routes after this. The caller then runs
 * the loop until it has nothing left to do, and frees with sbx_mgr_free.
 */
void sbx_mgr_close(struct sbx_mgr *m);
void sbx_mgr_free(struct sbx_mgr *m);
/* fn(arg, id) runs after a sandbox's status or an execution changed (long-polls wait on it). */
void sbx_mgr_on_change(struct sbx_mgr *m, void (*fn)(void *arg, const char *id), void *arg);
/* Sandboxes held now (any state). */
unsigned sbx_mgr_count(const struct sbx_mgr *m);

/* ---- Lifecycle (sbx_create.c, sbx.c, sbx_pause.c) ---- */

/*
 * POST /sandbox: checks body, makes the sandbox's layer (off the loop),
 * records it and starts its VMM; done gets the stored SandboxInfo (status
 * "creating"). The sandbox then boots, its agent dials in, and it is set
 * up (workspace, env, files) before it counts as idle.
 */
void sbx_create(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx);
/*
 * done once the sandbox is ready for commands (a paused one resumed), or
 * with why it cannot be; reply.data is its SandboxInfo then.
 */
void sbx_wait_ready(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx);
/* DELETE: a live one ends (its execution recorded cancelled first); a gone one is marked deleted.
 */
int sbx_destroy(struct sbx_mgr *m, const char *id, struct sbx_err *err)
	__attribute__((warn_unused_result));
/*
 * Its lifetime deadline ms from now (E2B's timeout): then it ends, or with
 * pause 1 it is paused (pause -1: as set before). Use does not move it.
 */
int sbx_set_deadline(struct sbx_mgr *m, const char *id, uint64_t ms, int pause, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* Pause to disk (an idle sandbox): done gets {sandboxId, status, terminatesAt?}. */
void sbx_pause(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx);
/* Resume a paused one; done once it is idle again. */
void sbx_resume(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx);

/* ---- Executions (sbx_exec.c) ---- */

struct sbx_exec_req {
	json_t *argv;        /* array of strings */
	json_t *files;       /* [{path, content: base64}] written first, or NULL */
	uint64_t timeout_ms; /* 0: the sandbox's timeout.execution */
	json_t *stream;      /* {stdout, stderr, stdin, timestamps} (sbx_streams_check), or NULL */
	const char *base;    /* the base URL of stream links, "http://host:port" */
};

/*
 * Starts a command (once the sandbox is ready; a paused one is resumed
 * first, *resumed says so). *exec gets the ExecutionInfo (status "queued"
 * or "running", stream URLs).
 */
int sbx_exec_start(struct sbx_mgr *m, const char *id, const struct sbx_exec_req *req, json_t **exec,
                   bool *resumed, struct sbx_err *err) __attribute__((warn_unused_result));
/* Cancels an execution (CANCEL to the agent; the sandbox lives on); done once it ended. */
void sbx_exec_cancel(struct sbx_mgr *m, const char *exec_id, sbx_done_fn done, void *ctx);
/* An execution's record. */
int sbx_execution_get(struct sbx_mgr *m, const char *exec_id, json_t **out, bool *terminal)
	__attribute__((warn_unused_result));
int sbx_executions(struct sbx_mgr *m, const char *id, int limit, json_t **out)
	__attribute__((warn_unused_result));

/*
 * An output stream by id: *live is its outbuf while its command runs (hold
 * it with outbuf_ref), else NULL; path gets its file either way. -ENOENT
 * for an unknown id.
 */
int sbx_stream(struct sbx_mgr *m, const char *stream_id, struct outbuf **live, char *path,
               size_t pathlen) __attribute__((warn_unused_result));

/* ---- User streams (sbx_streams.c; POST/PUT/GET /streams) ---- */
/* A new empty stream of org named name (may be NULL); *out {id, name, limit}. */
int sbx_streams_create(struct sbx_mgr *m, const char *org, const char *name, json_t **out,
                       struct sbx_err *err) __attribute__((warn_unused_result));
/*
 * Takes the writing of org's stream id (a PUT's body): *ob referenced; the
 * writer appends, closes and lets go of it. A stream has one writer ever.
 */
int sbx_streams_take(struct sbx_mgr *m, const char *org, const char *id, struct outbuf **ob,
                     struct sbx_err *err) __attribute__((warn_unused_result));
/* A create's or execute's "stream" {stdin, stdout, stderr, timestamps} checked for org. */
int sbx_streams_check(struct sbx_mgr *m, const char *org, json_t *stream, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* The org owning stream id, or NULL if it is no user stream. */
const char *sbx_streams_org(struct sbx_mgr *m, const char *id);

/* ---- Commands beside executions (sbx_shell.c): shells (husk ssh), E2B processes ---- */
struct sbx_shell;
struct sbx_shell_ops {
	/* Output bytes: type FRAME_STDOUT (a terminal's all) or FRAME_STDERR. */
	void (*output)(void *arg, int type, const void *p, size_t len);
	/* The end: result {exit_code, ...} or err (one is NULL); the shell is gone after. */
	void (*ended)(void *arg, json_t *result, const struct sbx_err *err);
	/* sbx_shell_full() is false again: more input is taken. May be NULL. */
	void (*room)(void *arg);
};
struct sbx_shell_opts {
	json_t *argv;        /* non-empty array of strings */
	json_t *env;         /* {name: value} over the sandbox's, or NULL */
	const char *cwd;     /* NULL: the workspace */
	const char *user;    /* NULL: the sandbox's */
	unsigned rows, cols; /* a PTY of this size; 0 x 0: pipes (stdout and stderr apart) */
	bool no_stdin;       /* stdin is /dev/null (sbx_shell_input: -EPIPE) */
	bool keep;           /* the process outlives a pause (its session ends; it runs on) */
};
/* A command (once the sandbox is ready: a paused one resumes); it runs until it ends. */
int sbx_shell_spawn(struct sbx_mgr *m, const char *id, const struct sbx_shell_opts *o,
                    const struct sbx_shell_ops *ops, void *arg, struct sbx_shell **out,
                    struct sbx_err *err) __attribute__((warn_unused_result));
/* argv on a PTY of rows x cols (sbx_shell_spawn's shorthand for husk ssh). */
int sbx_shell_start(struct sbx_mgr *m, const char *id, json_t *argv, unsigned rows, unsigned cols,
                    const struct sbx_shell_ops *ops, void *arg, struct sbx_shell **out,
                    struct sbx_err *err) __attribute__((warn_unused_result));
/*
 * Typed bytes (end: no more). Past full (sbx_shell_full) the caller waits for
 * room(); far past it: -ENOBUFS. -EPIPE after the end.
 */
int sbx_shell_input(struct sbx_shell *s, const void *p, size_t len, bool end)
	__attribute__((warn_unused_result));
bool sbx_shell_full(const struct sbx_shell *s);
int sbx_shell_window(struct sbx_shell *s, unsigned rows, unsigned cols)
	__attribute__((warn_unused_result));
/* Stops the command; ended() still comes (cancelled). */
void sbx_shell_cancel(struct sbx_shell *s);
/* The caller went: the command is stopped; no callback comes any more. */
void sbx_shell_close(struct sbx_shell *s);

/* ---- A folder's changes (sbx_watch.c; E2B's WatchDir) ---- */
struct sbx_watch;
struct sbx_watch_ops {
	void (*started)(void *arg); /* the watch is set: changes from now on come */
	/* A change: name below the folder, type create|write|remove|rename|chmod. */
	void (*event)(void *arg, const char *name, const char *type);
	/* The end (err NULL: closed by the agent); no callback after. */
	void (*ended)(void *arg, const struct sbx_err *err);
};
/* Watches path (a folder; recursive: and those below) once the sandbox is ready. */
int sbx_watch_start(struct sbx_mgr *m, const char *id, const char *path, bool recursive,
                    const struct sbx_watch_ops *ops, void *arg, struct sbx_watch **out,
                    struct sbx_err *err) __attribute__((warn_unused_result));
/* The caller went: the watch is stopped; no callback comes any more. */
void sbx_watch_close(struct sbx_watch *w);

/* ---- Agent requests: files, env, jobs, archives (sbx_ops.c, sbx_jobs.c) ---- */

/* [{path, content: base64, user?}] (user: the file's owner); done: {"filesWritten": n}. */
void sbx_fs_write(struct sbx_mgr *m, const char *id, json_t *files, sbx_done_fn done, void *ctx);
/*
 * The file's bytes as they come (sbx_read.c): done at the first of them with
 * reply.live, the stream they go into (failed if the read breaks after that);
 * up to cfg.read_max bytes (more: SBX_TOO_LARGE before any, else failed).
 */
void sbx_fs_read(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx);
/* {"files": [{path, size, isDir, isSymlink, mode, modTime}]} */
void sbx_fs_list(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx);
/*
 * The guest's figures now (its agent's info: cpus, memory, disk, cpu
 * {busy_ms, total_ms}); a paused sandbox resumes for it.
 */
void sbx_info(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx);
/* One entry {path (absolute), size, isDir, isSymlink, mode, modTime} (a link's own). */
void sbx_fs_stat(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx);
void sbx_fs_mkdir(struct sbx_mgr *m, const char *id, const char *path, bool parents,
                  sbx_done_fn done, void *ctx);
/* rm / rmdir: {"found": bool} (a missing path is no error). */
void sbx_fs_rm(struct sbx_mgr *m, const char *id, const char *path, bool dir, bool recursive,
               sbx_done_fn done, void *ctx);
/* A folder as tar.gz bytes / a tar (gzip: .tar.gz) unpacked into a folder (bytes borrowed until
 * done). */
void sbx_fs_download(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done,
                     void *ctx);
void sbx_fs_upload(struct sbx_mgr *m, const char *id, const char *path, const void *tar, size_t len,
                   bool gzip, sbx_done_fn done, void *ctx);
/*
 * The same as zip (sbx_zip.c): a download's tar converted, an upload's zip
 * converted to a tar first (bytes borrowed until done); neither extracted here.
 */
void sbx_fs_download_zip(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done,
                         void *ctx);
void sbx_fs_upload_zip(struct sbx_mgr *m, const char *id, const char *path, const void *zip,
                       size_t len, sbx_done_fn done, void *ctx);
/* PATCH env: vars of strings (null deletes); done: {"env": {...}}. */
void sbx_env_set(struct sbx_mgr *m, const char *id, json_t *vars, sbx_done_fn done, void *ctx);
/* Jobs (background processes); done: the Job, or {"jobs": [...]}. */
/*
 * streams {stdout?, stderr?}: user stream ids or "ignore" (API.md §5.4); the
 * Job's stdoutStreamUrl/stderrStreamUrl are under base ("http://host:port").
 */
void sbx_job_create(struct sbx_mgr *m, const char *id, json_t *argv, json_t *streams,
                    const char *base, sbx_done_fn done, void *ctx);
/* limit: the newest that many (0: all). */
void sbx_job_list(struct sbx_mgr *m, const char *id, int limit, sbx_done_fn done, void *ctx);
void sbx_job_get(struct sbx_mgr *m, const char *id, const char *job, sbx_done_fn done, void *ctx);
void sbx_job_stop(struct sbx_mgr *m, const char *id, const char *job, bool force, sbx_done_fn done,
                  void *ctx);

/* ---- Imported runtimes (sbx_import.c, sbx_import_run.c) ---- */

/* POST {name, source?, size?}: an import begins; {importId, name, status, maxBytes}. */
int sbx_import_init(struct sbx_mgr *m, json_t *body, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* PUT: the part of the archive at offset (bytes borrowed until done); done: {received}. */
void sbx_import_upload(struct sbx_mgr *m, const char *id, uint64_t offset, const void *bytes,
                       size_t len, sbx_done_fn done, void *ctx);
/*
 * Converts the upload (or pulls the source) with husk-import: progress per
 * step, then done with the new runtime, or the reason it was refused (the
 * import's folder removed either way).
 */
void sbx_import_run(struct sbx_mgr *m, const char *id, sbx_progress_fn progress, sbx_done_fn done,
                    void *ctx);
/* Its caller went away: the import goes on, telling nobody. */
void sbx_import_detach(struct sbx_mgr *m, const char *id);
/* {importId, name, status, received, progress, error, runtime}. */
int sbx_import_get(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* DELETE an imported runtime that no sandbox or snapshot sits on, and its image. */
int sbx_runtime_delete(struct sbx_mgr *m, const char *ref, struct sbx_err *err)
	__attribute__((warn_unused_result));

/* ---- Checkpoints and snapshots (sbx_ckpt.c, sbx_snap.c, sbx_build.c) ---- */

void sbx_ckpt_create(struct sbx_mgr *m, const char *id, const char *name, sbx_done_fn done,
                     void *ctx);
void sbx_ckpt_restore(struct sbx_mgr *m, const char *id, const char *ref, sbx_done_fn done,
                      void *ctx);
int sbx_ckpt_list(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
int sbx_ckpt_delete(struct sbx_mgr *m, const char *id, const char *ref, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* body: name, tag, description, public, memory (checked by the route); done: SnapshotInfo. */
void sbx_snap_create(struct sbx_mgr *m, const char *id, json_t *body, sbx_done_fn done, void *ctx);

struct sbx_snap_query {
	const char *sandbox_id, *sort;
	const char
		*org; /* the caller's org: its snapshots (public_only: every org's public ones) */
	bool ascending, public_only;
	int limit, offset;
};
int sbx_snap_list(struct sbx_mgr *m, const struct sbx_snap_query *q, json_t **out,
                  struct sbx_err *err) __attribute__((warn_unused_result));
/*
 * org: whose view - its own snapshots and every org's public ones (NULL:
 * the public ones only). Tag and delete change only org's own (SBX_FORBIDDEN
 * for another org's public one).
 */
int sbx_snap_get(struct sbx_mgr *m, const char *org, const char *ref, bool public_only,
                 json_t **out, struct sbx_err *err) __attribute__((warn_unused_result));
/* tag: a string, or JSON null to remove it. */
int sbx_snap_tag(struct sbx_mgr *m, const char *org, const char *ref, json_t *tag, json_t **out,
                 struct sbx_err *err) __attribute__((warn_unused_result));
int sbx_snap_delete(struct sbx_mgr *m, const char *org, const char *ref, json_t **out,
                    struct sbx_err *err) __attribute__((warn_unused_result));
int sbx_snap_lineage(struct sbx_mgr *m, const char *org, const char *ref, int limit, json_t **out,
                     struct sbx_err *err) __attribute__((warn_unused_result));
/* Declarative builds (API.md §5.8 (38)-(40)). */
int sbx_build_init(struct sbx_mgr *m, json_t *body, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
int sbx_build_upload(struct sbx_mgr *m, const char *build, const void *tgz, size_t len,
                     struct sbx_err *err) __attribute__((warn_unused_result));
void sbx_build_finalize(struct sbx_mgr *m, const char *build, json_t *body, sbx_done_fn done,
                        void *ctx);

/* ---- Network (sbx_net.c, sbx_port.c) ---- */

/*
 * PUT /sandbox/{id}/network (husk's own): replaces a networked sandbox's
 * allow and deny lists (body {allow?, deny?}); a running VMM's rules change
 * at once. out: {sandboxId, allow, deny}.
 */
int sbx_net_set(struct sbx_mgr *m, const char *id, json_t *body, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
/*
 * For a request to sandbox id's exposed port (0: its network.port; any
 * port of a network.allPorts sandbox):
 * once it is up (resumed if paused), fn(ctx, NULL, path, port) with the
 * Unix socket that reaches the guest's port, or fn(ctx, err, NULL, 0) (no
 * such sandbox or port, ended). Called exactly once, maybe before this
 * returns.
 */
typedef void (*sbx_port_fn)(void *ctx, const struct sbx_err *err, const char *path, unsigned port);
void sbx_port_open(struct sbx_mgr *m, const char *id, unsigned port, sbx_port_fn fn, void *ctx);
/* Traffic through the port: the sandbox is in use (its idle countdown starts again). */
void sbx_port_touch(struct sbx_mgr *m, const char *id);
/*
 * Sandbox id's network as a create's "network" field gives it (enabled,
 * port, allPorts, urlToken, egressBytesPerSec, the lists as they are now):
 * for a copy of it (E2B's fork). 0 with *out, or -errno with err.
 */
int sbx_net_config(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* Whether this huskd gives sandboxes a NIC (network.enabled, port, allPorts): a jail and nftables.
 */
bool sbx_can_network(struct sbx_mgr *m);

/* ---- Records (sbx_query.c) ---- */

int sbx_get(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* {sandboxId, status, exitCode?} for status long-polls. */
int sbx_status(struct sbx_mgr *m, const char *id, json_t **out) __attribute__((warn_unused_result));

/* What a route's path names, for sbx_owned. */
enum sbx_kind { SBX_KIND_SANDBOX, SBX_KIND_EXECUTION, SBX_KIND_BUILD };
/*
 * 0 if the sandbox, execution (by its sandbox) or build id exists and
 * belongs to org; -ENOENT otherwise, the same for another org's as for none,
 * so ids say nothing across orgs.
 */
int sbx_owned(struct sbx_mgr *m, enum sbx_kind kind, const char *id, const char *org)
	__attribute__((warn_unused_result));
/* The org of a SandboxInfo or SnapshotInfo (records from before orgs: the default one). */
const char *sbx_info_org(json_t *info);

struct sbx_list_query {
	const char *org; /* the caller's org: only its sandboxes */
	const char *name, *status, *sort;
	const char *mode, *project_id, *snapshot_id; /* filters; NULL: any */
	int live;                                    /* 0 any, 1 only live, -1 only ended */
	int deleted;                                 /* 0 hide, 1 include, 2 only */
	bool ascending;
	int limit, offset;
};
int sbx_list(struct sbx_mgr *m, const struct sbx_list_query *q, json_t **out, struct sbx_err *err)
	__attribute__((warn_unused_result));
int sbx_events(struct sbx_mgr *m, const char *id, int limit, bool descending, json_t **out)
	__attribute__((warn_unused_result));
/* sort: "name" or "created" (NULL: name). -EINVAL for another sort. */
int sbx_runtimes(struct sbx_mgr *m, const char *sort, bool descending, int limit, int offset,
                 json_t **out) __attribute__((warn_unused_result));
/* Usage in [from_ms, to_ms] and the live sandboxes by status. */
int sbx_usage(struct sbx_mgr *m, const char *org, int64_t from_ms, int64_t to_ms, json_t **out)
	__attribute__((warn_unused_result));

/* "250ms", "5m", "1h30m", "0s" → milliseconds; -EINVAL if it is not a Go duration. */
int parse_duration_ms(const char *s, uint64_t *ms) __attribute__((warn_unused_result));
/* Milliseconds since the epoch. */
int64_t sbx_now_ms(void);

#endif
