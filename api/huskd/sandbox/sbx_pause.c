// SPDX-License-Identifier: MIT
/*
 * Pause and resume (API.md §5.1 (6), (7)). Pause: the sandbox's VMM parks
 * its vCPUs, writes the guest (memory lz4-compressed, disks flushed) to
 * dir/memory.snap and quits, so a paused sandbox holds no memory or CPU.
 * What the pause was for (a plan) then goes on: stay paused, rework the
 * layers (checkpoints, snapshots) off the loop, resume. Resume: a new VMM
 * from memory.snap; the guest carries on and its agent dials in again.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx_ahead.h"
#include "sbx_int.h"
#include "sbx_pause.h"
#include "sbx_setup.h"

/* Writing a snapshot takes about a second per GiB of touched memory on real KVM. */
#define SNAPSHOT_TIMEOUT_MS 600000
/* Hands the outcome to the plan, which moves the sandbox on. */
static void plan_end(struct sandbox *sb, int rc, const char *err)
{
	struct sbx_pause_plan plan = sb->plan;

	struct sbx_err e;

	sb->plan = (struct sbx_pause_plan){0};
	sbx_hold(sb);
	if (plan.after)
		plan.after(sb, rc, err, plan.arg);
	/* A plan that left it as its work did ends paused. */
	if (sb->state == SBX_FREEZING)
		sbx_to(sb, SBX_PAUSED, NULL, NULL);
	/* Requests that came while it paused: the plan left it paused, so wake it now. */
	if (sb->state == SBX_PAUSED && (sb->waiters || sb->exec) &&
	    sbx_resume_start(sb, "resumed to serve a request", &e)) {
		if (sb->exec)
			sbx_exec_abort(sb, e.msg, true);
		sbx_waiters_run(sb, &e);
	}
	/* Paused, and nothing more under way: its resume is made ahead. */
	sbx_ahead_make(sb);
	sbx_drop(sb);
}

/* ---- the control socket's steps: pause, snapshot, quit ---- */

/*
 * The pause did not happen. If the guest can run on, it is up again;
 * otherwise its VMM is stopped, and the VMM's exit ends the sandbox and
 * the plan (sbx_pause_vmm_gone), with the VMM's own reason.
 */
static void pause_failed(struct sandbox *sb, int rc, const char *why, bool guest_runs)
{
	char msg[600];

	snprintf(msg, sizeof(msg), "cannot pause: %s", why);
	log_error(sb->id, "%s", msg);
	if (!guest_runs && sb->state == SBX_PAUSING && sb->vmm) {
		snprintf(sb->pause_err, sizeof(sb->pause_err), "%.500s", msg);
		sbx_vmm_stop(sb);
		return;
	}
	sbx_hold(sb);
	if (guest_runs && sb->state == SBX_PAUSING)
		sbx_up(sb, NULL);
	else if (sb->state == SBX_PAUSING)
		sbx_end(sb, "failed", msg, NULL);
	plan_end(sb, rc, msg);
	sbx_drop(sb);
}

static void resumed_after_failure(struct sandbox *sb, int rc, const char *reply)
{

	if (rc)
		log_error(sb->id, "cannot resume its VMM after a failed snapshot: %s", reply);
	pause_failed(sb, -EIO, sb->pause_err, rc == 0);
}

static void quit_answered(struct sandbox *sb, int rc, const char *reply)
{

	/* The VMM's exit (sbx_pause_vmm_gone) goes on from here. */
	if (rc && sb->state == SBX_PAUSING) {
		log_error(sb->id, "husk-vmm did not quit after its snapshot (%s): killing it",
		          reply);
		sbx_vmm_stop(sb);
	}
}

static void snapshot_answered(struct sandbox *sb, int rc, const char *reply);

