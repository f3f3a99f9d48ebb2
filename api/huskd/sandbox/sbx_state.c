// SPDX-License-Identifier: MIT
/*
 * A sandbox's life as one table: its states, the public status each one
 * records, the moves allowed out of each, and what entering a state means
 * here, at the bottom of the manager: its record and event, its countdown,
 * its cgroup quota, the requests waiting for it. sbx_to() is the only code
 * that changes sb->state. What the manager does about a state (start a
 * command, stop a VMM) is decided above, in sbx_life.c: this file tells it
 * through the hooks (sb->m->hooks) and never calls up.
 *
 *   CREATING ─► BOOTING ───────┐            ┌──────────────► STOPPING ─► GONE
 *     │    └──► RESTORING ─────┤            │  (from every state but GONE)
 *     │        (a warm VMM) ▲▼ │
 *     │             POOLED     │
 *     ├──────► ADOPTING ───────┼─► IDLE ◄─► RUNNING
 *     │           RESUMING ────┤    │
 *     │          REBOOTING ────┘    └─► PAUSING ─► PAUSED ◄─► FREEZING
 *     └─(huskd restart)────────────────────────────► │  ▲          │
 *                                 RESUMING ◄───────┘  └──────────┤
 *                                 REBOOTING ◄────────────────────┘
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_cgroup.h"
#include "sbx_int.h"

#define B(s) (1u << (s))
/* The states a start ends in: a command waiting makes it RUNNING at once. */
#define UP (B(SBX_IDLE) | B(SBX_RUNNING))

static const struct state_info {
	const char *name;
	const char *status; /* the public status recorded on entry; NULL keeps the last one */
	uint32_t to;        /* the states it may move to */
} table[SBX_NSTATES] = {
	/* After a huskd restart a sandbox is taken up from its record: ADOPTING or PAUSED. */
	[SBX_CREATING] = {"creating", NULL,
                          B(SBX_BOOTING) | B(SBX_RESTORING) | B(SBX_ADOPTING) | B(SBX_PAUSED) |
                                  B(SBX_STOPPING)},
	[SBX_BOOTING] = {"booting", "creating", UP | B(SBX_STOPPING)},
	[SBX_RESTORING] = {"restoring", "creating", UP | B(SBX_POOLED) | B(SBX_STOPPING)},
	/* Recorded nowhere until a create takes it (RESTORING again, its vCPUs run). */
	[SBX_POOLED] = {"pooled", NULL, B(SBX_RESTORING) | B(SBX_STOPPING)},
	[SBX_ADOPTING] = {"adopting", NULL, UP | B(SBX_STOPPING)},
	[SBX_IDLE] = {"idle", "idle", B(SBX_RUNNING) | B(SBX_PAUSING) | B(SBX_STOPPING)},
	[SBX_RUNNING] = {"running", "running", B(SBX_IDLE) | B(SBX_STOPPING)},
	/* A failed snapshot leaves the guest running: back up. */
	[SBX_PAUSING] = {"pausing", NULL, B(SBX_PAUSED) | UP | B(SBX_STOPPING)},
	[SBX_PAUSED] = {"paused", "paused",
                        B(SBX_RESUMING) | B(SBX_FREEZING) | B(SBX_REBOOTING) | B(SBX_STOPPING)},
	[SBX_FREEZING] = {"freezing", NULL,
                          B(SBX_PAUSED) | B(SBX_RESUMING) | B(SBX_REBOOTING) | B(SBX_STOPPING)},
	/* A VMM that dies while resuming leaves memory.snap as it was: back to PAUSED. */
	[SBX_RESUMING] = {"resuming", NULL, UP | B(SBX_PAUSED) | B(SBX_STOPPING)},
	[SBX_REBOOTING] = {"rebooting", NULL, UP | B(SBX_STOPPING)},
	[SBX_STOPPING] = {"stopping", NULL, B(SBX_GONE)},
	[SBX_GONE] = {"gone", NULL, 0},
};

const char *sbx_state_name(enum sbx_state s)
{
	return s < SBX_NSTATES ? table[s].name : "?";
}

bool sbx_can(enum sbx_state from, enum sbx_state to)
{
	return from < SBX_NSTATES && to < SBX_NSTATES && (table[from].to & B(to));
}

