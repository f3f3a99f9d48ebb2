// SPDX-License-Identifier: MIT
/* A sandbox's life with the fake VMM: create, setup, pause, resume, snapshots, checkpoints, ends.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_test.h"

static bool has_event_to(const char *id, const char *to)
{
	json_t *ev = NULL, *e;
	bool found = false;
	size_t i;

	if (sbx_events(T.m, id, 100, false, &ev))
		return false;
	json_array_foreach(json_object_get(ev, "events"), i, e)
	{
		const char *t =
			json_string_value(json_object_get(json_object_get(e, "event"), "to"));

		if (t && !strcmp(t, to))
			found = true;
	}
	json_decref(ev);
	return found;
}

static void create_and_setup(void)
{
	char err[512], st[32];
	const char *id = t_create("{\"env\":{\"GREETING\":\"hi\"},\"files\":[{\"path\":\"a.txt\","
	                          "\"content\":\"aGVsbG8=\"}]}",
	                          NULL, err, sizeof(err));
	struct t_done d = {0};
	json_t *rec;

	if (!t_check("create_answers_creating", id != NULL, "%s", err))
		return;
	t_check("create_boots_to_idle", t_wait_state(id, SBX_IDLE) && t_vmm_pid(id) > 0, "state %s",
	        sbx_state_name(t_state(id)));
	t_check("create_records_idle",
	        !strcmp(t_status(id, st, sizeof(st)), "idle") && has_event_to(id, "idle"),
	        "status %s", st);
	rec = t_exec(id, "[\"printenv\",\"GREETING\"]");
	t_check("setup_sets_env",
	        rec && !strcmp(json_string_value(json_object_get(rec, "status")), "completed"),
	        "status %s", json_string_value(json_object_get(rec, "status")));
	json_decref(rec);
	sbx_fs_read(T.m, id, "a.txt", t_done_cb, &d);
	t_check("setup_writes_files",
	        t_wait_done(&d) && d.ok && d.len == 5 && !strcmp(d.bytes, "hello"),
	        "%s; %zu bytes '%s'", d.msg, d.len, d.bytes);
	t_done_reset(&d);
	sbx_fs_read(T.m, id, "nope.txt", t_done_cb, &d);
	t_check("fs_missing_file_not_found", t_wait_done(&d) && !d.ok && d.fault == SBX_NOT_FOUND,
	        "fault %d: %s", d.fault, d.msg);
	t_done_reset(&d);
	t_destroy(id);
	t_check("destroy_records_deleted",
	        t_state(id) == SBX_GONE && !strcmp(t_status(id, st, sizeof(st)), "deleted"),
	        "state %s status %s", sbx_state_name(t_state(id)), st);
}

static void bad_creates(void)
{
	char err[512];

	t_check("create_unknown_runtime_refused",
	        !t_create("{\"runtime\":\"cobol:1\"}", NULL, err, sizeof(err)) &&
	                strstr(err, "not in the catalog"),
	        "%s", err);
	t_check("create_small_disk_refused",
	        !t_create("{\"resources\":{\"disk\":\"1Mi\"}}", NULL, err, sizeof(err)) &&
	                strstr(err, "at least"),
	        "%s", err);
	t_check("create_bad_timeout_refused",
	        !t_create("{\"timeout\":{\"idle\":\"soon\"}}", NULL, err, sizeof(err)) &&
	                strstr(err, "timeout.idle"),
	        "%s", err);
}

static void pause_resume(void)
{
	char err[512], st[32];
	const char *id = t_create("{}", NULL, err, sizeof(err));
	struct t_done d = {0};
	pid_t pid;
	json_t *rec;
	bool resumed;

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("pause_to_disk", false, "no sandbox: %s", err);
		return;
	}
	pid = t_vmm_pid(id);
	sbx_pause(T.m, id, t_done_cb, &d);
	t_check("pause_to_disk",
	        t_wait_done(&d) && d.ok && t_state(id) == SBX_PAUSED && !t_vmm_pid(id) &&
	                t_ended(pid) && !strcmp(t_status(id, st, sizeof(st)), "paused"),
	        "%s; state %s", d.msg, sbx_state_name(t_state(id)));
	t_done_reset(&d);
	sbx_pause(T.m, id, t_done_cb, &d);
	t_check("pause_of_paused_refused", t_wait_done(&d) && !d.ok && d.fault == SBX_STATE, "%s",
	        d.msg);
	t_done_reset(&d);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("resume_to_idle", t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE, "%s", d.msg);
	t_done_reset(&d);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("resume_of_idle_refused", t_wait_done(&d) && !d.ok && d.fault == SBX_STATE, "%s",
	        d.msg);
	t_done_reset(&d);
	/* A command for a paused sandbox resumes it first. */
	sbx_pause(T.m, id, t_done_cb, &d);
	t_wait_done(&d);
	t_done_reset(&d);
	{
		struct sbx_exec_req req = {.base = "http://t",
		                           .argv = json_pack("[ss]", "echo", "x")};
		struct sbx_err e;
		json_t *exec = NULL;

		if (sbx_exec_start(T.m, id, &req, &exec, &resumed, &e))
			exec = NULL;
		rec = exec ? t_exec_wait(json_string_value(json_object_get(exec, "executionId")))
		           : NULL;
		t_check("exec_resumes_paused",
		        resumed && rec &&
		                !strcmp(json_string_value(json_object_get(rec, "status")),
		                        "completed"),
		        "resumed %d, %s", resumed, exec ? "" : e.msg);
		json_decref(rec);
		json_decref(exec);
		json_decref(req.argv);
	}
	t_destroy(id);
}

