// SPDX-License-Identifier: MIT
/*
 * Pause and resume (API.md §5.1 (6), (7)). Pause: the sandbox's VMM parks
 * its vCPUs (husk-vmm --control), writes a snapshot of the guest (memory
 * lz4-compressed, disks flushed) to dir/memory.snap and quits, so a paused
 * sandbox holds no memory and no CPU. Resume: a new VMM starts from the
 * snapshot; every process in the guest carries on where it stopped. A
 * request that needs the guest (execute, files, jobs) resumes a paused
 * sandbox first; execute then says so (autoResumed). timeout.paused ends a
 * sandbox left paused that long.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "json_resp.h"
#include "sbx_priv.h"
#include "task.h"
#include "vmm_ctl.h"
#include "vmm_proc.h"

#define CTL_TIMEOUT_MS 15000
/* Writing a snapshot takes about a second per GiB of touched memory on real KVM. */
#define SNAPSHOT_TIMEOUT_MS 300000
#define AGENT_WAIT_MS 120000
#define SNAPSHOT_FILE "memory.snap"

struct pause_task {
	struct sandbox *sb;
	struct http_req *r; /* to answer, or NULL (a resume asked for by a request's need) */
	bool pause;
	bool restored;      /* resume: a new VMM started from the snapshot; wait for its agent */
	const char *reason; /* for the status change's event */
	pid_t pid;          /* pause: the VMM, which ends after its snapshot */
	sbx_then_fn then;   /* sbx_suspend/sbx_unsuspend: who goes on from here */
	void *then_arg;
	int rc;
	char path[4096], snap[4096], vsock[4096];
	char reply[512];
	long long ms;
};

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ctl(struct pause_task *t, const char *cmd, int timeout_ms)
{
	int rc = vmm_ctl(t->path, cmd, t->reply, sizeof(t->reply), timeout_ms);

	if (rc && rc != -EPROTO)
		snprintf(t->reply, sizeof(t->reply), "%s: %s", cmd, strerror(-rc));
	return rc;
}

/*
 * Waits until the quitting VMM has exited (a zombie, or gone): what follows a
 * pause may start a new VMM on the same sockets and disk at once.
 */
static void wait_exited(struct pause_task *t)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)t->pid);
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(path, "re");
		char *p = NULL;

		if (!f)
			return;
		if (fgets(buf, sizeof(buf), f))
			p = strrchr(buf, ')');
		fclose(f);
		if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
			return;
		usleep(10 * 1000);
	}
}

/* Pause: park, save, quit; a failed save lets the guest run on. */
static void pause_work(struct pause_task *t)
{
	char cmd[4200];

	t->rc = ctl(t, "pause", CTL_TIMEOUT_MS);
	if (t->rc)
		return;
	snprintf(cmd, sizeof(cmd), "snapshot %s", t->snap);
	t->rc = ctl(t, cmd, SNAPSHOT_TIMEOUT_MS);
	if (t->rc) {
		char why[sizeof(t->reply)];

		snprintf(why, sizeof(why), "%s", t->reply);
		/* Keep the first reason; a failed resume only adds to it. */
		if (ctl(t, "resume", CTL_TIMEOUT_MS))
			huskd_log(NULL, "cannot resume after a failed snapshot: %s", t->reply);
		memcpy(t->reply, why, sizeof(why));
		return;
	}
	t->rc = ctl(t, "quit", CTL_TIMEOUT_MS);
	if (!t->rc)
		wait_exited(t);
}

/* Resume of a restored VMM: its agent answers once the guest runs again. */
static void agent_wait(struct pause_task *t)
{
	long long until = mono_ms() + AGENT_WAIT_MS;

	do {
		struct agent_client *c = NULL;
		json_t *req = json_pack("{ss}", "op", "info"), *out = NULL;

		t->rc = agent_client_connect_vsock(t->vsock, AGENT_VSOCK_PORT, &c);
		/* The guest resets the old VMM's connections as it wakes: try again after that. */
		if (!t->rc)
			t->rc = agent_call(c, req, &out) ? -EAGAIN : 0;
		/* Its clock stood still on disk: set it (and reseed its random state). */
		if (!t->rc && agent_resumed(c))
			huskd_log(t->sb->id, "the restored guest's clock was not set");
		json_decref(req);
		json_decref(out);
		agent_client_close(c);
		if (!t->rc)
			return;
		usleep(200 * 1000);
	} while (mono_ms() < until);
	snprintf(t->reply, sizeof(t->reply),
	         "the restored guest's agent did not answer within %d s", AGENT_WAIT_MS / 1000);
}

