// SPDX-License-Identifier: MIT
/*
 * The top of the manager: what the events from below mean in each state.
 * A VMM exits, a guest's agent dials in, a countdown runs out, someone
 * needs a paused guest, a sandbox starts to stop: the layers underneath
 * report these through the hooks, and only this file decides what follows.
 * Also the manager itself (open, close) and destroy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net_host.h"
#include "sbx_ahead.h"
#include "sbx_import.h"
#include "sbx_int.h"
#include "sbx_pause.h"
#include "sbx_pool.h"
#include "sbx_setup.h"
#include "sbx_spare.h"
#include "sbx_tmpl.h"
#include "vmm_proc.h"

static void vmm_exited(struct sandbox *sb, int status)
{
	char reason[400], console[1024];

	sbx_meter_vmm_ended(sb);
	switch (sbx_ahead_exited(sb, status)) {
	case SBX_AHEAD_GONE:
		return;
	case SBX_AHEAD_PLAN_GOES:
		sbx_plan_go(sb);
		return;
	case SBX_AHEAD_RESUME_USUAL:
		if (sbx_resume_vmm(sb, reason, sizeof(reason)))
			sbx_resume_failed(sb, reason);
		return;
	case SBX_AHEAD_NOT_OURS:
		break;
	}
	switch (sb->state) {
	case SBX_STOPPING:
		sbx_to(sb, SBX_GONE, NULL, NULL);
		break;
	case SBX_PAUSING:
		sbx_pause_vmm_gone(sb, status);
		break;
	case SBX_RESUMING:
		sbx_vmm_exit_reason(sb, status, reason, sizeof(reason));
		sbx_resume_failed(sb, reason);
		break;
	default:
		sbx_vmm_exit_reason(sb, status, reason, sizeof(reason));
		/* A crashed guest's panic is on its console; a hidden sandbox's folder goes with
		 * it. */
		if (status == 3) {
			sbx_vmm_console_tail(sb, console, sizeof(console));
			log_error(sb->id, "its guest crashed; its console ended with: %s",
			          console[0] ? console : "(nothing)");
		}
		sbx_end(sb, "failed", reason, NULL);
		break;
	}
}

/* A booted (or warm-started, or rebooted) guest is set up: it is up, or it failed. */
static void set_up(struct sandbox *sb, const struct sbx_err *err)
{
	char reason[640];

	if (err) {
		snprintf(reason, sizeof(reason), "cannot prepare the sandbox: %s", err->msg);
		sbx_end(sb, "failed", reason, NULL);
		return;
	}
	sbx_up(sb, NULL);
}

static void agent_hello(struct sandbox *sb)
{
	switch (sb->state) {
	case SBX_BOOTING:
	case SBX_REBOOTING:
		sbx_setup_start(sb, SETUP_BOOTED, set_up);
		break;
	case SBX_RESTORING:
		/* A warm VMM waits parked for its create; set up once a create takes it. */
		if (sb->pool.on) {
			sbx_pool_hello(sb);
			break;
		}
		/* A warm start: the snapshot's guest, with this sandbox's env and files. */
		sbx_setup_start(sb, sb->from_template ? SETUP_TEMPLATE : SETUP_RESTORED, set_up);
		break;
	case SBX_RESUMING:
		sbx_resume_hello(sb);
		break;
	case SBX_ADOPTING:
		sbx_up(sb, NULL);
		break;
	case SBX_IDLE:
	case SBX_RUNNING:
		/* A dial-in while it is up: its old connection broke, and a command with it. */
		sbx_exec_lost(sb);
		break;
	default:
		break;
	}
}

static void idle_ran_out(struct sandbox *sb)
{
	struct sbx_pause_plan plan = {
		.reason = "idle: paused instead of terminated (huskd --on-idle pause)"};
	struct sbx_err err;
	char why[128];

	if (sb->m->cfg.idle_pause) {
		if (sbx_pause_start(sb, &plan, &err) == 0) {
			log_info(sb->id, "idle for %llu s: pausing it (--on-idle pause)",
			         (unsigned long long)(sb->idle_ms / 1000));
			return;
		}
		log_warn(sb->id, "idle, but cannot pause it (%s): terminating", err.msg);
	}
	snprintf(why, sizeof(why), "idle for %llu s: reaped (timeout.idle)",
	         (unsigned long long)(sb->idle_ms / 1000));
	sbx_end(sb, "terminated", why, NULL);
}

