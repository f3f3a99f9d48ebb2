// SPDX-License-Identifier: MIT
/*
 * After a huskd restart: every sandbox the store calls live is taken up
 * again. A VMM still running (same pid and start time) is adopted and its
 * agent, which dials home again by itself, brings it back up; a sandbox
 * paused to disk stays paused; one whose VMM is gone, or which was still
 * starting, failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_ahead.h"
#include "sbx_int.h"
#include "sbx_pause.h"
#include "sbx_tmpl.h"

static char *priv_string(json_t *priv, const char *key)
{
	const char *s = json_string_value(json_object_get(priv, key));

	return s ? strdup(s) : NULL;
}

/* The sandbox's fields as create recorded them. */
static void restore_fields(struct sandbox *sb, json_t *priv)
{
	const char *snap = json_string_value(json_object_get(priv, "baseSnapshot"));

	sb->stored = true;
	sb->oneshot = json_is_true(json_object_get(priv, "oneshot"));
	sb->net = json_is_true(json_object_get(priv, "network"));
	sb->port = (unsigned)json_integer_value(json_object_get(priv, "port"));
	sb->all_ports = json_is_true(json_object_get(priv, "allPorts"));
	sbx_net_identity_adopt(sb, priv);
	sb->egress_rate = (uint64_t)json_integer_value(json_object_get(priv, "egressRate"));
	sb->egress_bytes = (uint64_t)json_integer_value(json_object_get(priv, "netEgress"));
	if (sb->net) {
		struct sbx_err err;

		/* Checked at create: a list refused now would be a bug, logged. */
		if (sbx_net_policy(sb, json_object_get(priv, "netAllow"),
		                   json_object_get(priv, "netDeny"), &err))
			log_error(sb->id, "its network lists: %s", err.msg);
	}
	sb->exec_timeout_ms = (uint64_t)json_integer_value(json_object_get(priv, "execTimeoutMs"));
	sb->idle_ms = (uint64_t)json_integer_value(json_object_get(priv, "idleMs"));
	sb->paused_ms = (uint64_t)json_integer_value(json_object_get(priv, "pausedMs"));
	sb->mem_mib = (uint64_t)json_integer_value(json_object_get(priv, "memMib"));
	sb->vcpus = (unsigned)json_integer_value(json_object_get(priv, "vcpus"));
	sb->cpu_millis = json_integer_value(json_object_get(priv, "cpuMillis"));
	if (sb->cpu_millis <= 0)
		sb->cpu_millis = (int64_t)sb->vcpus * 1000;
	sb->layer = priv_string(priv, "layer");
	sb->base = priv_string(priv, "base");
	sb->mem_file = priv_string(priv, "memFile");
	sb->mem_key = priv_string(priv, "memKey");
	sbx_dkey_adopt(sb, priv);
	sbx_meter_restore(sb, priv);
	sbx_deadline_restore(sb, priv);
	snprintf(sb->org, sizeof(sb->org), "%s",
	         json_string_value(json_object_get(priv, "orgId")) ?: STORE_DEFAULT_ORG);
	snprintf(sb->base_snap, sizeof(sb->base_snap), "%s", snap ? snap : "");
	if (sb->m->cfg.cgroup_dir &&
	    asprintf(&sb->cgroup, "%s/%s", sb->m->cfg.cgroup_dir, sb->id) < 0)
		sb->cgroup = NULL;
	/* A restart during its start-up may have left the quota lifted. */
	sb->cpu_limited = false;
	json_decref(sb->env);
	sb->env = json_deep_copy(json_object_get(priv, "env"));
	if (!sb->env)
		sb->env = json_object();
	json_decref(sb->image);
	sb->image = json_deep_copy(json_object_get(priv, "image"));
}

/* Marks a sandbox that cannot be taken up failed, and lets it go. */
static void adopt_fail(struct sandbox *sb, const char *why)
{
	int n = 0;

	/* Its jobs went with its guest. */
	if (store_abandon_unfinished(sb->m->store, sb->id, why, true, &n) == 0 && n)
		log_warn(sb->id, "%d unfinished job(s) marked failed", n);
	sb->end_status = "failed";
	log_error(sb->id, "failed: %s", why);
	sbx_to(sb, SBX_STOPPING, why, NULL);
}

