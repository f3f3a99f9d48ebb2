// SPDX-License-Identifier: MIT
/*
 * What goes wrong: a VMM that exits in every state that has one, a guest
 * whose agent never dials, a VMM that crashes, a control socket that never
 * answers, a snapshot that cannot be written. Each ends (or recovers) the
 * one sandbox, says why, and leaves the manager serving.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_test.h"

/* The reason recorded with the failed status (its lifecycle:failed event). */
static void failed_reason(const char *id, char *out, size_t len)
{
	json_t *ev = NULL, *e;
	size_t i;

	out[0] = '\0';
	if (sbx_events(T.m, id, 100, false, &ev))
		return;
	json_array_foreach(json_object_get(ev, "events"), i, e)
	{
		json_t *p = json_object_get(e, "event");
		const char *to = json_string_value(json_object_get(p, "to"));

		if (to && !strcmp(to, "failed"))
			snprintf(out, len, "%s", json_string_value(json_object_get(p, "reason")));
	}
	json_decref(ev);
}

/* Kills the sandbox's VMM in the state it is in; it must fail, with the signal as reason. */
static void kill_in(const char *name, const char *id, enum sbx_state s)
{
	char st[32], why[512];
	pid_t pid = t_vmm_pid(id);
	bool there = t_state(id) == s && pid > 0;

	if (there)
		kill(pid, SIGKILL);
	t_wait_state(id, SBX_GONE);
	failed_reason(id, why, sizeof(why));
	t_check(name,
	        there && !strcmp(t_status(id, st, sizeof(st)), "failed") &&
	                strstr(why, "killed by signal 9"),
	        "in %s: %s, reason '%s'", sbx_state_name(s), st, why);
}

static const char *up(const char *body, const char *mode)
{
	char err[512];
	const char *id = t_create(body, mode, err, sizeof(err));

	if (id && !mode && !t_wait_state(id, SBX_IDLE))
		return NULL;
	return id;
}

/* huskd's log (stderr) into the file path until stderr_back() (*saved -1: not moved). */
static void stderr_to(const char *path, int *saved)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	*saved = dup(STDERR_FILENO);
	if (fd < 0 || *saved < 0 || dup2(fd, STDERR_FILENO) < 0) {
		if (*saved >= 0)
			close(*saved);
		*saved = -1;
	}
	if (fd >= 0)
		close(fd);
}

static void stderr_back(int saved)
{
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
}

