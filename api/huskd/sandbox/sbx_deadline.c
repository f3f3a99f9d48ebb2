// SPDX-License-Identifier: MIT
/*
 * A sandbox's lifetime deadline (E2B's timeout, API.md §11.1): at a fixed
 * time, whatever its use, a live sandbox ends - or is paused, when its
 * deadline says so. Unlike timeout.idle, use does not move it; only another
 * sbx_set_deadline does. It is recorded (deadlineAt, public; deadlineMs and
 * deadlinePause, private), so a restarted huskd keeps it. A paused sandbox
 * has no deadline running: one that comes due while it is paused is dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_int.h"

static void deadline_closed(uv_handle_t *h)
{
	free(h);
}

static void deadline_save(struct sandbox *sb)
{
	char iso[STORE_ISO_LEN];
	json_t *pub = json_object(), *priv;
	int rc;

	if (!sb->stored || !pub) {
		json_decref(pub);
		return;
	}
	json_object_set_new(pub, "deadlineAt",
	                    sb->deadline_ms ? json_string(store_iso8601(sb->deadline_ms, iso))
	                                    : json_null());
	priv = json_pack("{sIsb}", "deadlineMs", (json_int_t)sb->deadline_ms, "deadlinePause",
	                 sb->deadline_pause);
	rc = priv ? store_sandbox_update(sb->m->store, sb->id, pub, priv, NULL) : -ENOMEM;
	if (rc)
		log_error(sb->id, "cannot record its deadline: %s", strerror(-rc));
	json_decref(pub);
	json_decref(priv);
}

static void deadline_fired(uv_timer_t *t)
{
	struct sandbox *sb = t->data;

	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE)
		return;
	if (sb->state == SBX_PAUSED || sb->state == SBX_PAUSING || sb->state == SBX_FREEZING) {
		sbx_deadline_met(sb, true);
		return;
	}
	/* End it or pause it: what that means in its state is decided at the top. */
	sbx_hold(sb);
	sb->m->hooks->deadline(sb);
	sbx_drop(sb);
}

void sbx_deadline_met(struct sandbox *sb, bool record)
{
	sb->deadline_ms = 0;
	if (record)
		deadline_save(sb);
}

void sbx_deadline_later(struct sandbox *sb, uint64_t ms)
{
	if (sb->deadline)
		uv_timer_start(sb->deadline, deadline_fired, ms, 0);
}

static void deadline_arm(struct sandbox *sb)
{
	int64_t now = sbx_now_ms();

	if (!sb->deadline_ms) {
		if (sb->deadline)
			uv_timer_stop(sb->deadline);
		return;
	}
	if (!sb->deadline) {
		sb->deadline = malloc(sizeof(*sb->deadline));
		if (!sb->deadline) {
			log_error(sb->id, "out of memory for its deadline's timer");
			return;
		}
		uv_timer_init(sb->m->loop, sb->deadline);
		sb->deadline->data = sb;
	}
	uv_timer_start(sb->deadline, deadline_fired,
	               sb->deadline_ms > now ? (uint64_t)(sb->deadline_ms - now) : 0, 0);
}

int sbx_set_deadline(struct sbx_mgr *m, const char *id, uint64_t ms, int pause, struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);

	if (!sb)
		return -ENOENT;
	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE)
		return sbx_fail(err, SBX_ENDED, -ESHUTDOWN, "sandbox %s has ended", id);
	if (!ms || ms > (uint64_t)366 * 24 * 3600 * 1000)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "a deadline must be from 1 ms to a year away");
	sb->deadline_ms = sbx_now_ms() + (int64_t)ms;
	if (pause >= 0)
		sb->deadline_pause = pause;
	deadline_save(sb);
	deadline_arm(sb);
	return 0;
}

void sbx_deadline_restore(struct sandbox *sb, json_t *priv)
{
	sb->deadline_ms = json_integer_value(json_object_get(priv, "deadlineMs"));
	sb->deadline_pause = json_is_true(json_object_get(priv, "deadlinePause"));
	deadline_arm(sb);
}

void sbx_deadline_release(struct sandbox *sb)
{
	if (!sb->deadline)
		return;
	uv_timer_stop(sb->deadline);
	uv_close((uv_handle_t *)sb->deadline, deadline_closed);
	sb->deadline = NULL;
}