static void timer(struct sandbox *sb)
{
	char why[160], console[1024];

	if ((sb->state == SBX_IDLE || sb->state == SBX_RUNNING) && !sb->session) {
		snprintf(why, sizeof(why),
		         "its agent's connection broke and it did not dial in again within %.1f s",
		         (double)sb->m->cfg.ready_ms / 1000);
		sbx_end(sb, "failed", why, NULL);
		return;
	}
	switch (sb->state) {
	case SBX_IDLE:
		idle_ran_out(sb);
		break;
	case SBX_PAUSED:
		snprintf(why, sizeof(why), "paused for %llu s: terminated (timeout.paused)",
		         (unsigned long long)(sb->paused_ms / 1000));
		sbx_end(sb, "terminated", why, NULL);
		break;
	case SBX_RESUMING:
		/* Its memory.snap is still there: the VMM's exit takes it back to PAUSED. */
		log_error(sb->id,
		          "its agent did not dial in within %.1f s of the resume; stopping "
		          "that VMM",
		          (double)sb->m->cfg.ready_ms / 1000);
		sbx_vmm_stop(sb);
		break;
	default:
		if (!sbx_starting(sb->state))
			break;
		if (sb->session)
			snprintf(why, sizeof(why),
			         "the sandbox's agent dialled in but its setup did not finish "
			         "within "
			         "%.1f s",
			         (double)sb->m->cfg.ready_ms / 1000);
		else
			snprintf(why, sizeof(why),
			         "the sandbox's agent did not dial in within %.1f s",
			         (double)sb->m->cfg.ready_ms / 1000);
		/* What the guest said last is the best clue: it goes to the log. */
		sbx_vmm_console_tail(sb, console, sizeof(console));
		log_error(sb->id, "its console ended with: %s", console[0] ? console : "(nothing)");
		sbx_end(sb, "failed", why, NULL);
		break;
	}
}

static void wake(struct sandbox *sb)
{
	struct sbx_err err;

	if (sbx_resume_start(sb, "resumed to serve a request", &err) == 0)
		return;
	if (sb->exec)
		sbx_exec_abort(sb, err.msg, true);
	sbx_waiters_run(sb, &err);
}

static void stopping(struct sandbox *sb)
{
	const char *status = sb->end_status ? sb->end_status : "terminated";
	bool failed = !strcmp(status, "failed");
	char why[480];

	/* Recorded before its VMM goes; the layer is thrown away, so no clean shutdown. */
	if (sb->exec) {
		snprintf(why, sizeof(why), "the sandbox %s: %s",
		         failed                       ? "failed"
		         : !strcmp(status, "deleted") ? "was destroyed"
		                                      : "was terminated",
		         sb->end_reason);
		sbx_exec_abort(sb, why, failed);
	}
	sbx_job_tails_end(sb, true);
	sbx_plan_abort(sb, sb->end_reason);
	sbx_dial_close(sb);
	/*
	 * A silent agent's request (sbx_call.c) asked the VMM for its queues and
	 * connections: when that silence fails the sandbox, they are the only
	 * clue to why, so the VMM answers first (at most SBX_CTL_TIMEOUT_MS).
	 */
	if (failed && sb->dump && sb->vmm)
		sb->kill_after_dump = true;
	else
		sbx_vmm_stop(sb);
}

static void template_wanted(struct sbx_mgr *m, struct sbx_tmpl *t)
{
	sbx_tmpl_make(m, t);
}

static void pool_wanted(struct sbx_mgr *m, json_t *body)
{
	sbx_create_pooled(m, body);
}

/* A pause that cannot start now (the sandbox is busy being changed) is tried again this soon. */
#define DEADLINE_RETRY_MS 1000