static void vmm_exits(void)
{
	char id[STORE_ID_LEN], err[512], sid[STORE_ID_LEN] = "", body[128];
	const char *p;
	struct t_done d = {0};

	if ((p = up("{}", "nodial"))) {
		snprintf(id, sizeof(id), "%s", p);
		kill_in("vmm_exit_booting_fails", id, SBX_BOOTING);
	}
	if ((p = up("{}", NULL))) {
		snprintf(id, sizeof(id), "%s", p);
		kill_in("vmm_exit_idle_fails", id, SBX_IDLE);
	}
	if ((p = up("{}", NULL))) {
		snprintf(id, sizeof(id), "%s", p);
		p = t_exec_start(id, "[\"sleep\",\"600\"]", 0, err, sizeof(err));
		if (p)
			t_wait_state(id, SBX_RUNNING);
		kill_in("vmm_exit_running_fails", id, SBX_RUNNING);
	}
	/* A pause whose VMM never answers: PAUSING until the VMM is gone. */
	if ((p = up("{}", "hang-control"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_IDLE);
		sbx_pause(T.m, id, t_done_cb, &d);
		kill_in("vmm_exit_pausing_fails", id, SBX_PAUSING);
		t_check("pause_answered_when_vmm_dies", t_wait_done(&d) && !d.ok, "%s", d.msg);
		t_done_reset(&d);
	}
	/* A warm start whose guest never dials: RESTORING. */
	if ((p = up("{}", NULL))) {
		snprintf(id, sizeof(id), "%s", p);
		t_snapshot(id, "{\"name\":\"fail-snap\",\"tag\":\"latest\"}", sid);
		t_destroy(id);
		snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
		if ((p = up(body, "nodial"))) {
			snprintf(id, sizeof(id), "%s", p);
			kill_in("vmm_exit_restoring_fails", id, SBX_RESTORING);
		}
	}
	/* A checkpoint restore whose guest never dials: REBOOTING. */
	if ((p = up("{}", NULL))) {
		snprintf(id, sizeof(id), "%s", p);
		sbx_ckpt_create(T.m, id, "c", t_done_cb, &d);
		t_wait_done(&d);
		t_done_reset(&d);
		setenv("FAKE_VMM", "nodial", 1);
		sbx_ckpt_restore(T.m, id, "c", t_done_cb, &d);
		t_wait_state(id, SBX_REBOOTING);
		unsetenv("FAKE_VMM");
		kill_in("vmm_exit_rebooting_fails", id, SBX_REBOOTING);
		t_check("restore_answered_when_vmm_dies", t_wait_done(&d) && !d.ok, "%s", d.msg);
		t_done_reset(&d);
	}
}

/* A resume whose VMM dies keeps the sandbox paused, its memory.snap intact. */
static void resume_fails(void)
{
	char id[STORE_ID_LEN], st[32];
	const char *p = up("{}", NULL);
	struct t_done d = {0};
	pid_t pid;

	if (!p) {
		t_check("vmm_exit_resuming_stays_paused", false, "no sandbox");
		return;
	}
	snprintf(id, sizeof(id), "%s", p);
	sbx_pause(T.m, id, t_done_cb, &d);
	t_wait_done(&d);
	t_done_reset(&d);
	setenv("FAKE_VMM", "nodial", 1);
	sbx_resume(T.m, id, t_done_cb, &d);
	unsetenv("FAKE_VMM");
	pid = t_vmm_pid(id);
	if (t_state(id) == SBX_RESUMING && pid > 0)
		kill(pid, SIGKILL);
	t_check("vmm_exit_resuming_stays_paused",
	        pid > 0 && t_wait_done(&d) && !d.ok && t_state(id) == SBX_PAUSED &&
	                !strcmp(t_status(id, st, sizeof(st)), "paused"),
	        "%s; state %s", d.msg, sbx_state_name(t_state(id)));
	t_done_reset(&d);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("resume_after_failed_resume", t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE,
	        "%s", d.msg);
	t_done_reset(&d);
	t_destroy(id);
}

static void start_failures(void)
{
	char id[STORE_ID_LEN], st[32], why[512], log[300];
	uint64_t ready = T.m->cfg.ready_ms;
	const char *p;
	int saved;

	/* huskd's log (stderr) into a file while a guest crashes: its console must be there. */
	snprintf(log, sizeof(log), "%s/crash-huskd.log", T.root);
	stderr_to(log, &saved);
	if ((p = up("{}", "crash-at-start"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_GONE);
		failed_reason(id, why, sizeof(why));
		t_check("guest_crash_fails_with_vmm_words",
		        !strcmp(t_status(id, st, sizeof(st)), "failed") && strstr(why, "crashed") &&
		                strstr(why, "crashing at start"),
		        "%s: '%s'", st, why);
	}
	stderr_back(saved);
	t_check("guest_crash_logs_its_console",
	        t_file_has(log, "its guest crashed; its console ended with:") &&
	                t_file_has(log, "Kernel panic - not syncing: crash-at-start"),
	        "huskd's log has no console tail (%s)", log);
	/* Its agent never dials: the readiness countdown ends it. */
	T.m->cfg.ready_ms = 300;
	if ((p = up("{}", "nodial"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_GONE);
		failed_reason(id, why, sizeof(why));
		t_check("readiness_timeout_fails",
		        !strcmp(t_status(id, st, sizeof(st)), "failed") &&
		                strstr(why, "did not dial in"),
		        "%s: '%s'", st, why);
	}
	T.m->cfg.ready_ms = ready;
}

/*
 * A guest whose agent takes a request and never answers: the call is given up
 * after the manager's deadline with an error saying so, and the sandbox goes
 * on serving other requests.
 */
static bool vmm_log_has_dump(void *arg)
{
	return t_file_has(arg, "state on request");
}

static void agent_never_answers(void)
{
	uint64_t was = T.m->cfg.call_idle_ms;
	struct t_done d = {0};
	char id[STORE_ID_LEN], log[4200];
	const char *p = up("{}", "mute-reads");
	json_t *rec;

	if (!p) {
		t_check("agent_call_deadline", false, "no sandbox");
		return;
	}
	snprintf(id, sizeof(id), "%s", p);
	t_wait_state(id, SBX_IDLE);
	T.m->cfg.call_idle_ms = 300;
	sbx_fs_read(T.m, id, "a.txt", t_done_cb, &d);
	t_check("agent_call_deadline",
	        t_wait_done(&d) && !d.ok && d.fault == SBX_UNREACHABLE &&
	                strstr(d.msg, "has said nothing"),
	        "fault %d: %s", d.fault, d.msg);
	T.m->cfg.call_idle_ms = was;
	t_done_reset(&d);
	/* What each side stood at goes to the VMM's log (husk-vmm: its queues, connections). */
	snprintf(log, sizeof(log), "%s/vmm.log", t_sb(id)->dir);
	t_check("agent_call_deadline_asks_vmm_state", t_wait(vmm_log_has_dump, log, 10000),
	        "no dump in %s", log);
	rec = t_exec(id, "[\"true\"]");
	t_check("usable_after_call_deadline",
	        rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed") &&
	                t_state(id) == SBX_IDLE,
	        "state %s", sbx_state_name(t_state(id)));
	json_decref(rec);
	t_destroy(id);
}

/*
 * A restored guest that takes "resumed" and never answers (seen nested: one
 * template child of twenty held at once): the create fails at the call's
 * deadline, and the VMM's answer to the dump that silence asked for reaches
 * huskd's log before the VMM and its folder go.
 */
static void silent_setup_leaves_a_clue(void)
{
	uint64_t was = T.m->cfg.call_idle_ms;
	char id[STORE_ID_LEN], sid[STORE_ID_LEN] = "", body[128], st[32], log[4200];
	const char *p = up("{}", NULL);
	int saved;

	if (!p) {
		t_check("silent_setup_logs_vmm_state", false, "no sandbox");
		return;
	}
	snprintf(id, sizeof(id), "%s", p);
	t_snapshot(id, "{\"name\":\"silent-snap\",\"tag\":\"latest\"}", sid);
	t_destroy(id);
	snprintf(log, sizeof(log), "%s/silent-huskd.log", T.root);
	stderr_to(log, &saved);
	T.m->cfg.call_idle_ms = 300;
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	st[0] = '\0';
	if ((p = up(body, "mute-resumed"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_GONE);
		t_status(id, st, sizeof(st));
	}
	T.m->cfg.call_idle_ms = was;
	stderr_back(saved);
	t_check("silent_setup_logs_vmm_state",
	        !strcmp(st, "failed") && t_file_has(log, "took resumed, will not answer") &&
	                t_file_has(log, "its VMM's log ended with:") &&
	                t_file_has(log, "state on request"),
	        "%s; see %s", st, log);
}

/* This process's resident memory, from /proc (kB). */
static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/*
 * A guest that streams without end into a read: the answer began with the
 * first bytes, so at the limit the stream ends failed (its HTTP reader cuts
 * the connection), the agent told to stop, and none of it held in memory
 * (the manager's RSS grows by far less than the 64 MiB it took in).
 */
static void endless_read(void)
{
	uint64_t was = T.m->cfg.read_max;
	struct t_done d = {0};
	char id[STORE_ID_LEN];
	const char *p =
		up("{\"files\":[{\"path\":\"a.txt\",\"content\":\"aGk=\"}]}", "endless-reads");
	long before, after;
	json_t *rec;

	if (!p) {
		t_check("endless_read_cut_at_the_limit", false, "no sandbox");
		return;
	}
	snprintf(id, sizeof(id), "%s", p);
	t_wait_state(id, SBX_IDLE);
	T.m->cfg.read_max = 64ull << 20;
	before = rss_kb();
	sbx_fs_read(T.m, id, "a.txt", t_done_cb, &d);
	t_check("endless_read_cut_at_the_limit",
	        t_wait_done(&d) && d.ok && d.live && d.failed && d.len <= (64u << 20),
	        "ok %d, live %d, failed %d, %zu bytes: %s", d.ok, d.live != NULL, d.failed, d.len,
	        d.msg);
	after = rss_kb();
	t_check("endless_read_not_in_memory", before > 0 && after - before < 16 * 1024,
	        "(measured) RSS %ld kB before, %ld kB after 64 MiB came in", before, after);
	printf("  (measured) manager RSS %ld kB before the read, %ld kB after 64 MiB\n", before,
	       after);
	T.m->cfg.read_max = was;
	t_done_reset(&d);
	rec = t_exec(id, "[\"true\"]");
	t_check("usable_after_endless_read",
	        rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed"),
	        "state %s", sbx_state_name(t_state(id)));
	json_decref(rec);
	t_destroy(id);
}

static void agent_and_control_failures(void)
{
	char id[STORE_ID_LEN], st[32], err[512];
	struct t_done d = {0};
	const char *p, *eid;
	json_t *rec;

	if ((p = up("{}", "exit-on-exec"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_IDLE);
		eid = t_exec_start(id, "[\"true\"]", 0, err, sizeof(err));
		rec = eid ? t_exec_wait(eid) : NULL;
		t_check("vmm_exit_during_exec_ends_both",
		        rec &&
		                strcmp(json_string_value(json_object_get(rec, "status")),
		                       "completed") &&
		                t_wait_state(id, SBX_GONE) &&
		                !strcmp(t_status(id, st, sizeof(st)), "failed"),
		        "%s", st);
		json_decref(rec);
	}
	/*
	 * A resumed guest's connection breaks under "resumed" (nested, a restored
	 * guest's late reset of its old connections took the new one): its agent
	 * dials again, and the setup starts over on that connection.
	 */
	if ((p = up("{}", NULL)) && t_pause(p)) {
		bool resumed;

		snprintf(id, sizeof(id), "%s", p);
		setenv("FAKE_VMM", "drop-resumed", 1);
		sbx_resume(T.m, id, t_done_cb, &d);
		resumed = t_wait_done(&d) && d.ok;
		unsetenv("FAKE_VMM");
		snprintf(err, sizeof(err), "%s/vmm.log", t_sb(id)->dir);
		rec = resumed ? t_exec(id, "[\"true\"]") : NULL;
		t_check("setup_over_after_connection_lost",
		        rec && t_file_has(err, "dropped the connection under resumed") &&
		                !strcmp(json_string_value(json_object_get(rec, "status")),
		                        "completed"),
		        "%s; state %s", d.msg, sbx_state_name(t_state(id)));
		json_decref(rec);
		t_done_reset(&d);
		t_destroy(id);
	}
	if ((p = up("{}", "snapshot-fails"))) {
		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_IDLE);
		sbx_pause(T.m, id, t_done_cb, &d);
		t_check("failed_snapshot_guest_runs_on",
		        t_wait_done(&d) && !d.ok && strstr(d.msg, "No space left") &&
		                t_state(id) == SBX_IDLE,
		        "%s; state %s", d.msg, sbx_state_name(t_state(id)));
		t_done_reset(&d);
		rec = t_exec(id, "[\"true\"]");
		t_check("usable_after_failed_snapshot",
		        rec && !strcmp(json_string_value(json_object_get(rec, "status")),
		                       "completed"),
		        "no");
		json_decref(rec);
		t_destroy(id);
	}
	agent_never_answers();
	silent_setup_leaves_a_clue();
	endless_read();
}

/* Requests under way when their sandbox is destroyed: each answered, with the end as the reason. */
static void destroyed_meanwhile(void)
{
	char id[STORE_ID_LEN];
	struct t_done pause = {0}, ckpt = {0}, list = {0};
	const char *p = up("{}", NULL);
	json_t *rec;

	if (!p) {
		t_check("pause_answered_when_destroyed", false, "no sandbox");
		return;
	}
	snprintf(id, sizeof(id), "%s", p);
	sbx_pause(T.m, id, t_done_cb, &pause);
	t_destroy(id);
	t_check("pause_answered_when_destroyed",
	        t_wait_done(&pause) && !pause.ok && pause.fault == SBX_ENDED, "%s", pause.msg);
	t_done_reset(&pause);
	if ((p = up("{}", NULL))) {
		snprintf(id, sizeof(id), "%s", p);
		sbx_ckpt_create(T.m, id, "doomed", t_done_cb, &ckpt);
		sbx_fs_list(T.m, id, ".", t_done_cb, &list);
		t_destroy(id);
		t_check("checkpoint_answered_when_destroyed", t_wait_done(&ckpt) && !ckpt.ok,
		        "ok %d: %s", ckpt.ok, ckpt.msg);
		t_check("request_in_flight_ends_with_the_sandbox",
		        t_wait_done(&list) && (list.ok || list.fault == SBX_ENDED), "fault %d: %s",
		        list.fault, list.msg);
		t_done_reset(&ckpt);
		t_done_reset(&list);
	}
	/* A VMM that dies under a command: the command failed, and says why. */
	if ((p = up("{}", "exit-on-exec"))) {
		char err[512];
		const char *eid;

		snprintf(id, sizeof(id), "%s", p);
		t_wait_state(id, SBX_IDLE);
		eid = t_exec_start(id, "[\"true\"]", 0, err, sizeof(err));
		rec = eid ? t_exec_wait(eid) : NULL;
		t_check("vmm_death_fails_command_with_cause",
		        rec &&
		                !strcmp(json_string_value(json_object_get(rec, "status")),
		                        "failed") &&
		                strstr(json_string_value(json_object_get(rec, "error")) ?: "",
		                       "exited unexpectedly"),
		        "%s: %s", json_string_value(json_object_get(rec, "status")),
		        json_string_value(json_object_get(rec, "error")));
		json_decref(rec);
		t_wait_state(id, SBX_GONE);
	}
}

void t_failures(void)
{
	destroyed_meanwhile();
	vmm_exits();
	resume_fails();
	start_failures();
	agent_and_control_failures();
}
