// SPDX-License-Identifier: MIT
/*
 * Warm VMMs (issue J): a template's guest restored ahead of the create that
 * will want it. A template's child spends most of its way to a first exec
 * before its guest runs: husk-jail and the VMM's exec, the VMM's start and
 * restore, the guest's resume until its agent dials in (nested, ~800 of ~1550
 * ms). A warm VMM is a sandbox made as a create of that template and org
 * would make it - its id, folder, layer, disk key, cgroup and jail uid - but
 * recorded nowhere and found by no request. Once its agent has dialled in,
 * its guest gets `resumed` (clock, RNG seed, and the identity of the sandbox
 * it becomes: its id is already that sandbox's), runs one command (`true`,
 * warm_up()), its vCPUs are parked (the control socket's pause: nothing is
 * written) and it waits, POOLED. A create of the same template, org and disk
 * size takes it: the sandbox becomes the create's, is recorded, its vCPUs run
 * again and the rest of a template child's setup (env and files; no
 * `resumed`: the clock ran on in kvmclock) goes over the connection already
 * open, sent as the vCPUs are asked to run. huskd --warm-pool N keeps up to N
 * per template and org, made one at a time. A snapshot with memory gets its
 * own the same way, per shape, org and disk (its child's setup:
 * SETUP_RESTORED). A sandbox with a network never takes one: its slot and NIC
 * come with its VMM's start.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx_pool.h"
#include "sbx_setup.h"
#include "sbx_tmpl.h"

/* Warm VMMs in all, every template and org: each holds a VMM and a few MiB of its own. */
#define POOL_MAX 16
/* A snapshot's warm VMM no create took this long ends (sbx_pool_expire). */
#define POOL_SNAP_IDLE_S 3600

static bool pooled(const struct sandbox *sb)
{
	return sb->pool.on && (sb->pool.tmpl || sb->pool.snap) && sb->state != SBX_STOPPING &&
	       sb->state != SBX_GONE;
}

static bool same(const struct sandbox *sb, const struct sbx_pool_key *k)
{
	if (k->tmpl ? sb->pool.tmpl != k->tmpl
	            : !sb->pool.snap || !k->snap || strcmp(sb->base_snap, k->snap))
		return false;
	return sb->pool.disk == k->disk && sb->mem_mib == k->mem_mib && sb->vcpus == k->vcpus &&
	       !strcmp(sb->org, k->org);
}

bool sbx_pool_wanted(struct sbx_mgr *m, const struct sbx_pool_key *k)
{
	unsigned ready = 0, all = 0;

	if (!m->cfg.warm_pool || !(k->tmpl || k->snap) || m->closing)
		return false;
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next) {
		if (!pooled(sb))
			continue;
		all++;
		if (!same(sb, k))
			continue;
		/* One at a time: each restore competes with the sandboxes running for the CPU. */
		if (sb->state != SBX_POOLED)
			return false;
		ready++;
	}
	return ready < m->cfg.warm_pool && all < POOL_MAX;
}

/* Of t's runtime and shape, but not t: its runtime, kernel, agent or VMM changed since. */
static bool outdated(const struct sandbox *sb, const struct sbx_tmpl *t)
{
	const struct sbx_tmpl *o = sb->pool.tmpl;

	return t && o && o != t && o->mem_mib == t->mem_mib && o->vcpus == t->vcpus &&
	       o->nic == t->nic && !strcmp(o->runtime, t->runtime);
}

/* Made for a create that named its snapshot as k does, which now names another one. */
static bool renamed(const struct sandbox *sb, const struct sbx_pool_key *k)
{
	const char *ref = json_string_value(json_object_get(sb->pool.body, "snapshot"));

	return sb->pool.snap && k->snap && k->snap_ref && ref && !strcmp(ref, k->snap_ref) &&
	       strcmp(sb->base_snap, k->snap) && !strcmp(sb->org, k->org);
}

struct sandbox *sbx_pool_take(struct sbx_mgr *m, const struct sbx_pool_key *k)
{
	struct sandbox *sb, *next;

