// SPDX-License-Identifier: MIT
/*
 * A sandbox's VMM control socket (vmm/control.h): one command at a time,
 * its answer on the loop, none after huskd let go of the sandbox.
 */
#include <stdio.h>
#include <string.h>

#include "sbx_int.h"
#include "vmm_ctl_uv.h"

static void answered(void *arg, int rc, const char *reply)
{
	struct sandbox *sb = arg;
	sbx_ctl_fn fn = sb->ctl_fn;

	sb->ctl = NULL;
	if (!sb->m->closing)
		fn(sb, rc, reply);
	sbx_drop(sb);
}

int sbx_ctl(struct sandbox *sb, const char *cmd, unsigned timeout_ms, sbx_ctl_fn fn)
{
	char path[4200];
	int rc;

	snprintf(path, sizeof(path), "%s/control.sock", sb->dir);
	sb->ctl_fn = fn;
	rc = vmm_ctl_send(sb->m->loop, path, cmd, timeout_ms, answered, sb, &sb->ctl);
	if (rc)
		log_error(sb->id, "cannot send '%s' to husk-vmm: %s",
		          strncmp(cmd, "key ", 4) ? cmd : "key ...", uv_strerror(rc));
	else
		sbx_hold(sb);
	return rc;
}

void sbx_ctl_abort(struct sandbox *sb)
{
	if (sb->ctl)
		vmm_ctl_abort(sb->ctl);
	if (sb->dump)
		vmm_ctl_abort(sb->dump);
}

static void dumped(void *arg, int rc, const char *reply)
{
	struct sandbox *sb = arg;

	sb->dump = NULL;
	if (rc && !sb->m->closing)
		log_warn(sb->id, "its VMM did not show its vCPUs' and devices' state: %s", reply);
	else if (!sb->m->closing)
		log_warn(sb->id, "its VMM wrote its vCPUs' and devices' state to %s/vmm.log",
		         sb->dir);
	/* Its folder goes with it: what the VMM wrote goes to huskd's log first. */
	if (sb->kill_after_dump) {
		char tail[4096]; /* the vCPUs' lines at least (vm_dump() ends with them) */

		sb->kill_after_dump = false;
		sbx_vmm_log_tail(sb, tail, sizeof(tail));
		log_error(sb->id, "its VMM's log ended with: %s", tail[0] ? tail : "(nothing)");
		sbx_vmm_stop(sb);
	}
	sbx_drop(sb);
}

void sbx_ctl_dump(struct sandbox *sb)
{
	char path[4200];

	if (sb->dump || !sb->vmm)
		return;
	snprintf(path, sizeof(path), "%s/control.sock", sb->dir);
	if (vmm_ctl_send(sb->m->loop, path, "dump", SBX_CTL_TIMEOUT_MS, dumped, sb, &sb->dump) == 0)
		sbx_hold(sb);
}

static void unparked(struct sandbox *sb, int rc, const char *reply)
{
	log_debug(sb->id, "resume of an adopted VMM: %s", rc ? reply : "running");
}

void sbx_vmm_unpark(struct sandbox *sb)
{
	/* A pause that huskd's restart cut short may have left its vCPUs parked. */
	if (sbx_ctl(sb, "resume", SBX_CTL_TIMEOUT_MS, unparked))
		log_warn(sb->id, "cannot reach its VMM's control socket");
}
