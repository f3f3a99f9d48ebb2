// SPDX-License-Identifier: MIT
/*
 * Warm VMMs (api/huskd/sandbox/sbx_pool.c) with the fake VMM: once a
 * template is ready (for the create that found it being made) and after a
 * create from a template, a sandbox like it is made ahead - recorded nowhere,
 * found by no request, its guest paused once its agent dialled in. The next
 * create of that template and org takes it: its id becomes the sandbox's,
 * it is recorded, its guest runs again and gets the create's env; then the
 * next is made. Another org's create does not take it. A stopping huskd
 * kills it and removes its folder; one a huskd killed outright left running
 * is killed, and its folder removed, at the next start. One whose disk key
 * no longer opens (its org's key shredded) is ended, not taken. A snapshot
 * with memory gets its own the same way; deleting the snapshot ends them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_test.h"
#include "sbx_tmpl.h"

static char warm[STORE_ID_LEN], not_this[STORE_ID_LEN];

/* A warm VMM of the default org ready (POOLED), other than not_this: its id into warm. */
static bool pooled(void *arg)
{
	(void)arg;
	for (struct sandbox *sb = T.m->sandboxes; sb; sb = sb->next)
		if (sb->state == SBX_POOLED && sb->pool.on && strcmp(sb->id, not_this) &&
		    !strcmp(sb->org, STORE_DEFAULT_ORG)) {
			snprintf(warm, sizeof(warm), "%s", sb->id);
			return true;
		}
	return false;
}

static bool tmpl_ready(void *arg)
{
	(void)arg;
	return T.m->tmpls && T.m->tmpls->state == TMPL_READY && !T.m->making;
}

static char reply[64];
static bool replied;

static void status_cb(struct sandbox *sb, int rc, const char *r)
{
	(void)sb;
	snprintf(reply, sizeof(reply), "%s", rc ? "an error" : r);
	replied = true;
}

static bool got_reply(void *arg)
{
	(void)arg;
	return replied;
}

/* What its VMM's control socket says of the guest: "paused" or "running". */
static const char *vmm_status(const char *id)
{
	replied = false;
	snprintf(reply, sizeof(reply), "no answer");
	if (!t_sb(id) || sbx_ctl(t_sb(id), "status", SBX_CTL_TIMEOUT_MS, status_cb))
		return "unreachable";
	t_wait(got_reply, NULL, T_WAIT_MS);
	return reply;
}

/* The fake VMM of id logged its first pause after n execs (the warm-up's). */
static bool parked_after(const char *id, unsigned n)
{
	char path[4200], line[200], want[64];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/vmm.log", t_sb(id) ? t_sb(id)->dir : "/nonexistent");
	snprintf(want, sizeof(want), "fake-vmm: paused after %u execs\n", n);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "fake-vmm: paused after ", 23)) {
			found = !strcmp(line, want);
			break;
		}
	if (f)
		fclose(f);
	return found;
}

/* Waits (bounded) until pid has ended. */
static bool ends(pid_t pid)
{
	for (unsigned ms = 0; pid && ms < T_WAIT_MS; ms += 10) {
		if (t_ended(pid))
			return true;
		usleep(10000);
	}
	return false;
}

/* Creates from body, waits until it is idle: its id into id ("" if it did not start). */
static void up(const char *body, char id[STORE_ID_LEN], char *err, size_t errlen)
{
	const char *made = t_create(body, NULL, err, errlen);

	snprintf(id, STORE_ID_LEN, "%s", made ? made : "");
	if (made && !t_wait_state(id, SBX_IDLE))
		snprintf(err, errlen, "%s did not come up", id);
}

/* The one ready now is taken by the next create (which gets env FOO), and another made. */
static void taken(char c[STORE_ID_LEN])
{
	char err[512] = "", w[STORE_ID_LEN], st[32];
	json_t *rec;

	snprintf(w, sizeof(w), "%s", warm);
	up("{\"env\":{\"FOO\":\"bar\"}}", c, err, sizeof(err));
	t_check("warm_vmm_taken_by_next_create",
	        c[0] && !strcmp(c, w) && t_state(c) == SBX_IDLE &&
	                !strcmp(t_status(c, st, sizeof(st)), "idle") &&
	                !strcmp(vmm_status(c), "running"),
	        "created '%s', warm '%s': status '%s', %s", c, w, st, err);
	rec = c[0] ? t_exec(c, "[\"printenv\",\"FOO\"]") : NULL;
	t_check("warm_vmm_gets_the_creates_env",
	        rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed"),
	        "%s", rec ? json_string_value(json_object_get(rec, "status")) : "no execution");
	json_decref(rec);
	snprintf(not_this, sizeof(not_this), "%s", w);
	t_check("next_warm_vmm_made", t_wait(pooled, NULL, T_WAIT_MS) && strcmp(warm, w),
	        "none after %s", w);
}