bool sbx_starting(enum sbx_state s)
{
	return s == SBX_BOOTING || s == SBX_RESTORING || s == SBX_ADOPTING || s == SBX_RESUMING ||
	       s == SBX_REBOOTING;
}

bool sbx_ready(const struct sandbox *sb)
{
	return (sb->state == SBX_IDLE || sb->state == SBX_RUNNING) && sb->session;
}

/* ---- timers: one per sandbox, its meaning given by the state ---- */

static void timer_fired(uv_timer_t *t)
{
	struct sandbox *sb = t->data;

	sbx_hold(sb);
	sb->m->hooks->timer(sb);
	sbx_drop(sb);
}

static void timer_closed(uv_handle_t *h)
{
	free(h);
}

static void timer_start(struct sandbox *sb, uint64_t ms)
{
	if (!sb->timer) {
		sb->timer = malloc(sizeof(*sb->timer));
		if (!sb->timer) {
			log_error(sb->id, "out of memory for its timer: no countdown");
			return;
		}
		uv_timer_init(sb->m->loop, sb->timer);
		sb->timer->data = sb;
	}
	uv_timer_start(sb->timer, timer_fired, ms, 0);
}

/* The countdown a state runs: idle and paused timeouts, the wait for the agent. */
static void timer_arm(struct sandbox *sb)
{
	bool up = sb->state == SBX_IDLE || sb->state == SBX_RUNNING;

	if (sb->timer)
		uv_timer_stop(sb->timer);
	/* Up, but its agent's connection is gone: it must dial in again in time. */
	if (up && !sb->session)
		timer_start(sb, sb->m->cfg.ready_ms);
	else if (sb->state == SBX_IDLE && sb->idle_ms)
		timer_start(sb, sb->idle_ms);
	else if (sb->state == SBX_PAUSED && sb->paused_ms)
		timer_start(sb, sb->paused_ms);
	else if (sbx_starting(sb->state))
		timer_start(sb, sb->m->cfg.ready_ms);
}

void sbx_setup_longer(struct sandbox *sb, uint64_t ms)
{
	if (sbx_starting(sb->state))
		timer_start(sb, ms);
}

void sbx_touch(struct sandbox *sb)
{
	if (sb->state == SBX_IDLE)
		timer_arm(sb);
}

void sbx_session_changed(struct sandbox *sb)
{
	if (sb->state == SBX_IDLE || sb->state == SBX_RUNNING)
		timer_arm(sb);
}

void sbx_state_release(struct sandbox *sb)
{
	sbx_deadline_release(sb);
	if (sb->timer) {
		uv_timer_stop(sb->timer);
		uv_close((uv_handle_t *)sb->timer, timer_closed);
		sb->timer = NULL;
	}
}

void sbx_state_forget(struct sandbox *sb)
{
	/* Not a move of the sandbox's life: its record keeps the state, for adoption. */
	sb->state = SBX_GONE;
	sbx_state_release(sb);
}

/* ---- waiters: requests held until the sandbox is ready ---- */

void sbx_waiters_run(struct sandbox *sb, const struct sbx_err *err)
{
	/* New waiters may be added by the ones run: take the list first. */
	struct sbx_waiter *w = sb->waiters;

	sb->waiters = NULL;
	sbx_hold(sb);
	while (w) {
		struct sbx_waiter *next = w->next;

		w->fn(sb, err, w->arg);
		free(w);
		w = next;
	}
	sbx_drop(sb);
}

void sbx_when_ready(struct sandbox *sb, sbx_ready_fn fn, void *arg)
{
	struct sbx_waiter *w, **pp;
	struct sbx_err err;

	if (sbx_ready(sb)) {
		fn(sb, NULL, arg);
		return;
	}
	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE) {
		sbx_fail(&err, SBX_ENDED, -ESHUTDOWN, "sandbox %s has ended", sb->id);
		fn(sb, &err, arg);
		return;
	}
	if ((sb->state == SBX_IDLE || sb->state == SBX_RUNNING) && !sb->session) {
		sbx_fail(&err, SBX_UNREACHABLE, -ENOTCONN,
		         "sandbox %s: its agent is not connected (it dials in again by itself; "
		         "try again)",
		         sb->id);
		fn(sb, &err, arg);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		fn(sb, &err, arg);
		return;
	}
	w->fn = fn;
	w->arg = arg;
	for (pp = &sb->waiters; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	sbx_wake(sb);
}