	if (!k->tmpl && !k->snap)
		return NULL;
	for (sb = m->sandboxes; sb; sb = next) {
		next = sb->next;
		if (!pooled(sb))
			continue;
		if (outdated(sb, k->tmpl)) {
			sbx_end(sb, "terminated", "a warm VMM of an older template", NULL);
			continue;
		}
		if (renamed(sb, k)) {
			sbx_end(sb, "terminated",
			        "a warm VMM of a snapshot its name no longer names", NULL);
			continue;
		}
		if (sb->state != SBX_POOLED || !same(sb, k))
			continue;
		if (!sb->session) {
			sbx_end(sb, "failed", "a warm VMM lost its agent's connection", NULL);
			continue;
		}
		/* Its org's key shredded since it was made: its disk is unreadable from now on. */
		if (sb->disk_key && !sbx_dkey_opens(m, sb->disk_key)) {
			sbx_end(sb, "terminated", "a warm VMM whose disk key no longer opens",
			        NULL);
			continue;
		}
		sb->pool.on = false;
		return sb;
	}
	return NULL;
}

void sbx_pool_forget_snap(struct sbx_mgr *m, const char *id)
{
	for (struct sandbox *sb = m->sandboxes, *next; sb; sb = next) {
		next = sb->next; /* ending one may free it */
		if (pooled(sb) && sb->pool.snap && !strcmp(sb->base_snap, id))
			sbx_end(sb, "terminated", "a warm VMM of a deleted snapshot", NULL);
	}
}

void sbx_pool_expire(struct sbx_mgr *m, time_t now)
{
	for (struct sandbox *sb = m->sandboxes, *next; sb; sb = next) {
		next = sb->next; /* ending one may free it */
		if (pooled(sb) && sb->pool.snap && sb->state == SBX_POOLED &&
		    now - sb->pool.ready_s >= POOL_SNAP_IDLE_S)
			sbx_end(sb, "terminated",
			        "a warm VMM of a snapshot no create took for an hour", NULL);
	}
}

void sbx_pool_begin(struct sandbox *sb, const struct sbx_pool_key *k, json_t *body)
{
	sb->pool.tmpl = k->tmpl;
	sb->pool.snap = !k->tmpl;
	sb->pool.disk = k->disk;
	json_decref(sb->pool.body);
	sb->pool.body = json_incref(body);
	sb->pool.on = true;
}

/* Where a warm VMM's pid is kept: a huskd killed outright leaves no other trace of it. */
static void pid_path(const char *dir, char *out, size_t len)
{
	snprintf(out, len, "%s/warm.pid", dir);
}

void sbx_pool_vmm_started(struct sandbox *sb)
{
	char path[4200];
	FILE *f;

	pid_path(sb->dir, path, sizeof(path));
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d %llu\n", (int)vmm_proc_pid(sb->vmm),
		        (unsigned long long)vmm_proc_starttime(sb->vmm));
		if (fclose(f) == 0)
			return;
	}
	log_warn(sb->id, "cannot write %s: a warm VMM outlives a huskd killed outright", path);
}

void sbx_pool_sweep(struct sbx_mgr *m)
{
	char dir[4200], path[4500];
	unsigned long long start;
	struct dirent *e;
	int pid;
	DIR *d;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/sandboxes", m->cfg.state);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/warm.pid", dir, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%d %llu", &pid, &start) == 2 && pid > 1 &&
		    proc_starttime(pid) == start && kill(pid, SIGKILL) == 0)
			log_info(NULL, "a warm VMM (pid %d) of a huskd before: killed", pid);
		fclose(f);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		sbx_remove_dir(path);
	}
	if (d)
		closedir(d);
}

static const char *ctl_why(int rc, const char *reply)
{
	return rc == -EPROTO && reply ? reply : strerror(-rc);
}

static void parked(struct sandbox *sb, int rc, const char *reply)
{
	struct sbx_pool_key k = {.tmpl = sb->pool.tmpl,
	                         .snap = sb->pool.snap ? sb->base_snap : NULL,
	                         .org = sb->org,
	                         .disk = sb->pool.disk,
	                         .mem_mib = sb->mem_mib,
	                         .vcpus = sb->vcpus};
	char why[400];

	/* Ended meanwhile (its VMM died, huskd's stop): nothing to do. */
	if (sb->state != SBX_RESTORING || !sb->pool.on)
		return;
	if (rc) {
		snprintf(why, sizeof(why), "cannot park a warm VMM's vCPUs: %s",
		         ctl_why(rc, reply));
		sbx_end(sb, "failed", why, NULL);
		return;
	}
	sbx_to(sb, SBX_POOLED, NULL, NULL);
	sb->pool.ready_s = time(NULL);
	log_info(sb->id, "a warm VMM of %s%s (%llu MiB, %u vCPUs) is ready",
	         sb->pool.tmpl ? "" : "snapshot ",
	         sb->pool.tmpl ? sb->pool.tmpl->rt_name : sb->base_snap,
	         (unsigned long long)sb->mem_mib, sb->vcpus);
	if (sbx_pool_wanted(sb->m, &k))
		sb->m->hooks->pool_wanted(sb->m, sb->pool.body);
}