/* A warm VMM of snapshot sid ready (POOLED), other than not_this: its id into warm. */
static bool snap_pooled(void *arg)
{
	const char *sid = arg;

	for (struct sandbox *sb = T.m->sandboxes; sb; sb = sb->next)
		if (sb->state == SBX_POOLED && sb->pool.on && sb->pool.snap &&
		    !strcmp(sb->base_snap, sid) && strcmp(sb->id, not_this)) {
			snprintf(warm, sizeof(warm), "%s", sb->id);
			return true;
		}
	return false;
}

/* A snapshot's children: the second create takes the warm VMM the first left. */
static void pool_snapshots(void)
{
	char p[STORE_ID_LEN], a[STORE_ID_LEN],
		b[STORE_ID_LEN] = "", c[STORE_ID_LEN] = "", d[STORE_ID_LEN] = "", sid[STORE_ID_LEN],
		sid2[STORE_ID_LEN], w[STORE_ID_LEN], body[256], err[512] = "";
	json_t *out = NULL, *rec = NULL;
	struct sbx_err e;
	char *users;
	bool listed, kept;

	not_this[0] = warm[0] = '\0';
	up("{}", p, err, sizeof(err));
	t_snapshot(p, "{\"name\":\"warm-snap\"}", sid);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	up(body, a, err, sizeof(err));
	t_check("warm_vmm_of_a_snapshot_made",
	        sid[0] && a[0] && t_wait(snap_pooled, sid, T_WAIT_MS) &&
	                !strcmp(vmm_status(warm), "paused"),
	        "snapshot '%s', child '%s': %s", sid, a, err);
	snprintf(w, sizeof(w), "%s", warm);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\",\"env\":{\"FOO\":\"bar\"}}", sid);
	if (w[0])
		up(body, b, err, sizeof(err));
	rec = b[0] ? t_exec(b, "[\"printenv\",\"FOO\"]") : NULL;
	t_check("warm_vmm_of_a_snapshot_taken",
	        w[0] && !strcmp(b, w) && !strcmp(vmm_status(b), "running") && rec &&
	                !strcmp(json_string_value(json_object_get(rec, "status")), "completed"),
	        "created '%s', warm '%s': %s", b, w, err);
	json_decref(rec);
	/* The next is made; deleting the snapshot ends it (nothing could take it). */
	snprintf(not_this, sizeof(not_this), "%s", w);
	warm[0] = '\0';
	if (t_wait(snap_pooled, sid, T_WAIT_MS) &&
	    sbx_snap_delete(T.m, STORE_DEFAULT_ORG, sid, &out, &e) == 0) {
		users = json_dumps(json_object_get(out, "usedBy"), 0);
		listed = !users || strstr(users, warm);
		free(users);
		t_check("warm_vmm_of_a_deleted_snapshot_ends",
		        !listed && (t_state(warm) == SBX_STOPPING || t_state(warm) == SBX_GONE),
		        "%s: %s, listed as a user %d", warm, sbx_state_name(t_state(warm)), listed);
	} else {
		t_check("warm_vmm_of_a_deleted_snapshot_ends", false, "no second warm VMM, or: %s",
		        warm[0] ? e.msg : "none");
	}
	json_decref(out);
	/* One of a name:tag whose tag moved to a newer snapshot is ended by the next create. */
	not_this[0] = warm[0] = '\0';
	t_snapshot(p, "{\"name\":\"moved\",\"tag\":\"v1\"}", sid);
	up("{\"snapshot\":\"moved:v1\"}", c, err, sizeof(err));
	w[0] = '\0';
	if (sid[0] && c[0] && t_wait(snap_pooled, sid, T_WAIT_MS))
		snprintf(w, sizeof(w), "%s", warm);
	t_snapshot(p, "{\"name\":\"moved\",\"tag\":\"v1\"}", sid2);
	up("{\"snapshot\":\"moved:v1\"}", d, err, sizeof(err));
	t_check("warm_vmm_of_a_moved_tag_ends",
	        w[0] && sid2[0] && d[0] && strcmp(d, w) &&
	                (t_state(w) == SBX_STOPPING || t_state(w) == SBX_GONE),
	        "warm '%s', created '%s', snapshots %s and %s: %s", w, d, sid, sid2, err);
	/* The one made after d waits; an hour on, the reaper's tick ends it. */
	w[0] = '\0';
	if (t_wait(snap_pooled, sid2, T_WAIT_MS)) {
		snprintf(w, sizeof(w), "%s", warm);
		sbx_reap(T.m, time(NULL) + 600);
	}
	kept = w[0] && t_state(w) == SBX_POOLED;
	if (w[0])
		sbx_reap(T.m, time(NULL) + 3700);
	t_check("warm_vmm_of_a_snapshot_expires",
	        kept && (t_state(w) == SBX_STOPPING || t_state(w) == SBX_GONE),
	        "warm '%s': kept after 10 minutes %d, then %s", w, kept,
	        w[0] ? sbx_state_name(t_state(w)) : "none");
	for (char *const *id = (char *const[]){p, a, b, c, d, NULL}; *id; id++)
		if ((*id)[0] && t_sb(*id))
			t_destroy(*id);
}

