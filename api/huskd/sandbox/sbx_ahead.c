// SPDX-License-Identifier: MIT
/*
 * A resume made ahead (issue J). A resume spends most of its time before
 * the guest runs: husk-jail and the VMM's exec, the VMM's start, KVM, the
 * snapshot opened and its sparse pages placed (nested, ~250-300 of ~700
 * ms to a first exec). Once a sandbox is paused and nothing else is under
 * way for it, its next VMM is started at once with husk-vmm --held: it
 * restores memory.snap (the rest of guest memory comes in lazily, only
 * once the guest runs) and parks its vCPUs before their first instruction,
 * a few MiB of the host's. A resume then only asks its control socket to
 * resume; the agent dials in and the resume goes on as any other.
 *
 * The sandbox stays PAUSED meanwhile (no budget taken; its record names
 * no running VMM, so a huskd restart kills it rather than adopting it).
 * What needs the paused sandbox's files alone - a plan's work (snapshot,
 * checkpoint, restore) - has it dropped first and goes on once it exited.
 * A VMM made ahead that dies or does not answer costs nothing but the time:
 * the resume starts one the usual way. One asked to resume before it has
 * its control socket (a resume right after the pause) is asked again
 * every AHEAD_RETRY_MS until it has. At most huskd --resume-ahead at once;
 * none for a sandbox with a network (its slot and NIC come with a VMM).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sbx_ahead.h"
#include "sbx_keys.h"
#include "sbx_pause.h"
#include "vmm_proc.h"

/* A VMM made a moment ago may not listen yet: its resume is sent again this soon. */
#define AHEAD_RETRY_MS 5

