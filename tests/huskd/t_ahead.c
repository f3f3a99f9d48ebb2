// SPDX-License-Identifier: MIT
/*
 * A resume made ahead (sbx_ahead.c, huskd --resume-ahead): once paused, a
 * sandbox's next VMM restores at once and waits held; a resume runs that
 * VMM; what needs the paused files alone, a destroy, a stop of huskd or a
 * VMM that dies or does not answer each leave the sandbox as it would be
 * without one.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_test.h"

static bool vmm_log_has(const char *id, const char *text)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/vmm.log", t_sb(id) ? t_sb(id)->dir : "/nonexistent");
	return t_file_has(path, text);
}

/* Its VMM made ahead has restored and listens on its control socket (an earlier VMM's is gone). */
static bool is_held(void *arg)
{
	struct sandbox *sb = t_sb(arg);
	char path[4200];

	if (!sb || sb->state != SBX_PAUSED || sb->ahead != SBX_AHEAD_HELD || !sb->vmm)
		return false;
	snprintf(path, sizeof(path), "%s/control.sock", sb->dir);
	return access(path, F_OK) == 0;
}

static bool none_ahead(void *arg)
{
	struct sandbox *sb = t_sb(arg);

	return sb && sb->ahead == SBX_AHEAD_NONE && !sb->vmm;
}

static void folder_changed(uv_fs_event_t *w, const char *name, int events, int status)
{
	(void)w, (void)name, (void)events, (void)status;
}

/* Its VMM made ahead, once it holds the guest: that VMM's pid, or 0. */
static pid_t held_pid(const char *id)
{
	uv_fs_event_t w;
	bool ok;

	if (!t_sb(id) || uv_fs_event_init(T.loop, &w))
		return 0;
	/* Its control socket's arrival in the folder is what wakes the loop. */
	ok = !uv_fs_event_start(&w, folder_changed, t_sb(id)->dir, 0) &&
	     t_wait(is_held, (void *)id, T_WAIT_MS);
	uv_close((uv_handle_t *)&w, NULL);
	t_spin();
	return ok ? t_vmm_pid(id) : 0;
}

/* Paused, with its VMM made ahead: that VMM's pid, or 0. */
static pid_t pause_held(const char *id)
{
	return t_pause(id) ? held_pid(id) : 0;
}