void t_pool(void)
{
	char a[STORE_ID_LEN], b[STORE_ID_LEN], o[STORE_ID_LEN], c[STORE_ID_LEN], x[STORE_ID_LEN],
		y[STORE_ID_LEN] = "", v[STORE_ID_LEN] = "", w[STORE_ID_LEN] = "", err[512] = "",
		dir[4300];
	json_t *info = NULL;
	struct sbx_err e;
	pid_t pid;
	bool unseen;

	t_close();
	T.cfg.templates = true;
	T.cfg.warm_pool = 1;
	t_open();
	not_this[0] = '\0';
	up("{}", a, err, sizeof(err));
	t_wait(tmpl_ready, NULL, T_WAIT_MS);
	/* The first create found the template being made: its warm VMM comes once it is ready. */
	t_check("warm_vmm_made_once_its_template_is_ready",
	        a[0] && t_wait(pooled, NULL, T_WAIT_MS) && !strcmp(vmm_status(warm), "paused"),
	        "%s", a[0] ? reply : err);
	t_check("warm_vmm_ran_a_command_before_it_parked", warm[0] && parked_after(warm, 1),
	        "%s's vmm.log has no 'paused after 1 execs'", warm);
	snprintf(w, sizeof(w), "%s", warm);
	up("{}", b, err, sizeof(err));
	t_check("second_create_takes_it", w[0] && !strcmp(b, w), "created '%s', warm '%s': %s", b,
	        w, err);
	snprintf(not_this, sizeof(not_this), "%s", w);
	w[0] = '\0';
	t_check("warm_vmm_made_after_a_template_create",
	        b[0] && t_wait(pooled, NULL, T_WAIT_MS) && !strcmp(vmm_status(warm), "paused"),
	        "%s", b[0] ? reply : err);
	unseen = warm[0] && !sbx_lookup(T.m, warm, &e) && e.fault == SBX_NO_SANDBOX &&
	         store_sandbox_get(T.store, warm, &info, NULL) == -ENOENT;
	json_decref(info);
	t_check("warm_vmm_unseen", unseen, "%s is found", warm);
	up("{\"org\":{\"id\":\"org_pool\"}}", o, err, sizeof(err));
	t_check("warm_vmm_only_for_its_org", o[0] && strcmp(o, warm) && t_state(warm) == SBX_POOLED,
	        "%s, warm %s: %s", o, warm, err);
	taken(c);

	/* huskd stops: the warm VMM is killed, its folder removed. */
	pid = t_vmm_pid(warm);
	snprintf(dir, sizeof(dir), "%s", t_sb(warm) ? t_sb(warm)->dir : "");
	t_close();
	t_check("warm_vmm_gone_at_stop", pid && ends(pid) && access(dir, F_OK) < 0, "pid %d, %s",
	        (int)pid, dir);

	/* A huskd killed outright (here: one that did not know it): the next start kills it. */
	t_open();
	up("{}", x, err, sizeof(err));
	snprintf(not_this, sizeof(not_this), "%s", "");
	pid = t_wait(pooled, NULL, T_WAIT_MS) ? t_vmm_pid(warm) : 0;
	snprintf(dir, sizeof(dir), "%s", t_sb(warm) ? t_sb(warm)->dir : "");
	if (pid)
		t_sb(warm)->pool.on = false;
	t_close();
	unseen = pid && !t_ended(pid) && access(dir, F_OK) == 0;
	t_open();
	t_check("warm_vmm_of_a_killed_huskd_swept", unseen && ends(pid) && access(dir, F_OK) < 0,
	        "pid %d, left running %d, %s", (int)pid, unseen, dir);
	sbx_mgr_adopt(T.m);

	/* Its org's key shredded: its disk cannot be opened again; the create makes its own. */
	snprintf(not_this, sizeof(not_this), "%s", "");
	up("{}", v, err, sizeof(err));
	if (v[0] && t_wait(pooled, NULL, T_WAIT_MS) && t_sb(warm)->disk_key &&
	    !keystore_shred(T.cfg.keys, STORE_DEFAULT_ORG, err, sizeof(err)))
		snprintf(w, sizeof(w), "%s", warm);
	if (w[0])
		up("{}", y, err, sizeof(err));
	t_check("warm_vmm_not_after_its_key_shredded",
	        w[0] && y[0] && strcmp(y, w) &&
	                (t_state(w) == SBX_STOPPING || t_state(w) == SBX_GONE),
	        "warm '%s', created '%s': %s", w, y, err);
	for (char *const *id = (char *const[]){a, b, o, c, x, v, y, NULL}; *id; id++)
		if ((*id)[0] && t_sb(*id))
			t_destroy(*id);
	t_close();
	T.cfg.templates = false;
	t_open();
	pool_snapshots();
	t_close();
	T.cfg.warm_pool = 0;
	t_open();
}
