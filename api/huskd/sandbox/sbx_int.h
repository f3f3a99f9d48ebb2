/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_INT_H
#define HUSK_SBX_INT_H

/*
 * Inside the sandbox manager (api/huskd/sandbox/ only). Its files call one
 * way, from the top of this list to the bottom, never back up:
 *
 *   sbx_life.c        the manager's reactions: what a VMM exit, a dial-in,
 *                     a countdown or a stop means in each state (the hooks)
 *   public requests   sbx_create, _adopt, _build, _snap, _ckpt, _ops, _jobs,
 *                     _query, _snapdb: what the routes call
 *   flows             sbx_pause.c (pause, freeze, resume), sbx_setup.c
 *   executions        sbx_exec.c (and sbx_up: a sandbox comes up)
 *   agent requests    sbx_call.c
 *   resources         sbx_vmm.c (VMM process, dial-in), sbx_ctl.c (control
 *                     socket), sbx_work.c (off the loop)
 *   the state machine sbx_state.c: sbx_to(), the only code that changes a
 *                     state; countdowns (sbx_deadline.c too); waiters; sbx_end()
 *   the registry      sbx.c: lookup, lifetime, records
 *   leaves            sbx_text.c, sbx_cgroup.c, outbuf.c, sbx_snapdb's gc
 *
 * What happens below (a VMM exits, an agent dials in, a countdown ends, an
 * ended sandbox is let go) goes up only through the hooks in struct sbx_mgr,
 * filled by sbx_life.c. tests/layers/check.mjs fails on a circle of calls.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent_session.h"
#include "huskd_log.h"
#include "img.h"
#include "sbx.h"
#include "sbx_cgroup.h"
#include "sbx_text.h"
#include "store.h"
#include "vmm_proc.h"

/* The guest's working folder: relative paths in the API are under it. */
#define WORKSPACE "/home/agentuity"
/* The host port the guest's agent dials (husk.dial=): its socket is vsock.sock_53. */
#define DIAL_PORT 53

enum sbx_state {
	SBX_CREATING,  /* its layer is being made; not recorded yet */
	SBX_BOOTING,   /* VMM booting a kernel: waiting for the agent to dial in, then setup */
	SBX_RESTORING, /* VMM started from a snapshot's memory (a warm create) */
	SBX_POOLED,    /* a warm VMM (sbx_pool.c): restored, agent dialled in, vCPUs parked */
	SBX_ADOPTING,  /* a VMM from before a huskd restart: waiting for its agent to dial again */
	SBX_IDLE,      /* ready, no command running */
	SBX_RUNNING,   /* ready, its one command running */
	SBX_PAUSING,   /* VMM parking its vCPUs, writing memory.snap, quitting */
	SBX_PAUSED,    /* on disk: memory.snap and its layers, no VMM */
	SBX_FREEZING,  /* paused, its layers being reworked (checkpoint, snapshot) off the loop */
	SBX_RESUMING,  /* VMM started from memory.snap */
	SBX_REBOOTING, /* VMM booting afresh on a restored checkpoint's disk */
	SBX_STOPPING,  /* ending: its VMM killed, waiting for it to exit */
	SBX_GONE,      /* ended; freed once nothing holds it */
	SBX_NSTATES
};

struct sandbox;
struct execution;
struct sbx_tmpl;
struct sbx_mgr;
struct vmm_proc;
struct vmm_ctl;

/* Runs when the sandbox is ready (err NULL), or never will be (err says why). */
typedef void (*sbx_ready_fn)(struct sandbox *sb, const struct sbx_err *err, void *arg);

struct sbx_waiter {
	sbx_ready_fn fn;
	void *arg;
	struct sbx_waiter *next;
};

/*
 * What a pause is for. freeze (may be NULL) runs off the loop once the VMM
 * has quit (state FREEZING); after runs on the loop with the outcome and
 * moves the sandbox on (resume, reboot, stay paused, end).
 */
struct sbx_pause_plan {
	const char *reason; /* for the "paused" event */
	int (*freeze)(struct sandbox *sb, void *arg, char *err, size_t errlen);
	void (*after)(struct sandbox *sb, int rc, const char *err, void *arg);
	void *arg;
	enum { PLAN_PARKING, PLAN_SAVING, PLAN_QUITTING, PLAN_FREEZING } step; /* how far it got */
	bool full;    /* memory.snap must stand alone (it is kept): no diff over a memory file */
	bool working; /* freeze runs off the loop now: arg is in use there */
};