static void deadline(struct sandbox *sb)
{
	struct sbx_pause_plan plan = {.reason = "its timeout ran out: paused (autoPause)"};
	struct sbx_err err;

	if (!sb->deadline_pause) {
		sbx_deadline_met(sb, false);
		sbx_end(sb, "terminated", "its timeout ran out", NULL);
		return;
	}
	if (sbx_pause_start(sb, &plan, &err) != 0) {
		log_info(sb->id, "its timeout ran out, but it cannot pause yet (%s): trying again",
		         err.msg);
		sbx_deadline_later(sb, DEADLINE_RETRY_MS);
		return;
	}
	log_info(sb->id, "its timeout ran out: pausing it");
	sbx_deadline_met(sb, true);
}

static void let_go(struct sandbox *sb)
{
	struct sbx_mgr *m = sb->m;

	/* Its memory and disk are gone with its folder: so are the keys that sealed them. */
	if (!m->closing) {
		if (sb->dir)
			sbx_remove_dir(sb->dir);
		sbx_seal_forget(sb);
		sbx_dkey_forget(sb);
	}
	sbx_job_tails_end(sb, !m->closing);
	sbx_free(sb);
	/* It may have been the last user of a deleted snapshot. */
	if (!m->closing)
		snap_gc(m);
}

static const struct sbx_hooks hooks = {
	.vmm_exited = vmm_exited,
	.agent_hello = agent_hello,
	.timer = timer,
	.wake = wake,
	.stopping = stopping,
	.template_wanted = template_wanted,
	.pool_wanted = pool_wanted,
	.let_go = let_go,
	.deadline = deadline,
};

int sbx_destroy(struct sbx_mgr *m, const char *id, struct sbx_err *err)
{
	struct sandbox *sb = sbx_find(m, id);
	json_t *info = NULL;
	int rc;

	if (sb && sb->state != SBX_STOPPING && sb->state != SBX_GONE) {
		sbx_end(sb, "deleted", "destroyed by request", NULL);
		return 0;
	}
	rc = store_sandbox_get(m->store, id, &info, NULL);
	if (rc == -ENOENT)
		return sbx_fail(err, SBX_NO_SANDBOX, rc, "sandbox %s not found", id);
	if (!rc && strcmp(json_string_value(json_object_get(info, "status")), "deleted"))
		rc = store_sandbox_set_status(m->store, id, "deleted", "destroyed by request");
	json_decref(info);
	sbx_notify(m, id);
	/* -EINVAL: already deleted, or a status the store keeps (nothing to do). */
	if (rc && rc != -EINVAL)
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot destroy %s: %s", id, strerror(-rc));
	return 0;
}