static void snapshots_and_checkpoints(void)
{
	char err[512], body[256], st[32];
	const char *id = t_create("{}", NULL, err, sizeof(err)), *child;
	struct t_done d = {0};
	json_t *snap = json_pack("{ssss}", "name", "t-snap", "tag", "latest"), *list = NULL;
	char sid[STORE_ID_LEN] = "", parent[STORE_ID_LEN];

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("snapshot_taken", false, "no sandbox: %s", err);
		json_decref(snap);
		return;
	}
	snprintf(parent, sizeof(parent), "%s", id);
	sbx_snap_create(T.m, parent, snap, t_done_cb, &d);
	if (t_check("snapshot_taken", t_wait_done(&d) && d.ok && t_state(parent) == SBX_IDLE,
	            "%s; state %s", d.msg, sbx_state_name(t_state(parent))))
		snprintf(sid, sizeof(sid), "%s",
		         json_string_value(json_object_get(d.data, "snapshotId")));
	t_done_reset(&d);
	json_decref(snap);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	child = t_create(body, NULL, err, sizeof(err));
	t_check("snapshot_child_resumes_from_memory",
	        child && t_sb(child) && t_state(child) == SBX_RESTORING &&
	                t_wait_state(child, SBX_IDLE),
	        "%s", child ? sbx_state_name(t_state(child)) : err);
	if (child) {
		t_destroy(child);
	}
	sbx_ckpt_create(T.m, parent, "first", t_done_cb, &d);
	t_check("checkpoint_created", t_wait_done(&d) && d.ok && t_state(parent) == SBX_IDLE, "%s",
	        d.msg);
	t_done_reset(&d);
	sbx_ckpt_create(T.m, parent, "first", t_done_cb, &d);
	t_check("checkpoint_name_taken", t_wait_done(&d) && !d.ok && d.fault == SBX_EXISTS, "%s",
	        d.msg);
	t_done_reset(&d);
	sbx_ckpt_create(T.m, parent, "second", t_done_cb, &d);
	t_wait_done(&d);
	t_done_reset(&d);
	sbx_ckpt_restore(T.m, parent, "first", t_done_cb, &d);
	t_check("checkpoint_restore_reboots",
	        t_wait_done(&d) && d.ok && t_state(parent) == SBX_IDLE, "%s", d.msg);
	t_done_reset(&d);
	t_check("checkpoint_restore_drops_newer",
	        sbx_ckpt_list(T.m, parent, &list, NULL) == 0 &&
	                json_array_size(json_object_get(list, "checkpoints")) == 1,
	        "%zu checkpoints", json_array_size(json_object_get(list, "checkpoints")));
	json_decref(list);
	t_destroy(parent);
	t_check("snapshot_outlives_its_sandbox",
	        !strcmp(t_status(parent, st, sizeof(st)), "deleted") &&
	                sbx_snap_get(T.m, STORE_DEFAULT_ORG, sid, false, &list, NULL) == 0,
	        "status %s", st);
	json_decref(list);
}

static void timeouts(void)
{
	char err[512], st[32];
	const char *id = t_create("{\"timeout\":{\"idle\":\"300ms\"}}", NULL, err, sizeof(err));
	struct t_done d = {0};

	t_check("idle_timeout_terminates",
	        id && t_wait_state(id, SBX_GONE) &&
	                !strcmp(t_status(id, st, sizeof(st)), "terminated"),
	        "%s %s", id ? st : err, id ? sbx_state_name(t_state(id)) : "");
	id = t_create("{\"timeout\":{\"paused\":\"300ms\"}}", NULL, err, sizeof(err));
	if (id && t_wait_state(id, SBX_IDLE))
		sbx_pause(T.m, id, t_done_cb, &d);
	t_check("paused_timeout_terminates",
	        id && t_wait_done(&d) && d.ok && t_wait_state(id, SBX_GONE) &&
	                !strcmp(t_status(id, st, sizeof(st)), "terminated"),
	        "%s %s", id ? st : err, d.msg);
	t_done_reset(&d);
	/* huskd --on-idle pause: the idle timeout pauses instead. */
	T.m->cfg.idle_pause = true;
	id = t_create("{\"timeout\":{\"idle\":\"300ms\"}}", NULL, err, sizeof(err));
	t_check("idle_timeout_pauses_with_on_idle_pause",
	        id && t_wait_state(id, SBX_PAUSED) &&
	                !strcmp(t_status(id, st, sizeof(st)), "paused"),
	        "%s", id ? sbx_state_name(t_state(id)) : err);
	T.m->cfg.idle_pause = false;
	if (id) {
		t_destroy(id);
	}
}

static void oneshot(void)
{
	char err[512], st[32];
	const char *id = t_create("{\"command\":{\"exec\":[\"exit\",\"5\"],\"mode\":\"oneshot\"}}",
	                          NULL, err, sizeof(err));
	const char *eid = id ? t_exec_start(id, "[\"exit\",\"5\"]", 0, err, sizeof(err)) : NULL;
	json_t *info = NULL;

	t_check("oneshot_terminates_with_exit_code",
	        eid && t_wait_state(id, SBX_GONE) &&
	                !strcmp(t_status(id, st, sizeof(st)), "terminated") &&
	                sbx_get(T.m, id, &info, NULL) == 0 &&
	                json_integer_value(json_object_get(info, "exitCode")) == 5,
	        "%s %s", st, err);
	t_check("oneshot_never_idle",
	        id && !has_event_to(id, "idle") && has_event_to(id, "running"),
	        "its events went through idle");
	json_decref(info);
}

void t_lifecycle(void)
{
	create_and_setup();
	bad_creates();
	pause_resume();
	snapshots_and_checkpoints();
	timeouts();
	oneshot();
}