/* How the manager reacts to what happens below it; sbx_life.c fills them. */
struct sbx_hooks {
	void (*vmm_exited)(struct sandbox *sb, int status); /* exit status, -1 unknown */
	void (*agent_hello)(struct sandbox *sb);            /* its agent dialled in */
	void (*timer)(struct sandbox *sb);                  /* the state's countdown ran out */
	void (*wake)(struct sandbox *sb);                   /* paused, and the guest is needed */
	void (*stopping)(struct sandbox *sb); /* it entered STOPPING: stop what runs */
	void (*template_wanted)(struct sbx_mgr *m, struct sbx_tmpl *t); /* make it */
	void (*pool_wanted)(struct sbx_mgr *m, json_t *body); /* a warm VMM for a create like it */
	void (*let_go)(struct sandbox *sb);   /* gone, and nothing holds it: free it */
	void (*deadline)(struct sandbox *sb); /* its lifetime deadline came, while it was up */
};

struct sbx_mgr {
	uv_loop_t *loop;
	struct store *store;
	struct sbx_config cfg; /* strings copied */
	const struct sbx_hooks *hooks;
	char *streams; /* state/streams */
	struct sandbox *sandboxes;
	void (*on_change)(void *arg, const char *id);
	void *on_change_arg;
	bool closing;
	/* Sandbox networking, set up at the first sandbox that wants it (sbx_net()). */
	struct net_host *net;
	bool net_tried;
	char net_why[300];            /* why there is none */
	unsigned jail_next;           /* where the search for a free jail uid starts */
	unsigned tool_uid;            /* the uid a tool run in a jail holds now (sbx_jail_tool) */
	struct sbx_ustream *ustreams; /* user streams, newest first (sbx_streams.c) */
	unsigned nustreams;
	uv_timer_t *reaper;           /* old streams, abandoned builds (sbx_reap.c) */
	uv_timer_t *meter;            /* samples running sandboxes' cgroups (sbx_meter.c) */
	int64_t reaped_to_ms;         /* streams of sandboxes deleted before this are gone */
	struct cgroup_io_limits io;   /* each sandbox's disk limits */
	struct sbx_import *imports;   /* runtime imports under way or just ended (sbx_import.c) */
	struct sbx_tmpl *tmpls;       /* templates, ready or being made (sbx_tmpl.c) */
	struct sbx_memfile *memfile;  /* the memory file being made now, NULL: none */
	struct sbx_tmpl_make *making; /* the one being made now, NULL: none */
	struct sbx_spare *spares;     /* layers made ahead, newest first (sbx_spare.c) */
};

struct net_policy;

/* Guest ports a network.allPorts sandbox serves at once (the VMM's own bound is 64). */
#define SBX_EXPOSED_MAX 32

