// SPDX-License-Identifier: MIT
/*
 * Pause and resume (API.md §5.1 (6), (7)): the sandbox's VMM parks its vCPUs
 * through its control socket (husk-vmm --control), so every process in the
 * guest stops where it is and carries on after the resume. Guest memory
 * stays in the VMM while paused. A request that needs the guest (execute,
 * files, jobs) resumes a paused sandbox first; execute then says so
 * (autoResumed). timeout.paused ends a sandbox left paused that long.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_resp.h"
#include "sbx_priv.h"
#include "task.h"
#include "vmm_ctl.h"

#define CTL_TIMEOUT_MS 15000

struct pause_task {
	struct sandbox *sb;
	struct http_req *r; /* to answer, or NULL (a resume asked for by a request's need) */
	bool pause;
	int rc;
	char path[4096];
	char reply[256];
};

static void ctl_work(void *arg)
{
	struct pause_task *t = arg;

	t->rc = vmm_ctl(t->path, t->pause ? "pause" : "resume", t->reply, sizeof(t->reply),
	                CTL_TIMEOUT_MS);
	if (t->rc && t->rc != -EPROTO)
		snprintf(t->reply, sizeof(t->reply), "%s", strerror(-t->rc));
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
		return;
	}
	sbx_transition(sb->d, sb->id, "paused", "paused by request", NULL);
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
	/* Someone asked for the guest while it was pausing. */
	if (sb->waiting)
		sbx_wake(sb);
}

static void resume_done(struct pause_task *t)
{
	struct sandbox *sb = t->sb;

	sb->resuming = false;
	if (sb->ending) {
		if (t->r)
			api_error(t->r, 409, "SANDBOX_TERMINATED",
			          "sandbox %s ended while resuming", sb->id);
		sbx_ready_fail(sb);
		sbx_maybe_free(sb);
		return;
	}
	if (t->rc) {
		huskd_log(sb->id, "cannot resume: %s", t->reply);
		if (t->r)
			api_error(t->r, 500, "INTERNAL", "cannot resume sandbox %s: %s", sb->id,
			          t->reply);
		sbx_ready_fail(sb);
		return;
	}
	sbx_timer_stop(sb);
	sb->ready = true;
	sbx_transition(sb->d, sb->id, "idle",
	               t->r ? "resumed by request" : "resumed to serve a request", NULL);
	if (t->r)
		api_ok(t->r, 200, NULL);
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

static int ctl_start(struct sandbox *sb, struct http_req *r, bool pause)
{
	struct pause_task *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->sb = sb;
	t->r = r;
	t->pause = pause;
	snprintf(t->path, sizeof(t->path), "%s/control.sock", sb->dir);
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
	if (sb->pausing || sb->resuming || sb->ending || strcmp(sb->status, "paused"))
		return;
	if (ctl_start(sb, NULL, false))
		sbx_ready_fail(sb);
}

/* The live sandbox id, or NULL after answering 404 or 409. */
static struct sandbox *live(struct huskd *d, struct http_req *r, const char *id)
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
	struct sandbox *sb = live(d, r, id);

	if (!sb)
		return;
	if (sb->current || sb->pausing || sb->resuming || strcmp(sb->status, "idle") ||
	    !sb->ready) {
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
	if (ctl_start(sb, r, true)) {
		sb->ready = true;
		sbx_idle_arm(sb);
		api_error(r, 503, "UNAVAILABLE", "cannot pause sandbox %s now; try again", id);
	}
}

void sbx_resume(struct huskd *d, struct http_req *r, const char *id)
{
	struct sandbox *sb = live(d, r, id);

	if (!sb)
		return;
	if (sb->resuming) {
		api_ok(r, 200, NULL);
		return;
	}
	if (sb->pausing || strcmp(sb->status, "paused")) {
		api_error(r, 409, "INVALID_STATE",
		          "sandbox %s is %s: only a paused sandbox resumes", id,
		          sb->pausing ? "pausing" : sb->status);
		return;
	}
	if (ctl_start(sb, r, false))
		api_error(r, 503, "UNAVAILABLE", "cannot resume sandbox %s now; try again", id);
}