/* Asks the parked VMM for memory.snap: a diff over its memory file, or whole. */
static int snapshot_ask(struct sandbox *sb)
{
	char cmd[4300], path[4200];

	sbx_pause_snap_path(sb, path, sizeof(path));
	/* On a memory file only what differs from it is written, and the file maps again at resume.
	 */
	snprintf(cmd, sizeof(cmd), "%s %s",
	         sb->mem_file && !sb->plan.full ? "snapshot-diff" : "snapshot", path);
	return sbx_ctl(sb, cmd, SNAPSHOT_TIMEOUT_MS, snapshot_answered);
}

static void snapshot_answered(struct sandbox *sb, int rc, const char *reply)
{

	if (sb->state != SBX_PAUSING) {
		return;
	}
	/*
	 * A VMM that refused the diff (one adopted from before an upgrade knows
	 * no "snapshot-diff") is asked for the whole guest instead.
	 */
	if (rc == -EPROTO && sb->mem_file && !sb->plan.full) {
		log_warn(sb->id, "no diff snapshot (%s): writing it whole", reply);
		sb->plan.full = true;
		if (snapshot_ask(sb) == 0)
			return;
	}
	sbx_seal_done(sb, rc == 0);
	if (rc) {
		snprintf(sb->pause_err, sizeof(sb->pause_err), "snapshot: %s", reply);
		/* The guest can go on as it was: resume it rather than lose it. */
		if (sbx_ctl(sb, "resume", SBX_CTL_TIMEOUT_MS, resumed_after_failure))
			pause_failed(sb, -EIO, sb->pause_err, false);
		return;
	}
	log_debug(sb->id, "%s written (%s)", sb->mem_file && !sb->plan.full ? "diff" : "snapshot",
	          reply);
	/* A full memory.snap stands alone: it resumes without the memory file. */
	if (sb->plan.full && sb->mem_file) {
		free(sb->mem_file);
		sb->mem_file = NULL;
		sbx_save(sb, json_pack("{sn}", "memFile"));
	}
	sb->plan.step = PLAN_QUITTING;
	if (sbx_ctl(sb, "quit", SBX_CTL_TIMEOUT_MS, quit_answered))
		sbx_vmm_stop(sb);
}

/* The VMM holds the key to seal with (or none): the snapshot comes next. */
static void key_answered(struct sandbox *sb, int rc, const char *reply)
{
	if (sb->state != SBX_PAUSING)
		return;
	/* A VMM from before sealing (adopted) knows no "key": it holds none either. */
	if (rc == -EPROTO && !sb->mem_key_next)
		rc = 0;
	if (rc) {
		sbx_seal_done(sb, false);
		snprintf(sb->pause_err, sizeof(sb->pause_err), "cannot seal its memory: %s", reply);
		if (sbx_ctl(sb, "resume", SBX_CTL_TIMEOUT_MS, resumed_after_failure))
			pause_failed(sb, -EIO, sb->pause_err, false);
		return;
	}
	if (snapshot_ask(sb))
		pause_failed(sb, -EIO, "cannot talk to husk-vmm", false);
}

static void pause_answered(struct sandbox *sb, int rc, const char *reply)
{
	char cmd[160], err[400];

	if (sb->state != SBX_PAUSING) {
		return;
	}
	if (rc) {
		/* A VMM that cannot even park may be wedged: it would not resume either. */
		pause_failed(sb, rc, reply, rc == -EPROTO);
		return;
	}
	sb->plan.step = PLAN_SAVING;
	rc = sbx_seal_next(sb, cmd, sizeof(cmd), err, sizeof(err));
	if (rc) {
		key_answered(sb, rc, err);
		return;
	}
	rc = cmd[0] ? sbx_ctl(sb, cmd, SBX_CTL_TIMEOUT_MS, key_answered) : snapshot_ask(sb);
	OPENSSL_cleanse(cmd, sizeof(cmd));
	if (rc)
		pause_failed(sb, -EIO, "cannot talk to husk-vmm", false);
}