struct sandbox {
	struct sbx_mgr *m;
	struct sbx_job_tail *tails; /* its jobs' output followed (sbx_job_tail.c) */
	/* What it consumed (sbx_meter.c): CPU ms, memory byte-seconds, the last memory sample. */
	uint64_t cpu_ms, mem_byte_sec, meter_mem;
	int64_t meter_at;  /* when meter_mem was taken (0: never) */
	bool metered;      /* its cgroup was read at least once */
	bool tails_loaded; /* ... and those of the store looked for, once */
	char id[STORE_ID_LEN];
	enum sbx_state state;
	const char *recorded;   /* the public status last recorded (a static string) */
	const char *end_status; /* STOPPING: terminated, failed or deleted */
	char end_reason[400];   /* STOPPING: why */
	bool stored;            /* it has a row in the store */
	unsigned refs;          /* work in flight that holds it (sbx_hold) */
	char *dir;              /* state/sandboxes/<id> */
	char *layer;            /* its top disk layer */
	char *base;             /* the image its layers sit on (runtime or snapshot) */
	char *mem_file; /* the memory file its VMM maps (a template's, a snapshot's), or NULL */
	char org[STORE_ID_LEN]; /* its org: its memory is sealed with that org's keys */
	char *mem_key;          /* the wrapped key its memory.snap is sealed with, or NULL */
	char *mem_key_next;     /* PAUSING: the key the snapshot being written is sealed with */
	char *disk_key;         /* the wrapped key of its own disk files (sbx_dkey.c), or NULL */
	uint8_t *layer_mk;      /* its new layer's master key until its first VMM start */
	json_t *disk_keys;      /* those of the images below them: path -> wrapped key */
	bool from_template;     /* created restoring a template (its maker made the workspace) */
	char base_snap[STORE_ID_LEN];
	char *cgroup;
	bool cpu_limited;
	struct vmm_proc *vmm;
	/* PAUSED: its VMM is one made ahead of its resume (sbx_ahead.c), and how it goes. */
	enum sbx_ahead {
		SBX_AHEAD_NONE,
		SBX_AHEAD_HELD,     /* restored, vCPUs parked */
		SBX_AHEAD_DROPPING, /* killed: a plan waits for its exit */
		SBX_AHEAD_RESUMING, /* RESUMING: asked to run its vCPUs */
		SBX_AHEAD_REPLACE,  /* RESUMING: killed; the usual VMM starts once it exited */
	} ahead;
	bool quit_sent;       /* PAUSING: told to quit after its snapshot */
	struct vmm_ctl *ctl;  /* a control command awaiting its answer */
	struct vmm_ctl *dump; /* a "dump" awaiting its answer (on a connection of its own) */
	bool kill_after_dump; /* STOPPING: its VMM goes once that dump is answered */
	void (*ctl_fn)(struct sandbox *, int, const char *); /* who gets that answer */
	uv_pipe_t *dial;                                     /* listener on dir/vsock.sock_53 */
	struct agent_session *session;
	void *setup;       /* the setup under way (sbx_setup.c), NULL for none */
	uv_timer_t *timer; /* the state's countdown (idle, paused, readiness) */
	/* Its lifetime deadline (sbx_deadline.c): ms since the epoch, 0 none; paused, not ended. */
	int64_t deadline_ms;
	bool deadline_pause;
	uv_timer_t *deadline;
	struct execution *exec;
	struct sbx_waiter *waiters;
	struct sbx_pause_plan plan; /* PAUSING, FREEZING: what the pause is for */
	char pause_err[512];        /* why a pause or its plan's work failed */
	long long pause_t0;         /* when the pause or resume began (monotonic ms) */
	const char *up_reason;      /* the event's reason once it is up again */
	json_t *env;                /* the sandbox's environment (create + setEnv) */
	json_t *image;              /* an imported runtime's defaults (workingDir, user, ...) */
	json_t *files;              /* files for its setup (create), NULL after */
	json_t *deps, *packages; /* apt and npm/bun packages for its setup (create), NULL after */
	bool oneshot;
	bool hidden; /* a template's maker: in no list, found by no request, purged once ended */
	/* A warm VMM (sbx_pool.c), on while pooled: unrecorded, found by no request. */
	struct {
		const struct sbx_tmpl *tmpl;
		json_t *body;    /* a create like the one it is for: the next is made with it */
		int64_t disk;    /* resources.disk it was made for, 0: the base's size */
		uint64_t vsize;  /* its layer's size */
		bool snap;       /* of its base snapshot (base_snap), not of a template */
		bool primed;     /* its guest got "resumed" (SETUP_WARM) before it was parked */
		int64_t ready_s; /* when it was parked (wall clock, s) */
		bool on;
	} pool;
	bool net;     /* it has a network (network.enabled): a NIC, and a jail with a veth slot */
	int net_slot; /* the slot its running VMM holds, -1: none */
	char net_mac[18];  /* its NIC's MAC; "": made before sandboxes had their own */
	unsigned net_host; /* its guest's address is 10.0.2.<net_host>; 0: the VMM's default */
	unsigned jail_uid; /* the uid its running VMM holds, 0: none */
	struct net_policy *net_policy; /* network.allow / deny, NULL: none */
	unsigned port;                 /* network.port, served at its url; 0: none */
	bool all_ports;                /* network.allPorts: any guest TCP port served */
	/* Ports beyond port its running VMM was asked to serve (sbx_port.c). */
	uint16_t exposed[SBX_EXPOSED_MAX];
	unsigned nr_exposed;
	uint64_t egress_rate;  /* bytes per second it may send; 0: no limit */
	uint64_t egress_bytes; /* sent to the internet by its VMMs that have ended */
	uint64_t exec_timeout_ms, idle_ms, paused_ms;
	uint64_t mem_mib;
	unsigned vcpus;
	int64_t cpu_millis;
	struct sandbox *next;
};