static bool resume(const char *id, char *msg, size_t len)
{
	struct t_done d = {0};
	bool ok;

	sbx_resume(T.m, id, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE;
	snprintf(msg, len, "%s; state %s", d.msg, sbx_state_name(t_state(id)));
	t_done_reset(&d);
	return ok;
}

static bool runs(const char *id)
{
	json_t *rec = t_exec(id, "[\"echo\",\"x\"]");
	bool ok = rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed");

	json_decref(rec);
	return ok;
}

static void made_and_resumed(const char *id)
{
	char msg[600], st[32];
	pid_t first = t_vmm_pid(id), held, again;
	struct t_done d = {0};
	bool ok;

	held = pause_held(id);
	t_check("ahead_made_at_pause",
	        held && held != first && t_ended(first) &&
	                !strcmp(t_status(id, st, sizeof(st)), "paused"),
	        "held pid %d, status %s", (int)held, st);
	ok = held && resume(id, msg, sizeof(msg));
	t_check("ahead_resume_runs_the_held_vmm",
	        ok && t_vmm_pid(id) == held && vmm_log_has(id, "fake-vmm: restored and held") &&
	                runs(id),
	        "%s; pid %d, held %d", msg, (int)t_vmm_pid(id), (int)held);
	/* Resumed at once, its VMM made ahead may not listen yet: the resume waits for it. */
	held = t_pause(id) && t_sb(id)->ahead == SBX_AHEAD_HELD ? t_vmm_pid(id) : 0;
	ok = held && resume(id, msg, sizeof(msg));
	t_check("ahead_resume_right_after_the_pause_runs_it", ok && t_vmm_pid(id) == held,
	        "%s; pid %d, held %d", msg, (int)t_vmm_pid(id), (int)held);
	/* A checkpoint of the paused sandbox reworks its disk: the held VMM goes first. */
	held = pause_held(id);
	sbx_ckpt_create(T.m, id, "ahead-ckpt", t_done_cb, &d);
	ok = held && t_wait_done(&d) && d.ok;
	t_check("ahead_dropped_for_a_checkpoint",
	        ok && t_ended(held) && t_wait_state(id, SBX_IDLE) && runs(id), "%s; held %d", d.msg,
	        (int)held);
	t_done_reset(&d);
	again = pause_held(id);
	/* Killed while held: it stays paused, and its resume starts a VMM the usual way. */
	if (again)
		kill(again, SIGKILL);
	t_check("ahead_death_leaves_it_paused",
	        again && t_wait(none_ahead, (void *)id, T_WAIT_MS) && t_state(id) == SBX_PAUSED &&
	                !strcmp(t_status(id, st, sizeof(st)), "paused"),
	        "state %s", sbx_state_name(t_state(id)));
	t_check("ahead_death_resumes_the_usual_way",
	        resume(id, msg, sizeof(msg)) && t_vmm_pid(id) != again && runs(id), "%s", msg);
}

/* A held VMM that takes the resume and never answers is replaced by the usual one. */
static void unanswered(const char *id)
{
	char msg[600];
	pid_t held;

	setenv("FAKE_VMM", "hang-control", 1);
	held = pause_held(id);
	unsetenv("FAKE_VMM");
	t_check("ahead_unanswered_resume_replaced",
	        held && resume(id, msg, sizeof(msg)) && t_ended(held) && t_vmm_pid(id) != held &&
	                runs(id),
	        "%s; held %d", msg, (int)held);
}

static void limited(void)
{
	char err[512];
	const char *a = t_create("{}", NULL, err, sizeof(err));
	char ida[STORE_ID_LEN] = "", idb[STORE_ID_LEN] = "";
	const char *b;
	struct sandbox *sa, *sb;

	if (a)
		snprintf(ida, sizeof(ida), "%s", a);
	b = t_create("{}", NULL, err, sizeof(err));
	if (b)
		snprintf(idb, sizeof(idb), "%s", b);
	T.m->cfg.resume_ahead = 1;
	if (!a || !b || !t_wait_state(ida, SBX_IDLE) || !t_wait_state(idb, SBX_IDLE) ||
	    !t_pause(ida) || !t_pause(idb)) {
		t_check("ahead_at_most_resume_ahead", false, "no sandboxes: %s", err);
	} else {
		sa = t_sb(ida);
		sb = t_sb(idb);
		t_check("ahead_at_most_resume_ahead",
		        sa->ahead == SBX_AHEAD_HELD && sa->vmm && sb->ahead == SBX_AHEAD_NONE &&
		                !sb->vmm,
		        "ahead %d and %d", sa->ahead, sb->ahead);
	}
	T.m->cfg.resume_ahead = T.cfg.resume_ahead;
	if (a)
		t_destroy(ida);
	if (b)
		t_destroy(idb);
}

/* Waits (no loop runs) for pid to exit, at most T_WAIT_MS: whether it did. */
static bool exits(pid_t pid)
{
	int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	bool ok = fd >= 0 && poll(&p, 1, T_WAIT_MS) == 1;

	if (fd >= 0)
		close(fd);
	return (ok || fd < 0) && t_ended(pid);
}

/* huskd stops: the held VMM goes. Left behind (a huskd that was killed), the next one kills it. */
static void restarts(const char *id)
{
	char msg[600];
	pid_t held = pause_held(id), orphan;

	t_close();
	t_check("ahead_killed_when_huskd_stops", held && exits(held), "held pid %d runs on",
	        (int)held);
	t_open();
	sbx_mgr_adopt(T.m);
	/* Taken up paused, it gets its next VMM as a pause would have given it; the resume runs it.
	 */
	held = held_pid(id);
	t_check("ahead_made_for_a_paused_sandbox_taken_up",
	        held && resume(id, msg, sizeof(msg)) && t_vmm_pid(id) == held && runs(id),
	        "held pid %d, runs %d: %s", (int)held, (int)t_vmm_pid(id), held ? msg : "none");
	orphan = t_state(id) == SBX_IDLE || resume(id, msg, sizeof(msg)) ? pause_held(id) : 0;
	/* As if huskd were killed: nothing told the held VMM to go. */
	if (t_sb(id))
		t_sb(id)->ahead = SBX_AHEAD_NONE;
	t_close();
	t_open();
	sbx_mgr_adopt(T.m);
	/* Killed, and a VMM of this huskd's made ahead in its place: the resume runs that one. */
	held = orphan && t_state(id) == SBX_PAUSED ? held_pid(id) : 0;
	t_check("ahead_left_behind_replaced_at_adoption",
	        held && held != orphan && t_ended(orphan) && resume(id, msg, sizeof(msg)) &&
	                t_vmm_pid(id) == held && runs(id),
	        "%s; orphan %d, held %d", held ? msg : "none held", (int)orphan, (int)held);
}

/* Its org's key shredded while it is held: the resume fails as it would without one. */
static void shredded(void)
{
	char err[512], msg[600], id[STORE_ID_LEN] = "";
	const char *made = t_create("{}", NULL, err, sizeof(err));
	pid_t held;

	if (made)
		snprintf(id, sizeof(id), "%s", made);
	held = made && t_wait_state(id, SBX_IDLE) ? pause_held(id) : 0;
	if (!held || keystore_shred(T.cfg.keys, STORE_DEFAULT_ORG, err, sizeof(err))) {
		t_check("ahead_shredded_key_cannot_resume", false, "no held VMM or shred: %s", err);
	} else {
		t_check("ahead_shredded_key_cannot_resume",
		        !resume(id, msg, sizeof(msg)) && strstr(msg, "has been deleted") &&
		                t_ended(held) && t_state(id) == SBX_PAUSED,
		        "%s", msg);
	}
	if (made)
		t_destroy(id);
}

void t_ahead(void)
{
	char err[512], id[STORE_ID_LEN] = "";
	const char *made;
	pid_t held;

	t_close();
	T.cfg.resume_ahead = 4;
	t_open();
	made = t_create("{}", NULL, err, sizeof(err));
	if (made)
		snprintf(id, sizeof(id), "%s", made);
	if (!t_check("ahead_setup", made && t_wait_state(id, SBX_IDLE), "no sandbox: %s", err))
		goto out;
	made_and_resumed(id);
	unanswered(id);
	restarts(id);
	held = pause_held(id);
	t_destroy(id);
	t_check("ahead_destroy_kills_it", held && t_ended(held), "held pid %d runs on", (int)held);
	limited();
	shredded();
out:
	t_close();
	T.cfg.resume_ahead = 0;
	t_open();
}