static void park(struct sandbox *sb)
{
	if (sbx_ctl(sb, "pause", SBX_CTL_TIMEOUT_MS, parked))
		sbx_end(sb, "failed", "cannot reach a warm VMM's control socket", NULL);
}

static void warmed(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct sandbox *sb = arg;
	char why[400];

	(void)reply;
	if (sb->state == SBX_RESTORING && sb->pool.on) {
		/* Its outcome is not the point (an image may have no `true`); a lost agent is. */
		if (rc < 0) {
			snprintf(why, sizeof(why), "a warm VMM's guest did not warm up: %.360s",
			         err->msg);
			sbx_end(sb, "failed", why, NULL);
		} else {
			log_debug(sb->id, "warmed up (`true` %s)", rc ? "refused" : "sent");
			park(sb);
		}
	}
}

static const struct sbx_call_ops warm_ops = {.done = warmed};

/*
 * One command as a create's would be sent (its user; no output wanted)
 * before the vCPUs park. A restored guest's first command otherwise takes
 * ~360 nested-paging faults (the memory the agent's fork and exec, the
 * loader and libc touch, mapped from the template's file) that later ones
 * do not: nested, 135 against 51 ms in huskd. Paid here, ahead of the create.
 */
static void warm_up(struct sandbox *sb)
{
	json_t *req = json_pack("{sss[s]ssss*}", "op", "exec", "argv", "true", "cwd", "/", "user",
	                        sbx_user(sb));

	if (!req) {
		park(sb);
		return;
	}
	/* (The call holds sb until warmed() has run.) */
	(void)sbx_call_now(sb, req, NULL, &warm_ops, sb);
	json_decref(req);
}

/* Its guest has its clock, seed and identity (the id is the sandbox's it becomes): parked. */
static void primed(struct sandbox *sb, const struct sbx_err *err)
{
	char why[400];

	if (sb->state != SBX_RESTORING || !sb->pool.on)
		return;
	if (err) {
		snprintf(why, sizeof(why), "a warm VMM's guest was not set up: %.360s", err->msg);
		sbx_end(sb, "failed", why, NULL);
		return;
	}
	sb->pool.primed = true;
	warm_up(sb);
}

void sbx_pool_hello(struct sandbox *sb)
{
	sbx_setup_start(sb, SETUP_WARM, primed);
}

static void unparked(struct sandbox *sb, int rc, const char *reply)
{
	char why[400];

	if (sb->state != SBX_RESTORING)
		return;
	if (rc) {
		snprintf(why, sizeof(why), "cannot run its warm VMM's vCPUs again: %s",
		         ctl_why(rc, reply));
		sbx_end(sb, "failed", why, NULL);
	}
}

void sbx_pool_claimed(struct sandbox *sb)
{
	/*
	 * Its agent said hello when the VMM was made: the create's setup goes
	 * now, not after the VMM's answer to `resume` - it waits on the open
	 * connection until the vCPUs run, and a failed resume ends it.
	 */
	sb->m->hooks->agent_hello(sb);
}

int sbx_pool_resume(struct sandbox *sb, char *err, size_t errlen)
{
	char path[4200];
	int rc;

	pid_path(sb->dir, path, sizeof(path));
	unlink(path);
	sbx_save(sb, json_pack("{sIsIsiso}", "pid", (json_int_t)vmm_proc_pid(sb->vmm), "starttime",
	                       (json_int_t)vmm_proc_starttime(sb->vmm), "netSlot", sb->net_slot,
	                       "memFile", sb->mem_file ? json_string(sb->mem_file) : json_null()));
	rc = sbx_ctl(sb, "resume", SBX_CTL_TIMEOUT_MS, unparked);
	if (rc)
		snprintf(err, errlen, "cannot reach its warm VMM's control socket: %s",
		         uv_strerror(rc));
	return rc;
}

void sbx_pool_close(struct sbx_mgr *m)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next) {
		if (!sb->pool.on)
			continue;
		if (sb->vmm && vmm_proc_kill(sb->vmm, SIGKILL))
			log_warn(sb->id, "cannot kill a warm VMM");
		sbx_remove_dir(sb->dir);
	}
}