void sbx_wake(struct sandbox *sb)
{
	/* A paused sandbox is woken for the request (API.md: autoResumed). */
	if (sb->state == SBX_PAUSED && !sb->plan.after)
		sb->m->hooks->wake(sb);
}

/* ---- the transition ---- */

/* Records the public status (and its event) when it changes. */
static void record(struct sandbox *sb, const char *status, const char *reason, json_t *patch)
{
	struct store_transition t = {.status = status, .patch = patch};
	int rc;

	if (!sb->stored || (sb->recorded && !strcmp(sb->recorded, status) && !patch))
		return;
	if (reason)
		t.event = json_pack("{ss}", "reason", reason);
	rc = store_sandbox_transition(sb->m->store, sb->id, &t, NULL);
	json_decref(t.event);
	if (rc)
		log_error(sb->id, "cannot record status %s: %s", status, strerror(-rc));
	sb->recorded = sbx_public_status(status);
}

/* The cgroup's cpu quota holds while the guest is up, not while huskd works for it. */
static void quota(struct sandbox *sb)
{
	bool limited = sb->state == SBX_IDLE || sb->state == SBX_RUNNING;
	int rc;

	if (!sb->cgroup || sb->cpu_limited == limited || sb->state == SBX_STOPPING ||
	    sb->state == SBX_GONE || sb->state == SBX_PAUSED || sb->state == SBX_FREEZING)
		return;
	rc = cgroup_cpu_max(sb->cgroup, limited ? sb->cpu_millis : 0);
	if (rc)
		log_warn(sb->id, "cannot %s its cpu limit: %s", limited ? "set" : "lift",
		         strerror(-rc));
	else
		sb->cpu_limited = limited;
}

int sbx_to(struct sandbox *sb, enum sbx_state to, const char *reason, json_t *patch)
{
	enum sbx_state from = sb->state;
	const char *status;
	struct sbx_err err;

	if (!sbx_can(from, to)) {
		log_error(sb->id, "refused move from %s to %s (a bug in huskd)",
		          sbx_state_name(from), sbx_state_name(to));
		return -EINVAL;
	}
	sb->state = to;
	log_debug(sb->id, "%s -> %s%s%s", sbx_state_name(from), sbx_state_name(to),
	          reason ? ": " : "", reason ? reason : "");
	status = to == SBX_STOPPING ? sb->end_status : table[to].status;
	if (status)
		record(sb, status, reason, patch);
	timer_arm(sb);
	quota(sb);
	sbx_hold(sb);
	if (to == SBX_STOPPING) {
		/* What runs stops first (its command recorded cancelled), then who waited hears. */
		sb->m->hooks->stopping(sb);
		sbx_fail(&err, SBX_ENDED, -ESHUTDOWN, "sandbox %s has ended (%s)", sb->id,
		         sb->end_status);
		if (sb->waiters)
			sbx_waiters_run(sb, &err);
		if (!sb->vmm)
			sbx_to(sb, SBX_GONE, NULL, NULL);
	} else if (to == SBX_GONE) {
		sbx_state_release(sb);
		/* A template's maker leaves no record: no request ever saw it. */
		if (sb->hidden && sb->stored && store_sandbox_purge(sb->m->store, sb->id))
			log_warn(sb->id, "cannot remove the record of a template's maker");
	} else if ((to == SBX_IDLE || to == SBX_RUNNING) && sb->waiters) {
		sbx_waiters_run(sb, NULL);
	}
	if (status)
		sbx_notify(sb->m, sb->id);
	sbx_drop(sb);
	return 0;
}

void sbx_end(struct sandbox *sb, const char *status, const char *reason, json_t *patch)
{
	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE)
		return;
	sb->end_status = status;
	snprintf(sb->end_reason, sizeof(sb->end_reason), "%s", reason ? reason : status);
	if (!strcmp(status, "failed"))
		log_error(sb->id, "failed: %s", reason ? reason : "(no reason)");
	else
		log_info(sb->id, "%s: %s", status, reason ? reason : "(no reason)");
	sbx_to(sb, SBX_STOPPING, reason, patch);
}
