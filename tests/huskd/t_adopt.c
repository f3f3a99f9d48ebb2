// SPDX-License-Identifier: MIT
/*
 * A huskd restart: the manager lets go of everything and a new one takes it
 * up from the store. Each state a sandbox can be in when that happens:
 * idle, running a command, paused to disk, still starting, and one whose
 * VMM died while no huskd watched it.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx_test.h"

struct kept {
	char id[STORE_ID_LEN];
	pid_t pid;
	char exec[STORE_ID_LEN];
};

/* How many sandboxes' folders the state folder holds. */
static unsigned folders(void)
{
	char path[300];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/state/sandboxes", T.root);
	d = opendir(path);
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static bool make(struct kept *k, const char *mode, enum sbx_state want)
{
	char err[512];
	const char *id = t_create("{}", mode, err, sizeof(err));

	if (!id || !t_wait_state(id, want))
		return false;
	snprintf(k->id, sizeof(k->id), "%s", id);
	k->pid = t_vmm_pid(id);
	return true;
}

void t_adoption(void)
{
	struct kept idle = {0}, running = {0}, paused = {0}, starting = {0}, dead = {0};
	char err[512], st[32];
	struct t_done d = {0};
	const char *eid;
	json_t *rec;
	bool made = make(&idle, NULL, SBX_IDLE) && make(&running, NULL, SBX_IDLE) &&
	            make(&paused, NULL, SBX_IDLE) && make(&starting, "nodial", SBX_BOOTING) &&
	            make(&dead, NULL, SBX_IDLE);

	if (!t_check("adoption_setup", made, "could not make the sandboxes"))
		return;
	eid = t_exec_start(running.id, "[\"sleep\",\"600\"]", 0, err, sizeof(err));
	if (eid)
		snprintf(running.exec, sizeof(running.exec), "%s", eid);
	t_wait_state(running.id, SBX_RUNNING);
	sbx_pause(T.m, paused.id, t_done_cb, &d);
	t_wait_done(&d);
	t_done_reset(&d);

	/* Waiting on a sandbox that is still starting when huskd stops: told, not dropped. */
	{
		struct sbx_exec_req req = {.base = "http://t", .argv = json_pack("[s]", "true")};
		json_t *files = json_pack("[{ssss}]", "path", "w.txt", "content", "eA==");
		json_t *create_body = json_object();
		struct t_done c = {0};
		struct sbx_err e;
		json_t *exec = NULL;
		bool resumed, drained;
		unsigned before = folders();

		if (sbx_exec_start(T.m, starting.id, &req, &exec, &resumed, &e))
			exec = NULL;
		sbx_fs_write(T.m, starting.id, files, t_done_cb, &d);
		/* A create whose layer is being made as huskd stops: no VMM after. */
		sbx_create(T.m, create_body, t_done_cb, &c);
		drained = t_close();
		t_check("close_answers_what_waits", d.done && !d.ok && d.fault == SBX_UNAVAILABLE,
		        "done %d: %s", d.done, d.msg);
		t_check("close_during_a_create_starts_no_vmm",
		        drained && c.done && !c.ok && c.fault == SBX_UNAVAILABLE,
		        "the loop drained %d; create answered %d: %s", drained, c.done, c.msg);
		/* It was never recorded: no huskd after would take its folder up. */
		t_check("close_during_a_create_leaves_no_folder", folders() == before,
		        "%u sandbox folders before its create, %u after the stop", before,
		        folders());
		t_done_reset(&d);
		t_done_reset(&c);
		json_decref(create_body);
		json_decref(exec);
		json_decref(files);
		json_decref(req.argv);
	}
	t_check("close_leaves_vmms_running",
	        !t_ended(idle.pid) && !t_ended(running.pid) && !t_ended(starting.pid),
	        "a VMM ended with the manager");
	kill(dead.pid, SIGKILL);
	waitpid(dead.pid, NULL, 0);
	t_open();
	sbx_mgr_adopt(T.m);

	t_check("adopt_idle",
	        t_state(idle.id) == SBX_ADOPTING && t_wait_state(idle.id, SBX_IDLE) &&
	                t_vmm_pid(idle.id) == idle.pid,
	        "state %s", sbx_state_name(t_state(idle.id)));
	rec = t_exec(idle.id, "[\"echo\",\"still\"]");
	t_check("adopted_runs_commands",
	        rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed"),
	        "no");
	json_decref(rec);
	t_check("adopt_running_lost_command",
	        t_wait_state(running.id, SBX_IDLE) &&
	                store_execution_get(T.store, running.exec, &rec, NULL) == 0 &&
	                !strcmp(json_string_value(json_object_get(rec, "status")), "failed"),
	        "state %s", sbx_state_name(t_state(running.id)));
	json_decref(rec);
	t_check("adopt_paused_stays_paused", t_state(paused.id) == SBX_PAUSED, "state %s",
	        sbx_state_name(t_state(paused.id)));
	sbx_resume(T.m, paused.id, t_done_cb, &d);
	t_check("adopted_paused_resumes", t_wait_done(&d) && d.ok && t_state(paused.id) == SBX_IDLE,
	        "%s", d.msg);
	t_done_reset(&d);
	t_check("adopt_starting_fails",
	        t_wait_state(starting.id, SBX_GONE) &&
	                !strcmp(t_status(starting.id, st, sizeof(st)), "failed"),
	        "status %s", st);
	/* It was this process's child (the first manager started it): reap it to see it gone. */
	t_check("adopt_starting_kills_its_vmm",
	        t_state(starting.id) == SBX_GONE && t_ended(starting.pid), "pid %d still runs",
	        (int)starting.pid);
	t_check("adopt_dead_vmm_fails",
	        t_state(dead.id) == SBX_GONE &&
	                !strcmp(t_status(dead.id, st, sizeof(st)), "failed"),
	        "status %s", st);
	/* An adopted VMM is not huskd's child: its exit after a written snapshot has no status. */
	sbx_pause(T.m, idle.id, t_done_cb, &d);
	t_check("adopted_pauses", t_wait_done(&d) && d.ok && t_state(idle.id) == SBX_PAUSED,
	        "%s; state %s", d.msg, sbx_state_name(t_state(idle.id)));
	t_done_reset(&d);
	for (struct kept *k = (struct kept[]){idle, running, paused}, *end = k + 3; k < end; k++) {
		t_destroy(k->id);
	}
}