static void ctl_work(void *arg)
{
	struct pause_task *t = arg;
	long long t0 = mono_ms();

	if (t->pause)
		pause_work(t);
	else if (t->restored)
		agent_wait(t);
	else
		t->rc = ctl(t, "resume", CTL_TIMEOUT_MS);
	t->ms = mono_ms() - t0;
}

/* Remembered across huskd restarts: an on-disk paused sandbox has no VMM to adopt. */
static int mark_on_disk(struct sandbox *sb, bool on_disk)
{
	json_t *priv = json_pack("{sb}", "onDisk", on_disk);
	int rc = priv ? store_sandbox_update(sb->d->store, sb->id, NULL, priv, NULL) : -ENOMEM;

	json_decref(priv);
	return rc;
}

static void paused_fired(uv_timer_t *timer)
{
	struct sandbox *sb = timer->data;
	char why[96];

	if (sb->ending || strcmp(sb->status, "paused"))
		return;
	snprintf(why, sizeof(why), "paused for %llu s: terminated (timeout.paused)",
	         (unsigned long long)(sb->paused_ms / 1000));
	huskd_log(sb->id, "%s", why);
	sbx_end(sb, "terminated", why, NULL);
}

/* Hands the outcome to whoever started it through sbx_suspend/unsuspend. */
/* The caller's callback may end the sandbox: it is freed after, not under us. */
static void then(struct pause_task *t, int rc)
{
	if (t->then) {
		t->sb->held++;
		t->then(t->sb, rc, t->reply, t->then_arg);
		t->sb->held--;
	}
	t->then = NULL;
}

/* After then(): true (and freed if nothing else holds it) when the sandbox was ended. */
static bool ended_by_then(struct sandbox *sb)
{
	if (!sb->ending)
		return false;
	sbx_ready_fail(sb);
	sbx_maybe_free(sb);
	return true;
}

static void pause_done(struct pause_task *t)
{
	struct sandbox *sb = t->sb;
	char until[STORE_ISO_LEN];
	json_t *out;

	sb->pausing = false;
	if (sb->ending) {
		if (t->r)
			api_error(t->r, 409, "SANDBOX_TERMINATED", "sandbox %s ended while pausing",
			          sb->id);
		then(t, -ESHUTDOWN);
		sbx_maybe_free(sb);
		return;
	}
	if (t->rc) {
		huskd_log(sb->id, "cannot pause: %s", t->reply);
		sb->ready = true;
		sbx_idle_arm(sb);
		sbx_ready_run(sb);
		if (t->r)
			api_error(t->r, 500, "INTERNAL", "cannot pause sandbox %s: %s", sb->id,
			          t->reply);
		then(t, t->rc);
		ended_by_then(sb);
		return;
	}
	/* Its exit may not have reached the loop yet: it is expected, reap it here. */
	if (sb->vmm) {
		vmm_proc_reap_release(sb->vmm);
		sb->vmm = NULL;
	}
	sb->vmm_gone = true;
	sb->on_disk = true;
	if (mark_on_disk(sb, true))
		huskd_log(sb->id, "cannot record that it is paused on disk");
	huskd_log(sb->id, "paused in %lld ms: %s", t->ms, t->reply);
	sbx_transition(sb->d, sb->id, "paused", t->reason ? t->reason : "paused by request", NULL);
	out = json_pack("{ssss}", "sandboxId", sb->id, "status", "paused");
	if (sb->paused_ms) {
		sbx_timer_start(sb, paused_fired, sb->paused_ms);
		json_object_set_new(
			out, "terminatesAt",
			json_string(store_iso8601(store_now_ms() + (int64_t)sb->paused_ms, until)));
	}
	if (t->r)
		api_ok_fields(t->r, 200, out);
	else
		json_decref(out);
	then(t, 0);
	if (ended_by_then(sb))
		return;
	/* Someone asked for the guest while it was pausing. */
	if (sb->waiting)
		sbx_wake(sb);
}