int sbx_pause_start(struct sandbox *sb, const struct sbx_pause_plan *plan, struct sbx_err *err)
{
	if (sb->state != SBX_IDLE || !sb->vmm)
		return sbx_fail(err, SBX_STATE, -EBUSY,
		                "sandbox %s is %s: only an idle sandbox can be paused", sb->id,
		                sb->state == SBX_RUNNING ? "running a command"
		                                         : sbx_state_name(sb->state));
	sb->plan = *plan;
	sb->pause_err[0] = '\0';
	sb->pause_t0 = sbx_pause_now_ms();
	sbx_to(sb, SBX_PAUSING, NULL, NULL);
	if (sbx_ctl(sb, "pause", SBX_CTL_TIMEOUT_MS, pause_answered)) {
		pause_failed(sb, -EIO, "cannot talk to husk-vmm", true);
		return sbx_fail(err, SBX_UNAVAILABLE, -EAGAIN,
		                "cannot pause sandbox %s now; try again", sb->id);
	}
	return 0;
}

/* ---- after the VMM quit ---- */

static void frozen(struct sandbox *sb, int rc, void *arg)
{
	(void)arg;
	sb->plan.working = false;
	/* Stopped meanwhile: whatever the work did, the plan's sandbox is gone. */
	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE) {
		snprintf(sb->pause_err, sizeof(sb->pause_err), "sandbox %s has ended (%s)", sb->id,
		         sb->end_status);
		rc = -ESHUTDOWN;
	}
	plan_end(sb, rc, sb->pause_err);
}

void sbx_plan_abort(struct sandbox *sb, const char *why)
{
	/* Its work off the loop still uses the plan: frozen() ends it when that is done. */
	if (sb->plan.after && !sb->plan.working)
		plan_end(sb, -ESHUTDOWN, why);
}

static int freeze_work(struct sandbox *sb, void *arg)
{
	(void)arg;
	return sb->plan.freeze(sb, sb->plan.arg, sb->pause_err, sizeof(sb->pause_err));
}

void sbx_plan_go(struct sandbox *sb)
{
	int rc;

	/* A VMM made ahead holds its disk and snapshot: it goes first (sbx_ahead_exited()). */
	if (sb->vmm) {
		sbx_ahead_drop(sb);
		return;
	}
	if (!sb->plan.freeze) {
		plan_end(sb, 0, NULL);
		return;
	}
	sb->plan.step = PLAN_FREEZING;
	sbx_to(sb, SBX_FREEZING, NULL, NULL);
	rc = sbx_work(sb, freeze_work, frozen, NULL);
	sb->plan.working = rc == 0;
	if (rc) {
		snprintf(sb->pause_err, sizeof(sb->pause_err), "cannot queue the work: %s",
		         uv_strerror(rc));
		sbx_to(sb, SBX_PAUSED, NULL, NULL);
		plan_end(sb, rc, sb->pause_err);
	}
}

void sbx_pause_vmm_gone(struct sandbox *sb, int status)
{
	char why[1024];

	/*
	 * Quitting, its snapshot was written and answered for. An adopted
	 * VMM's exit has no status, and that is no reason to throw the written
	 * snapshot away.
	 */
	if (sb->plan.step != PLAN_QUITTING || (status != 0 && status != VMM_STATUS_UNKNOWN)) {
		char how[320];

		sbx_vmm_exit_reason(sb, status, how, sizeof(how));
		snprintf(why, sizeof(why), "%s while pausing%s%s", how,
		         sb->pause_err[0] ? "; " : "", sb->pause_err);
		sbx_end(sb, "failed", why, NULL);
		plan_end(sb, -EIO, why);
		return;
	}
	sbx_save(sb, json_pack("{sb}", "onDisk", 1));
	log_info(sb->id, "paused in %lld ms (%s)%s", sbx_pause_now_ms() - sb->pause_t0,
	         sb->plan.reason ? sb->plan.reason : "paused",
	         sb->mem_file ? ", a diff over its memory file" : "");
	sbx_to(sb, SBX_PAUSED, sb->plan.reason ? sb->plan.reason : "paused by request", NULL);
	sbx_plan_go(sb);
}