static void adopt_one(struct sbx_mgr *m, json_t *row)
{
	const char *id = json_string_value(json_object_get(row, "sandboxId"));
	const char *status = json_string_value(json_object_get(row, "status"));
	json_t *priv = json_object_get(row, "private");
	pid_t pid = (pid_t)json_integer_value(json_object_get(priv, "pid"));
	uint64_t start = (uint64_t)json_integer_value(json_object_get(priv, "starttime"));
	json_t *slot = json_object_get(priv, "netSlot");
	int net_slot = json_is_integer(slot) ? (int)json_integer_value(slot) : -1;
	char path[4200];
	struct sandbox *sb;
	int n = 0;

	if (!id || !status)
		return;
	sb = sbx_new(m, id);
	if (!sb)
		return;
	restore_fields(sb, priv);
	sb->recorded = sbx_public_status(status);
	if (json_is_true(json_object_get(priv, "templateMaker"))) {
		/* Its template was being made by the old huskd: the next create asks again. */
		sb->hidden = true;
		if (sbx_vmm_adopt(sb, pid, start, net_slot) == 0)
			sbx_vmm_stop(sb);
		sb->end_status = "deleted";
		sbx_to(sb, SBX_STOPPING, "huskd restarted while it made a template", NULL);
		return;
	}
	/* Its jobs run on in the guest (their records follow the agent's); its command does not. */
	if (store_abandon_unfinished(m->store, id, "huskd restarted while it ran", false, &n) ==
	            0 &&
	    n)
		log_warn(id, "%d unfinished command(s) marked failed: huskd restarted", n);
	if (!strcmp(status, "paused")) {
		/* Paused to its snapshot file: no VMM to adopt; the next request resumes it. */
		sbx_pause_snap_path(sb, path, sizeof(path));
		if (access(path, R_OK) < 0) {
			adopt_fail(sb,
			           "huskd restarted and the paused sandbox's memory.snap is gone");
			return;
		}
		sbx_to(sb, SBX_PAUSED, NULL, NULL);
		log_info(id, "paused on disk; resumes when asked for");
		/* A VMM made ahead the old huskd left behind goes; one of ours follows
		 * (sbx_ahead_exited). */
		if (pid > 0 && sbx_vmm_adopt(sb, pid, start, -1) == 0) {
			sb->ahead = SBX_AHEAD_HELD;
			sbx_ahead_drop(sb);
		} else {
			/* As after a pause: its next VMM, made ahead (within --resume-ahead). */
			sbx_ahead_make(sb);
		}
		return;
	}
	if (!strcmp(status, "creating")) {
		/* Its setup (files from the request) is lost with the old huskd. */
		if (sbx_vmm_adopt(sb, pid, start, net_slot) == 0)
			sbx_vmm_stop(sb);
		adopt_fail(sb, "huskd restarted while the sandbox was starting");
		return;
	}
	if (sbx_vmm_adopt(sb, pid, start, net_slot)) {
		adopt_fail(sb, "huskd restarted and the sandbox's VMM was no longer running");
		return;
	}
	log_info(id, "adopted its running VMM (pid %d); waiting for its agent to dial in",
	         (int)pid);
	if (!strcmp(status, "running"))
		sb->up_reason = "huskd restarted: the running command was lost";
	sbx_to(sb, SBX_ADOPTING, NULL, NULL);
	sbx_vmm_unpark(sb);
	if (sb->oneshot && !strcmp(status, "running"))
		sbx_end(sb, "terminated", "huskd restarted during a one-shot command", NULL);
}

void sbx_mgr_adopt(struct sbx_mgr *m)
{
	json_t *rows = NULL, *row;
	size_t i;

	if (store_sandboxes_live(m->store, &rows))
		return;
	json_array_foreach(rows, i, row)
	{
		adopt_one(m, row);
	}
	json_decref(rows);
	snap_gc(m);
	sbx_tmpl_prune(m);
}