static unsigned ahead_count(const struct sbx_mgr *m)
{
	unsigned n = 0;

	for (const struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		n += sb->ahead != SBX_AHEAD_NONE;
	return n;
}

void sbx_ahead_make(struct sandbox *sb)
{
	struct sbx_mgr *m = sb->m;
	char path[4200], e[512];
	int rc;

	if (!m->cfg.resume_ahead || m->closing || sb->state != SBX_PAUSED || sb->plan.after ||
	    sb->vmm || sb->ahead != SBX_AHEAD_NONE || sb->waiters || sb->exec || sbx_has_nic(sb) ||
	    sb->hidden || sb->pool.on)
		return;
	if (ahead_count(m) >= m->cfg.resume_ahead) {
		log_debug(sb->id,
		          "no VMM made ahead: %u paused sandboxes have one (--resume-ahead)",
		          m->cfg.resume_ahead);
		return;
	}
	sbx_pause_snap_path(sb, path, sizeof(path));
	if (access(path, R_OK) < 0 || (sb->mem_file && access(sb->mem_file, R_OK) < 0))
		return; /* the resume says what is missing */
	sb->ahead = SBX_AHEAD_HELD;
	rc = sbx_vmm_start(sb, path, sb->mem_file, sb->mem_key, e, sizeof(e));
	if (rc) {
		sb->ahead = SBX_AHEAD_NONE;
		log_warn(sb->id, "cannot make its next VMM ahead (%s): a resume starts one", e);
		return;
	}
	log_debug(sb->id, "its next VMM is made ahead: restored and held until a resume");
}

bool sbx_ahead_keys_open(struct sandbox *sb)
{
	const char *path;
	json_t *v;

	if ((sb->disk_key && !sbx_dkey_opens(sb->m, sb->disk_key)) ||
	    (sb->mem_key && !sbx_dkey_opens(sb->m, sb->mem_key)))
		return false;
	json_object_foreach(sb->disk_keys, path, v)
	{
		if (json_is_string(v) && !sbx_dkey_opens(sb->m, json_string_value(v)))
			return false;
	}
	return true;
}

void sbx_ahead_drop(struct sandbox *sb)
{
	if (sb->ahead != SBX_AHEAD_HELD)
		return; /* going already */
	sb->ahead = SBX_AHEAD_DROPPING;
	sbx_vmm_stop(sb);
}

/* RESUMING: the VMM made ahead goes, and the usual one starts once it has gone. */
static void replace(struct sandbox *sb, const char *why)
{
	log_warn(sb->id, "its VMM made ahead did not resume (%s): starting one the usual way", why);
	sb->ahead = SBX_AHEAD_REPLACE;
	sbx_vmm_stop(sb);
}

static void send_resume(struct sandbox *sb);

static void retry_closed(uv_handle_t *h)
{
	free(h);
}

static void retry_fire(uv_timer_t *t)
{
	struct sandbox *sb = t->data;

	uv_close((uv_handle_t *)t, retry_closed);
	if (!sb->m->closing && sb->state == SBX_RESUMING && sb->ahead == SBX_AHEAD_RESUMING)
		send_resume(sb);
	sbx_drop(sb);
}

/* The resume again in AHEAD_RETRY_MS; 0, or -errno. */
static int retry_later(struct sandbox *sb)
{
	uv_timer_t *t = malloc(sizeof(*t));

	if (!t || uv_timer_init(sb->m->loop, t)) {
		free(t);
		return -ENOMEM;
	}
	t->data = sb;
	sbx_hold(sb);
	uv_timer_start(t, retry_fire, AHEAD_RETRY_MS, 0);
	return 0;
}

static void resume_answered(struct sandbox *sb, int rc, const char *reply)
{
	if (sb->ahead != SBX_AHEAD_RESUMING)
		return;
	/* Up already, or ended: that VMM is the sandbox's own now, or gone with it. */
	if (rc == 0 || sb->state != SBX_RESUMING) {
		sb->ahead = SBX_AHEAD_NONE;
		if (rc == 0)
			log_info(sb->id, "resuming on its VMM made ahead");
		return;
	}
	/* Made a moment ago, it is still starting: its control socket comes once KVM is set up. */
	if ((rc == UV_ENOENT || rc == UV_ECONNREFUSED) && sb->vmm &&
	    sbx_pause_now_ms() - sb->pause_t0 < SBX_CTL_TIMEOUT_MS && retry_later(sb) == 0)
		return;
	replace(sb, reply);
}

static void send_resume(struct sandbox *sb)
{
	if (sbx_ctl(sb, "resume", SBX_CTL_TIMEOUT_MS, resume_answered))
		replace(sb, "cannot talk to it");
}

void sbx_ahead_resume(struct sandbox *sb)
{
	if (sb->ahead == SBX_AHEAD_DROPPING) {
		sb->ahead = SBX_AHEAD_REPLACE;
		return;
	}
	if (sb->ahead != SBX_AHEAD_HELD)
		return;
	sb->ahead = SBX_AHEAD_RESUMING;
	send_resume(sb);
}

enum sbx_ahead_next sbx_ahead_exited(struct sandbox *sb, int status)
{
	enum sbx_ahead was = sb->ahead;
	char why[400];

	if (was == SBX_AHEAD_NONE)
		return SBX_AHEAD_NOT_OURS;
	sb->ahead = SBX_AHEAD_NONE;
	if (sb->state == SBX_PAUSED) {
		if (was == SBX_AHEAD_HELD) {
			sbx_vmm_exit_reason(sb, status, why, sizeof(why));
			log_warn(sb->id, "its VMM made ahead ended (%s): a resume starts one", why);
		}
		sbx_dial_close(sb);
		/* A plan waited for its disk and snapshot to be the plan's alone. */
		if (sb->plan.after && !sb->plan.working)
			return SBX_AHEAD_PLAN_GOES;
		/* Dropped with nothing waiting (one left by a huskd killed outright): a new one. */
		if (was == SBX_AHEAD_DROPPING)
			sbx_ahead_make(sb);
		return SBX_AHEAD_GONE;
	}
	return sb->state == SBX_RESUMING && was == SBX_AHEAD_REPLACE ? SBX_AHEAD_RESUME_USUAL
	                                                             : SBX_AHEAD_NOT_OURS;
}

void sbx_ahead_close(struct sbx_mgr *m)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (sb->state == SBX_PAUSED && sb->ahead != SBX_AHEAD_NONE && sb->vmm &&
		    vmm_proc_kill(sb->vmm, SIGKILL))
			log_warn(sb->id, "cannot kill its VMM made ahead");
}