static void resume_done(struct pause_task *t)
{
	struct sandbox *sb = t->sb;

	sb->resuming = false;
	if (t->restored)
		sbx_cpu_limit(sb, true);
	if (sb->ending) {
		if (t->r)
			api_error(t->r, 409, "SANDBOX_TERMINATED",
			          "sandbox %s ended while resuming", sb->id);
		then(t, -ESHUTDOWN);
		sbx_ready_fail(sb);
		sbx_maybe_free(sb);
		return;
	}
	if (t->rc) {
		huskd_log(sb->id, "cannot resume: %s", t->reply);
		if (t->r)
			api_error(t->r, 500, "INTERNAL", "cannot resume sandbox %s: %s", sb->id,
			          t->reply);
		then(t, t->rc);
		if (!ended_by_then(sb))
			sbx_ready_fail(sb);
		return;
	}
	sbx_timer_stop(sb);
	if (t->restored) {
		sb->on_disk = false;
		if (mark_on_disk(sb, false))
			huskd_log(sb->id, "cannot record that it runs again");
		unlink(t->snap);
		huskd_log(sb->id, "resumed from its snapshot in %lld ms", t->ms);
	}
	sb->ready = true;
	sbx_transition(sb->d, sb->id, "idle",
	               t->reason ? t->reason
	               : t->r    ? "resumed by request"
	                         : "resumed to serve a request",
	               NULL);
	if (t->r)
		api_ok(t->r, 200, NULL);
	then(t, 0);
	if (!ended_by_then(sb))
		sbx_ready_run(sb);
}

static void ctl_done(void *arg)
{
	struct pause_task *t = arg;

	if (t->pause)
		pause_done(t);
	else
		resume_done(t);
	free(t);
}

static int ctl_start(struct sandbox *sb, struct http_req *r, bool pause, const char *reason,
                     sbx_then_fn then_fn, void *then_arg)
{
	struct pause_task *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->sb = sb;
	t->r = r;
	t->pause = pause;
	t->reason = reason;
	t->then = then_fn;
	t->then_arg = then_arg;
	t->pid = sb->vmm ? vmm_proc_pid(sb->vmm) : 0;
	snprintf(t->path, sizeof(t->path), "%s/control.sock", sb->dir);
	snprintf(t->snap, sizeof(t->snap), "%s/" SNAPSHOT_FILE, sb->dir);
	snprintf(t->vsock, sizeof(t->vsock), "%s", sb->vsock);
	if (!pause && sb->on_disk) {
		struct vmm_spec spec;
		char err[512];

		/* The old VMM must be gone before a new one takes its sockets. */
		if (sb->vmm) {
			free(t);
			return -EAGAIN;
		}
		if (sb->cgroup)
			mkdir(sb->cgroup, 0755);
		sbx_cpu_limit(sb, false);
		sbx_vmm_spec(sb, t->snap, &spec);
		if (sbx_start_vmm(sb, &spec, err, sizeof(err))) {
			huskd_log(sb->id, "cannot restore: %s", err);
			free(t);
			return -EIO;
		}
		sb->vmm_gone = false;
		t->restored = true;
	}
	if (task_run(sb->d->tasks, ctl_work, ctl_done, t)) {
		free(t);
		return -EAGAIN;
	}
	if (pause)
		sb->pausing = true;
	else
		sb->resuming = true;
	return 0;
}

bool sbx_paused(const struct sandbox *sb)
{
	return sb->pausing || !strcmp(sb->status, "paused");
}