int sbx_freeze_start(struct sandbox *sb, const struct sbx_pause_plan *plan, struct sbx_err *err)
{
	if (sb->state != SBX_PAUSED || sb->plan.after)
		return sbx_fail(err, SBX_STATE, -EBUSY, "sandbox %s is %s: try again", sb->id,
		                sbx_state_name(sb->state));
	sb->plan = *plan;
	sb->pause_err[0] = '\0';
	sbx_plan_go(sb);
	return 0;
}

/* ---- resume ---- */

int sbx_resume_start(struct sandbox *sb, const char *reason, struct sbx_err *err)
{
	char why[512];
	int rc;

	if (sb->state != SBX_PAUSED && sb->state != SBX_FREEZING)
		return sbx_fail(err, SBX_STATE, -EBUSY,
		                "sandbox %s is %s: only a paused sandbox resumes", sb->id,
		                sbx_state_name(sb->state));
	/* Its VMM made ahead is going for a plan's work, which wakes it after. */
	if (sb->state == SBX_PAUSED && sb->plan.after)
		return sbx_fail(err, SBX_STATE, -EBUSY,
		                "sandbox %s is busy (a snapshot or checkpoint of it is under way); "
		                "try again",
		                sb->id);
	/* A paused sandbox holds no budget: it takes its share again, or waits for room. */
	if (sb->state == SBX_PAUSED) {
		rc = sbx_admit(sb->m, sb->mem_mib, sb->vcpus, err);
		if (rc)
			return rc;
	}
	/* Its org's key shredded since its VMM was made ahead: the usual start says so. */
	if (sb->ahead == SBX_AHEAD_HELD && !sbx_ahead_keys_open(sb))
		sbx_ahead_drop(sb);
	rc = sb->ahead == SBX_AHEAD_NONE ? sbx_resume_vmm(sb, why, sizeof(why)) : 0;
	if (rc)
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot resume sandbox %s: %s", sb->id, why);
	sb->up_reason = reason;
	sb->pause_t0 = sbx_pause_now_ms();
	sbx_to(sb, SBX_RESUMING, NULL, NULL);
	sbx_ahead_resume(sb);
	return 0;
}

int sbx_resume_vmm(struct sandbox *sb, char *why, size_t len)
{
	char path[4200];
	int rc;

	sbx_pause_snap_path(sb, path, sizeof(path));
	if (access(path, R_OK) < 0) {
		rc = -errno;
		snprintf(why, len, "its snapshot %s is gone (%s)", path, strerror(-rc));
		return rc;
	}
	/* Its memory.snap is a diff over this file (kept while a sandbox sits on it). */
	if (sb->mem_file && access(sb->mem_file, R_OK) < 0) {
		rc = -errno;
		snprintf(why, len, "the memory file %s its snapshot goes over is gone (%s)",
		         sb->mem_file, strerror(-rc));
		return rc;
	}
	rc = sbx_vmm_start(sb, path, sb->mem_file, sb->mem_key, why, len);
	if (rc)
		log_error(sb->id, "cannot resume: %s", why);
	return rc;
}

/* The resumed guest has its clock again: memory.snap goes, and the record says it runs. */
static void resumed(struct sandbox *sb, const struct sbx_err *err)
{
	char path[4200];

	if (err) {
		/* Its memory.snap is still there: the VMM's exit takes it back to PAUSED. */
		log_error(sb->id, "the resumed guest cannot be set up: %s", err->msg);
		sbx_vmm_stop(sb);
		return;
	}
	sbx_pause_snap_path(sb, path, sizeof(path));
	unlink(path);
	sbx_save(sb, json_pack("{sb}", "onDisk", 0));
	sbx_seal_forget(sb);
	log_info(sb->id, "resumed from its snapshot%s in %lld ms",
	         sb->mem_file ? " over its memory file" : "", sbx_pause_now_ms() - sb->pause_t0);
	sbx_up(sb, NULL);
}