/* ---- sbx.c: the registry ---- */
struct sandbox *sbx_new(struct sbx_mgr *m, const char *id);
struct sandbox *sbx_find(struct sbx_mgr *m, const char *id);
/* The sandbox of live execution exec_id, or NULL (sbx_exec.c). */
struct sandbox *sbx_exec_sandbox(struct sbx_mgr *m, const char *exec_id);
/* The live sandbox id names, or NULL with err (NO_SANDBOX or ENDED). */
struct sandbox *sbx_lookup(struct sbx_mgr *m, const char *id, struct sbx_err *err);
/* A record no request may see: a template's maker. */
bool sbx_info_hidden(json_t *info);
void sbx_hold(struct sandbox *sb);
/* Lets go; an ended sandbox nothing holds goes to hooks->let_go, which sbx_free()s it. */
void sbx_drop(struct sandbox *sb);
void sbx_free(struct sandbox *sb);
/* The public status as a static string (what sb->recorded points at), or NULL if unknown. */
const char *sbx_public_status(const char *status);
/* Fills err (fault, printf message); returns -errno for the caller's return. */
int sbx_fail(struct sbx_err *err, enum sbx_fault fault, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Records private fields of the sandbox (a JSON patch, stolen); logs a failure. */
void sbx_save(struct sandbox *sb, json_t *priv);
void sbx_notify(struct sbx_mgr *m, const char *id);
/* Where its commands run and relative paths start: the image's WorkingDir, or WORKSPACE. */
const char *sbx_workspace(const struct sandbox *sb);
/* Whom its commands run as (the image's User), NULL: root. */
const char *sbx_user(const struct sandbox *sb);
/* Removes the sandbox's folder and what huskd keeps in it. */
void sbx_remove_dir(const char *dir);
/* Removes the files of deleted snapshots nothing is built on any more (sbx_snapdb.c). */
void snap_gc(struct sbx_mgr *m);

/* ---- sbx_state.c: the state machine ---- */
const char *sbx_state_name(enum sbx_state s);
/* Whether the table allows from → to. */
bool sbx_can(enum sbx_state from, enum sbx_state to);
/* BOOTING, RESTORING, ADOPTING, RESUMING, REBOOTING: a VMM, not yet an agent. */
bool sbx_starting(enum sbx_state s);
/*
 * The one way a state changes: -EINVAL (logged as a bug) for a move the
 * table refuses. reason goes with the status change's event; patch (may be
 * NULL) is merged into the sandbox's record (e.g. exitCode).
 */
int sbx_to(struct sandbox *sb, enum sbx_state to, const char *reason, json_t *patch);
/* Ends a sandbox: status terminated, failed or deleted, with reason (logged). */
void sbx_end(struct sandbox *sb, const char *status, const char *reason, json_t *patch);
/* The guest answers requests: IDLE or RUNNING with an agent session. */
bool sbx_ready(const struct sandbox *sb);
/* Using the sandbox counts as activity: its idle countdown starts again. */
void sbx_touch(struct sandbox *sb);
/* A starting sandbox's setup may take ms from now (installing packages), not ready_ms. */
void sbx_setup_longer(struct sandbox *sb, uint64_t ms);
/* Runs fn once ready (now if it is; a paused sandbox is woken for it). */
void sbx_when_ready(struct sandbox *sb, sbx_ready_fn fn, void *arg);
/* Runs the waiters: with err (they fail) or NULL (ready). */
void sbx_waiters_run(struct sandbox *sb, const struct sbx_err *err);
/* The agent session came or went while the sandbox is up: its countdown follows. */
void sbx_session_changed(struct sandbox *sb);
/* Paused and needed (a request, a command): the wake hook resumes it. */
void sbx_wake(struct sandbox *sb);
/* Closes its timer (the manager lets go of it). */
void sbx_state_release(struct sandbox *sb);
/* huskd stops: the sandbox is let go as it is (GONE here, its record untouched). */
void sbx_state_forget(struct sandbox *sb);

/* The most bytes an archive of the files API holds (download, upload, zip or not). */
#define ARCHIVE_MAX (512u << 20)

/* ---- sbx_deadline.c: a lifetime deadline (E2B's timeout) ---- */
/* After a restart: the deadline its record kept, running again. */
void sbx_deadline_restore(struct sandbox *sb, json_t *priv);
void sbx_deadline_release(struct sandbox *sb);
/* Met (ended or paused; record: in its record too), or not yet: hooks->deadline again in ms. */
void sbx_deadline_met(struct sandbox *sb, bool record);
void sbx_deadline_later(struct sandbox *sb, uint64_t ms);

/* ---- sbx_meter.c: cpuTimeMs and memoryByteSec from the sandbox's cgroup ---- */
void sbx_meter_vmm_started(struct sandbox *sb);
/* Its VMM has ended: the figures brought up to now and recorded. */
void sbx_meter_vmm_ended(struct sandbox *sb);
/* Every sandbox's figures brought up to now and recorded (the tick; before usage is read). */
void sbx_meter_flush(struct sbx_mgr *m);
/* After a restart: the figures its record kept. */
void sbx_meter_restore(struct sandbox *sb, json_t *priv);
/* Sets info's cpuTimeMs and memoryByteSec to the figures now (none without a cgroup). */
void sbx_meter_fields(struct sandbox *sb, json_t *info);
int sbx_meter_start(struct sbx_mgr *m);
void sbx_meter_stop(struct sbx_mgr *m);

/* ---- sbx_job_tail.c: jobs' output streams ---- */
/* job's output followed into out (stdout, stderr; either NULL: ignored), from now on. */
void sbx_job_tails_start(struct sandbox *sb, const char *job, const char *agent_job,
                         struct outbuf *out[2]);
/* The sandbox is up: broken follows (and, once, those of the store) start again. */
void sbx_job_tails_up(struct sandbox *sb);
/* The sandbox ends (complete: the streams end with it) or huskd stops (they stay open). */
void sbx_job_tails_end(struct sandbox *sb, bool complete);
/* A job's stream being followed, by id, else NULL. */
struct outbuf *sbx_job_tail_live(struct sbx_mgr *m, const char *stream_id);

/* ---- sbx_streams.c: user streams ---- */
/* org's stream id to read (a command's stdin): *ob referenced. */
int sbx_streams_input(struct sbx_mgr *m, const char *org, const char *id, struct outbuf **ob,
                      struct sbx_err *err) __attribute__((warn_unused_result));
/* User stream id's outbuf while it is being written, else NULL. */
struct outbuf *sbx_streams_live(struct sbx_mgr *m, const char *id);
/* huskd stops: the registry is let go (the files stay for the reaper). */
void sbx_streams_close(struct sbx_mgr *m);

/* ---- sbx_reap.c: files nobody will ask for again ---- */
/*
 * Removes the streams of sandboxes deleted over an hour before now, streams
 * past their age and builds never finalized (at start, then every 15 min).
 */
void sbx_reap(struct sbx_mgr *m, time_t now);
int sbx_reap_start(struct sbx_mgr *m);
void sbx_reap_stop(struct sbx_mgr *m);

/* ---- sbx_import.c: runtime imports ---- */
/* At start: what an import left behind removed; state/imports and state/runtimes made. */
void sbx_import_start(struct sbx_mgr *m);
/* Uploads left for an hour, and imports ended over an hour ago, dropped. */
void sbx_import_reap(struct sbx_mgr *m);
/* huskd stops: a conversion under way is killed, the rest forgotten. */
void sbx_import_close(struct sbx_mgr *m);

/* ---- sbx_memfile.c: a snapshot's memory file ---- */
typedef void (*sbx_memfile_fn)(struct sbx_mgr *m, int rc, const char *why, void *arg);
/*
 * Makes dir/memory.raw from the snapshot snap (of a mem_mib guest) in the
 * background: done(m, 0, NULL, arg) once it is there, root's and read-only,
 * or done(m, -errno, why, arg). -EBUSY while another one is being made.
 */
int sbx_memfile_make(struct sbx_mgr *m, const char *snap, const char *dir, uint64_t mem_mib,
                     sbx_memfile_fn done, void *arg, char *err, size_t errlen);
/* huskd stops: the extraction under way is killed; its done() hears -ESHUTDOWN. */
void sbx_memfile_close(struct sbx_mgr *m);
/*
 * The disk is low: snapshots' memory files no live sandbox maps are removed
 * (caches: made again when a sandbox needs one). Returns the bytes freed.
 */
uint64_t sbx_memfile_evict(struct sbx_mgr *m);
/* At start: what a huskd stopped during an extraction left (a snapshot's extract/) goes. */
void sbx_memfile_sweep(struct sbx_mgr *m);
/* A plain file or folder made root's (where huskd is root) with mode; -EPERM for anything else. */
int sbx_seal(const char *path, mode_t mode);

/* sbx_create for a template's maker (sbx_tmpl_make.c): hidden, on no template itself. */
void sbx_create_maker(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx);
/* A warm VMM for creates like body (sbx_pool.c): made unrecorded, over body's template. */
void sbx_create_pooled(struct sbx_mgr *m, json_t *body);
/* Makes t (TMPL_MAKING) in the background: READY once made, FAILED if it cannot be. */
void sbx_tmpl_make(struct sbx_mgr *m, struct sbx_tmpl *t);
/* huskd stops: the making under way is dropped (its maker sandbox ends at the next start). */
void sbx_tmpl_close(struct sbx_mgr *m);

/* ---- sbx_admit.c: the host's budget ---- */
/* 0 if the host takes one more running sandbox of mem_mib and vcpus; else SBX_FULL in err. */
int sbx_admit(struct sbx_mgr *m, uint64_t mem_mib, unsigned vcpus, struct sbx_err *err);

/* ---- sbx_jail.c: what its VMM is confined to ---- */
struct sbx_jail {
	struct vmm_jail spec;
	char root[4200];
	char *owned[VMM_JAIL_PATHS];
};
/* Takes a uid for its VMM and lists what the VMM may see; sbx_jail_done() after the spawn. */
int sbx_jail_prepare(struct sandbox *sb, const char *restore, const char *mem_file,
                     struct sbx_jail *j, char *err, size_t errlen);
void sbx_jail_done(struct sbx_jail *j);
/*
 * A jail for husk-vmm run as a tool that writes one folder (rw) and reads
 * one file (ro, or NULL), under a uid no VMM holds (m->tool_uid until the
 * caller sets it 0 again); sbx_jail_done() after the spawn.
 */
int sbx_jail_tool(struct sbx_mgr *m, const char *rw, const char *ro, uint64_t fsize,
                  struct sbx_jail *j, char *err, size_t errlen);
/* Its folder's entries made its VMM's uid's (again: after huskd made new ones). */
int sbx_jail_own(struct sandbox *sb);
/* The uid of an adopted VMM, from /proc, held again. */
int sbx_jail_adopt(struct sandbox *sb, pid_t pid);
/* Its VMM ended: the uid is free. */
void sbx_jail_release(struct sandbox *sb);

/* ---- sbx_vmm.c: the VMM process and the agent's dial-in ---- */
#define SBX_HOSTNAME_LEN 64
/* Its guest's host name: its id as a DNS label ("sbx_x" gives "sbx-x"). */
void sbx_hostname(const struct sandbox *sb, char out[SBX_HOSTNAME_LEN]);
/* ---- sbx_net.c: its network ---- */
/* A NIC in its VMM: for network.enabled, or for serving network.port. */
static inline bool sbx_has_nic(const struct sandbox *sb)
{
	return sb->net || sb->port || sb->all_ports;
}
/* Bytes it sent to the internet so far, the running VMM's included. */
uint64_t sbx_net_egress(struct sandbox *sb);
/* Every net slot's egress count (free() it), one query for a list of sandboxes; NULL: none. */
uint64_t *sbx_net_egress_all(struct sbx_mgr *m);
/*
 * The host's networking for sandboxes, set up on first use (huskd's
 * nftables table, IPv4 forwarding); NULL with m->net_why saying why not.
 */
struct net_host *sbx_net(struct sbx_mgr *m);
/* network.allow and network.deny (JSON arrays, either NULL) checked into sb->net_policy. */
int sbx_net_policy(struct sandbox *sb, json_t *allow, json_t *deny, struct sbx_err *err);
/* For a VMM about to start: a slot, the lists in the kernel, the resolv.conf it sees (path in
 * resolv). */
int sbx_net_attach(struct sandbox *sb, char *resolv, size_t rlen, char *err, size_t errlen);
/* Its VMM ended (or never started): the slot and the lists go. */
void sbx_net_detach(struct sandbox *sb);
/*
 * A MAC and guest address of its own, recorded in priv (children of one
 * snapshot differ: each resume gives the guest its own); _adopt reads them back.
 */
void sbx_net_identity(struct sandbox *sb, json_t *priv);
void sbx_net_identity_adopt(struct sandbox *sb, json_t *priv);
/* An adopted VMM holds slot again, and its lists go back into huskd's new table. */
void sbx_net_adopt(struct sandbox *sb, int slot);
/* Starts a VMM (booting, or from the memory file restore); 0 or -errno with err. */
/* key: restore's wrapped key when it is sealed, else NULL. */
int sbx_vmm_start(struct sandbox *sb, const char *restore, const char *mem_file, const char *key,
                  char *err, size_t errlen);

#include "sbx_keys.h"

/* Takes up a VMM from before a huskd restart (same pid and start time), and its dial-in. */
/* net_slot: the veth slot recorded for that VMM (-1: none), held again while it runs. */
int sbx_vmm_adopt(struct sandbox *sb, pid_t pid, uint64_t starttime, int net_slot);
/* The end of its guest's console, as one printable line (for a failure's log). */
void sbx_vmm_console_tail(struct sandbox *sb, char *out, size_t len);
/* The end of its VMM's log, the same way. */
void sbx_vmm_log_tail(struct sandbox *sb, char *out, size_t len);
/* Kills the VMM (SIGKILL); its exit follows through the vmm_exited hook. */
void sbx_vmm_stop(struct sandbox *sb);
/* Why the VMM ended (its status, its last words in vmm.log), for a status and the log. */
void sbx_vmm_exit_reason(struct sandbox *sb, int status, char *out, size_t len);
/* Listens for the guest's agent on dir/vsock.sock_53 (before any VMM starts). */
int sbx_dial_listen(struct sandbox *sb);
/* Closes the session and the listener. */
void sbx_dial_close(struct sandbox *sb);

/* ---- sbx_ctl.c: the VMM's control socket ---- */
#define SBX_CTL_TIMEOUT_MS 15000
/* rc 0 for OK (reply: the rest of the line), -EPROTO for ERR, else -errno. */
typedef void (*sbx_ctl_fn)(struct sandbox *sb, int rc, const char *reply);
/* Sends one command; the sandbox is held until fn has run. 0 or -errno (no fn then). */
int sbx_ctl(struct sandbox *sb, const char *cmd, unsigned timeout_ms, sbx_ctl_fn fn);
/* huskd lets go: the answer is not waited for (fn does not run). */
void sbx_ctl_abort(struct sandbox *sb);
/* Has the VMM log its devices' queues and connections (for a silent agent); beside sbx_ctl. */
void sbx_ctl_dump(struct sandbox *sb);
/* An adopted VMM may have been parked by a pause that huskd's restart cut short. */
void sbx_vmm_unpark(struct sandbox *sb);

/* ---- sbx_work.c: image and file work off the loop ---- */
/* Runs work(sb, arg) on a worker thread, then done(sb, rc, arg) on the loop; holds sb. */
int sbx_work(struct sandbox *sb, int (*work)(struct sandbox *sb, void *arg),
             void (*done)(struct sandbox *sb, int rc, void *arg), void *arg)
	__attribute__((warn_unused_result));

/* ---- sbx_call.c: agent requests ---- */
struct sbx_call_ops {
	/* A frame's payload; true asks the agent to stop (a CANCEL: nothing more is wanted). */
	bool (*data)(void *arg, uint8_t type, const void *p, size_t len);
	/* rc 0 RESULT, 1 ERROR (reply {code, message}), <0 with err filled. */
	void (*done)(void *arg, int rc, json_t *reply, const struct sbx_err *err);
	/*
	 * Commands have bounds of their own (their timeout): without this, a
	 * call the agent says nothing on for cfg.call_idle_ms is given up -
	 * done() gets -ETIMEDOUT and the agent a CANCEL.
	 */
	bool no_deadline;
};
/*
 * Sends req (reference kept by the caller) with in (may be NULL) to the
 * sandbox's agent once it is ready (waking it if paused). done always runs
 * once. Holds the sandbox meanwhile.
 */
void sbx_call(struct sandbox *sb, json_t *req, const struct agent_input *in,
              const struct sbx_call_ops *ops, void *arg);
/*
 * The same at once, on the current session (its setup while the sandbox
 * starts, its command): the agent request (valid until done), or NULL when
 * done() already ran with why not.
 */
struct agent_call *sbx_call_now(struct sandbox *sb, json_t *req, const struct agent_input *in,
                                const struct sbx_call_ops *ops, void *arg);
/* An agent ERROR reply as a typed error (not_found → SBX_NOT_FOUND ...); what prefixes it. */
void sbx_agent_error(json_t *reply, struct sbx_err *err, const char *what);
/* What sbx_run captured: stdout (up to its cap), the start of stderr, the exit code. */
struct sbx_run_out {
	struct sbx_buf buf; /* stdout; buf.over: it went past the cap */
	int fd;             /* sbx_run_to: stdout went here instead of buf (buf.len: its bytes) */
	int exit_code;
	char err[1024]; /* stderr's first line */
	size_t err_len;
};
/* err: the command could not run (out is NULL then or partial); else out->exit_code says. */
typedef void (*sbx_run_fn)(struct sandbox *sb, const struct sbx_err *err,
                           const struct sbx_run_out *out, void *arg);
/*
 * Runs argv (stolen) in / once the sandbox is ready, stdin from in (may be
 * NULL), stdout kept up to cap bytes.
 */
void sbx_run(struct sandbox *sb, json_t *argv, const struct agent_input *in, size_t cap,
             sbx_run_fn done, void *arg);
/* sbx_run with stdout written to fd (up to cap bytes; none of it held in memory). */
void sbx_run_to(struct sandbox *sb, json_t *argv, const struct agent_input *in, size_t cap, int fd,
                sbx_run_fn done, void *arg);
/* The same at once on the current session (its setup), no stdin, no stdout kept. */
void sbx_run_now(struct sandbox *sb, json_t *argv, sbx_run_fn done, void *arg);
typedef void (*sbx_files_fn)(struct sandbox *sb, const struct sbx_err *err, void *arg);
/* Writes [{path, content: base64}] (relative paths: the workspace), one by one; now: sbx_call_now.
 */
void sbx_files_write(struct sandbox *sb, json_t *files, bool now, sbx_files_fn done, void *arg);

/* ---- sbx_deps.c: a create's dependencies and packages ---- */
/* A Debian package name apt-get takes (and no option). */
bool sbx_deb_name(const char *s);
/* body's dependencies and packages checked into sb (they need sb->net). 0 or -EINVAL. */
int sbx_deps_plan(struct sandbox *sb, json_t *body, struct sbx_err *err);
/* Installs them on the current session (its setup); done(sb, NULL or why, arg). */
void sbx_deps_install(struct sandbox *sb, sbx_files_fn done, void *arg);

/* ---- sbx_exec.c: executions ---- */
/*
 * The sandbox is up (again): RUNNING with its queued command started, or
 * IDLE. reason (NULL: sb->up_reason) goes with the status change's event.
 */
void sbx_up(struct sandbox *sb, const char *reason);
/*
 * Ends the sandbox's execution at once, recorded with why: cancelled (a
 * destroy, a stop), or failed (the sandbox failed under it).
 */
void sbx_exec_abort(struct sandbox *sb, const char *why, bool failed);
/* The agent dialled in again: a command its old connection took down is recorded as lost. */
void sbx_exec_lost(struct sandbox *sb);

#endif