void sbx_wake(struct sandbox *sb)
{
	if (sb->pausing || sb->resuming || sb->ending || sb->restoring ||
	    strcmp(sb->status, "paused"))
		return;
	if (ctl_start(sb, NULL, false, NULL, NULL, NULL))
		sbx_ready_fail(sb);
}

int sbx_suspend(struct sandbox *sb, const char *reason, sbx_then_fn then_fn, void *arg)
{
	int rc;

	if (sb->current || sb->pausing || sb->resuming || !sb->ready || strcmp(sb->status, "idle"))
		return -EBUSY;
	sb->ready = false;
	sbx_timer_stop(sb);
	rc = ctl_start(sb, NULL, true, reason, then_fn, arg);
	if (rc) {
		sb->ready = true;
		sbx_idle_arm(sb);
	}
	return rc;
}

int sbx_unsuspend(struct sandbox *sb, const char *reason, sbx_then_fn then_fn, void *arg)
{
	if (sb->pausing || sb->resuming || !sb->on_disk || strcmp(sb->status, "paused"))
		return -EBUSY;
	return ctl_start(sb, NULL, false, reason, then_fn, arg);
}

struct sandbox *sbx_live(struct huskd *d, struct http_req *r, const char *id)
{
	struct sandbox *sb = sbx_find(d, id);
	json_t *info = NULL;

	if (sb && !sb->ending)
		return sb;
	if (store_sandbox_get(d->store, id, &info, NULL))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", id);
	else
		api_error(r, 409, "INVALID_STATE", "sandbox %s is %s", id,
		          json_string_value(json_object_get(info, "status")));
	json_decref(info);
	return NULL;
}

void sbx_pause(struct huskd *d, struct http_req *r, const char *id)
{
	struct sandbox *sb = sbx_live(d, r, id);

	if (!sb)
		return;
	if (sb->current || sb->pausing || sb->resuming || sb->restoring ||
	    strcmp(sb->status, "idle") || !sb->ready) {
		api_error(r, 409, "INVALID_STATE",
		          "sandbox %s is %s%s: only an idle sandbox can be paused", id,
		          sb->pausing    ? "pausing"
		          : sb->resuming ? "resuming"
		                         : sb->status,
		          sb->current ? " (running a command)" : "");
		return;
	}
	/* Requests from now on wait for a resume instead of reaching a frozen guest. */
	sb->ready = false;
	sbx_timer_stop(sb);
	if (ctl_start(sb, r, true, NULL, NULL, NULL)) {
		sb->ready = true;
		sbx_idle_arm(sb);
		api_error(r, 503, "UNAVAILABLE", "cannot pause sandbox %s now; try again", id);
	}
}

/* timeout.idle ran out and huskd runs with --on-idle pause: to disk, not the end. */
int sbx_pause_idle(struct sandbox *sb)
{
	int rc;

	if (sb->current || sb->pausing || sb->resuming || sb->restoring || !sb->ready ||
	    strcmp(sb->status, "idle"))
		return -EBUSY;
	sb->ready = false;
	sbx_timer_stop(sb);
	rc = ctl_start(sb, NULL, true, "idle: paused instead of terminated (huskd --on-idle pause)",
	               NULL, NULL);
	if (rc)
		sb->ready = true;
	return rc;
}

void sbx_resume(struct huskd *d, struct http_req *r, const char *id)
{
	struct sandbox *sb = sbx_live(d, r, id);

	if (!sb)
		return;
	if (sb->resuming && !sb->restoring) {
		api_ok(r, 200, NULL);
		return;
	}
	if (sb->restoring) {
		api_error(r, 409, "INVALID_STATE", "sandbox %s is busy with a checkpoint", id);
		return;
	}
	if (sb->pausing || strcmp(sb->status, "paused")) {
		api_error(r, 409, "INVALID_STATE",
		          "sandbox %s is %s: only a paused sandbox resumes", id,
		          sb->pausing ? "pausing" : sb->status);
		return;
	}
	if (ctl_start(sb, r, false, NULL, NULL, NULL))
		api_error(r, 503, "UNAVAILABLE", "cannot resume sandbox %s now; try again", id);
}