void sbx_resume_hello(struct sandbox *sb)
{
	sbx_setup_start(sb, SETUP_RESUMED, resumed);
}

void sbx_resume_failed(struct sandbox *sb, const char *why)
{
	struct sbx_err err;

	log_error(sb->id, "cannot resume: %s", why);
	sbx_dial_close(sb);
	sbx_fail(&err, SBX_INTERNAL, -EIO, "cannot resume sandbox %s: %s", sb->id, why);
	/* Who waited hears first, so that PAUSED does not wake it again for them. */
	if (sb->exec)
		sbx_exec_abort(sb, err.msg, true);
	sbx_waiters_run(sb, &err);
	sbx_to(sb, SBX_PAUSED, "its resume failed", NULL);
}

/* ---- the API's pause and resume ---- */

struct answer {
	sbx_done_fn done;
	void *ctx;
};

static void api_paused(struct sandbox *sb, int rc, const char *why, void *arg)
{
	struct answer *a = arg;
	struct sbx_reply reply = {0};
	char until[STORE_ISO_LEN];
	struct sbx_err err;

	if (rc) {
		sbx_fail(&err,
		         sb->state == SBX_STOPPING || sb->state == SBX_GONE ? SBX_ENDED
		                                                            : SBX_INTERNAL,
		         rc, "cannot pause sandbox %s: %s", sb->id, why ? why : strerror(-rc));
		a->done(a->ctx, &err, NULL);
	} else {
		reply.data = json_pack("{ssss}", "sandboxId", sb->id, "status", "paused");
		if (sb->paused_ms)
			json_object_set_new(
				reply.data, "terminatesAt",
				json_string(store_iso8601(store_now_ms() + (int64_t)sb->paused_ms,
			                                  until)));
		a->done(a->ctx, NULL, &reply);
		json_decref(reply.data);
	}
	free(a);
}

/* The live sandbox and its answer, or NULL after done() said why not. */
static struct answer *answer_new(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx,
                                 struct sandbox **sb)
{
	struct answer *a;
	struct sbx_err err;

	*sb = sbx_lookup(m, id, &err);
	a = *sb ? calloc(1, sizeof(*a)) : NULL;
	if (!a) {
		if (*sb)
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return NULL;
	}
	*a = (struct answer){.done = done, .ctx = ctx};
	return a;
}

void sbx_pause(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb;
	struct answer *a = answer_new(m, id, done, ctx, &sb);
	struct sbx_err err;

	if (!a)
		return;
	if (sbx_pause_start(sb,
	                    &(struct sbx_pause_plan){
				    .reason = "paused by request", .after = api_paused, .arg = a},
	                    &err)) {
		free(a);
		done(ctx, &err, NULL);
	}
}

static void api_resumed(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct answer *a = arg;

	(void)sb;
	a->done(a->ctx, err, NULL);
	free(a);
}

void sbx_resume(struct sbx_mgr *m, const char *id, sbx_done_fn done, void *ctx)
{
	struct sandbox *sb;
	struct answer *a = answer_new(m, id, done, ctx, &sb);
	struct sbx_err err;

	if (!a)
		return;
	if (sb->state != SBX_PAUSED && sb->state != SBX_RESUMING) {
		sbx_fail(&err, SBX_STATE, -EBUSY, "sandbox %s is %s: only a paused sandbox resumes",
		         id, sb->state == SBX_RUNNING ? "running" : sbx_state_name(sb->state));
		free(a);
		done(ctx, &err, NULL);
		return;
	}
	/* A plan's work under way (its VMM made ahead going first) wakes it after. */
	if (sb->state == SBX_PAUSED && !sb->plan.after &&
	    sbx_resume_start(sb, "resumed by request", &err)) {
		free(a);
		done(ctx, &err, NULL);
		return;
	}
	sbx_when_ready(sb, api_resumed, a);
}