int sbx_mgr_open(uv_loop_t *loop, struct store *store, const struct sbx_config *cfg,
                 struct sbx_mgr **out)
{
	struct sbx_mgr *m = calloc(1, sizeof(*m));
	char path[4200];

	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->store = store;
	m->hooks = &hooks;
	m->cfg = *cfg;
	m->cfg.state = strdup(cfg->state);
	m->cfg.vmm = strdup(cfg->vmm);
	m->cfg.kernel = strdup(cfg->kernel);
	m->cfg.initrd = strdup(cfg->initrd);
	m->cfg.jail = cfg->jail ? strdup(cfg->jail) : NULL;
	m->cfg.dns_upstream = cfg->dns_upstream ? strdup(cfg->dns_upstream) : NULL;
	m->cfg.cgroup_dir = cfg->cgroup_dir ? strdup(cfg->cgroup_dir) : NULL;
	m->cfg.importer = cfg->importer ? strdup(cfg->importer) : NULL;
	if (!m->cfg.ready_ms)
		m->cfg.ready_ms = 180000;
	if (!m->cfg.call_idle_ms)
		m->cfg.call_idle_ms = 120000;
	/* A read is answered as it comes, from a file: the guest's disk bounds it, not this. */
	if (!m->cfg.read_max)
		m->cfg.read_max = UINT64_MAX;
	if (!m->cfg.state || !m->cfg.vmm || !m->cfg.kernel || !m->cfg.initrd ||
	    asprintf(&m->streams, "%s/streams", cfg->state) < 0) {
		m->streams = NULL;
		sbx_mgr_free(m);
		return -ENOMEM;
	}
	for (const char *const *sub = (const char *const[]){"sandboxes", "streams", "snapshots",
	                                                    "builds", "jail", NULL};
	     *sub; sub++) {
		snprintf(path, sizeof(path), "%s/%s", cfg->state, *sub);
		mkdir(path, 0700);
	}
	m->io.bps = cfg->disk_bps;
	m->io.iops = cfg->disk_iops;
	if (m->cfg.cgroup_dir && (m->io.bps || m->io.iops)) {
		int rc = cgroup_disk_of(cfg->state, m->io.disk);

		if (rc) {
			m->io.disk[0] = 0;
			log_warn(NULL,
			         "the state folder %s is on no disk huskd can limit (%s): "
			         "sandboxes' "
			         "disk I/O is not limited",
			         cfg->state, strerror(-rc));
		}
	}
	sbx_import_start(m);
	sbx_tmpl_load(m);
	sbx_spare_start(m);
	sbx_pool_sweep(m);
	sbx_memfile_sweep(m);
	if (sbx_reap_start(m))
		log_warn(NULL, "cannot start the removal of old streams and builds");
	if (sbx_meter_start(m))
		log_warn(NULL, "cannot start sampling sandboxes' cgroups: no cpuTimeMs or "
		               "memoryByteSec while they run");
	*out = m;
	return 0;
}

void sbx_mgr_close(struct sbx_mgr *m)
{
	struct sandbox *sb, *next;
	struct sbx_err err;

	sbx_fail(&err, SBX_UNAVAILABLE, -ESHUTDOWN, "huskd is stopping; try again once it is back");
	m->closing = true;
	m->on_change = NULL;
	sbx_reap_stop(m);
	sbx_meter_stop(m);
	sbx_import_close(m);
	sbx_streams_close(m);
	sbx_tmpl_close(m);
	sbx_spare_close(m);
	sbx_pool_close(m);
	sbx_ahead_close(m);
	sbx_memfile_close(m);
	/* Its DNS forwarder's sockets would keep the loop running; the table stays. */
	net_host_close(m->net);
	m->net = NULL;
	/* VMMs run on, to be adopted; what huskd holds for them goes. */
	for (sb = m->sandboxes; sb; sb = next) {
		next = sb->next;
		sbx_hold(sb);
		sbx_ctl_abort(sb);
		sbx_dial_close(sb);
		if (sb->vmm) {
			vmm_proc_release(sb->vmm);
			sb->vmm = NULL;
		}
		/* What waited or ran is told, so its owner (a request) can go. */
		if (sb->exec)
			sbx_exec_abort(sb, "huskd stopped while the command was under way", true);
		sbx_job_tails_end(sb, false);
		if (sb->waiters)
			sbx_waiters_run(sb, &err);
		sbx_state_forget(sb);
		sbx_drop(sb);
	}
}

void sbx_mgr_free(struct sbx_mgr *m)
{
	if (!m)
		return;
	/* Work still in flight when the loop stopped: its sandboxes go with it. */
	while (m->sandboxes) {
		m->sandboxes->refs = 0;
		sbx_state_forget(m->sandboxes);
		sbx_drop(m->sandboxes);
	}
	free((char *)m->cfg.state);
	free((char *)m->cfg.vmm);
	free((char *)m->cfg.kernel);
	free((char *)m->cfg.initrd);
	free((char *)m->cfg.jail);
	free((char *)m->cfg.dns_upstream);
	free((char *)m->cfg.cgroup_dir);
	free((char *)m->cfg.importer);
	while (m->imports)
		sbx_import_free(m->imports);
	sbx_tmpl_free(m);
	sbx_spare_close(m);
	net_host_close(m->net); /* if sbx_mgr_close did not run */
	free(m->streams);
	free(m);
}
