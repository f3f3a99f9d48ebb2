/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_TEST_H
#define HUSK_SBX_TEST_H

/*
 * Host-only tests of huskd's sandbox manager (api/huskd/sandbox/): the real
 * manager and store on a libuv loop, husk-vmm played by build/tests/fake-vmm
 * (tests/fakes/README.md), whose pretend guest dials in and serves the agent
 * protocol. No KVM. Waits are for events, bounded generously; nothing here
 * depends on how fast the machine is.
 */
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "sbx_int.h"

/* Long enough for any event here on a loaded machine; reaching it is a failure. */
#define T_WAIT_MS 60000

struct t_env {
	uv_loop_t *loop;
	struct store *store;
	struct sbx_mgr *m;
	char root[256]; /* temp folder: state/, images/ */
	struct sbx_config cfg;
	unsigned changes; /* on_change calls */
};

extern struct t_env T;
extern int t_failed, t_passed;

/* A PASS or FAIL line for name; returns cond. */
bool t_check(const char *name, bool cond, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Opens the store and the manager on T.root (made by t_setup), with cfg as in T.cfg. */
void t_open(void);
/*
 * Lets go (VMMs run on), drains the loop, frees. False if the loop did not
 * drain in T_WAIT_MS (a handle left open, as huskd would hang at its stop):
 * then the fakes are killed first so that the tests go on.
 */
bool t_close(void);
/* Ends every fake VMM the tests started (their processes outlive the manager). */
void t_kill_all(void);

/* Runs the loop until pred(arg) or ms pass; true if pred came true. */
bool t_wait(bool (*pred)(void *arg), void *arg, unsigned ms);
/* Runs the loop for whatever is ready now (no waiting). */
void t_spin(void);

/* Creates a sandbox from body (JSON text) with FAKE_VMM=mode (NULL: none); its id or NULL. */
const char *t_create(const char *body, const char *mode, char *err, size_t errlen);
struct sandbox *t_sb(const char *id);
/* Destroys it and waits until it is gone. */
void t_destroy(const char *id);
/* The state (SBX_GONE once freed). */
enum sbx_state t_state(const char *id);
bool t_wait_state(const char *id, enum sbx_state s);
/* The public status in the store ("" if none). */
const char *t_status(const char *id, char *buf, size_t len);
pid_t t_vmm_pid(const char *id);
/* Whether process pid has exited (reaped here if it was this process's child). */
bool t_ended(pid_t pid);

/* Starts argv (JSON text) in id; the execution id, or NULL with why in err. */
const char *t_exec_start(const char *id, const char *argv, uint64_t timeout_ms, char *err,
                         size_t errlen);
/* Waits for the execution to end; its record (caller decrefs) or NULL. */
json_t *t_exec_wait(const char *exec_id);
/* Starts, waits, returns the record. */
json_t *t_exec(const char *id, const char *argv);

/* An async manager call's outcome, for sbx_done_fn users. */
struct t_done {
	bool done;
	bool ok;
	enum sbx_fault fault;
	char msg[512];
	json_t *data;
	char bytes[256]; /* the start of an answer that is a file (a read), NUL-ended */
	size_t len;      /* that file's whole length */
	/* A file still being written (a read answered as it comes): waited for by t_wait_done. */
	struct outbuf *live;
	int live_fd;
	bool failed; /* it ended failed (cut) */
};
void t_done_cb(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply);
/* Waits for d->done; false if it never came. */
bool t_wait_done(struct t_done *d);
void t_done_reset(struct t_done *d);

/* The test groups. */
/* Whether the file holds text anywhere (binary files too). */
bool t_file_has(const char *path, const char *text);
/* How id's last VMM start got its disk keys (the fake VMM's line in vmm.log), or "". */
const char *t_keys_given(const char *id, char *out, size_t len);
/* Whether text is in the store's database or its log. */
bool t_in_store_files(const char *text);
/* Pauses sandbox id: whether it is paused. */
bool t_pause(const char *id);
/* A snapshot of sandbox id (body: its JSON request): its id into sid, "" if none. */
void t_snapshot(const char *id, const char *body, char sid[STORE_ID_LEN]);

void t_table(void);
void t_lifecycle(void);
void t_executions(void);
void t_failures(void);
void t_adoption(void);
void t_reaping(void);
void t_admission(void);
void t_templates(void);
void t_cgroup_io(void);
void t_sealing(void);
void t_disk_keys(void);
void t_spares(void);
void t_pool(void);
void t_ahead(void);

#endif
