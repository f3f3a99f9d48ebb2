// SPDX-License-Identifier: MIT
/* Executions on the agent session: output, exit codes, one at a time, cancel, timeout, destroy. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outbuf.h"
#include "sbx_test.h"

static const char *status_of(json_t *rec)
{
	const char *s = json_string_value(json_object_get(rec, "status"));

	return s ? s : "(none)";
}

/* The bytes of an execution's stdout stream, read from its file. */
static long stream_bytes(const char *exec_id, char *buf, size_t len)
{
	json_t *rec = NULL, *priv = NULL;
	struct outbuf *live;
	char path[4200];
	const char *sid;
	long n = -1;
	int fd;

	if (store_execution_get(T.store, exec_id, &rec, &priv))
		return -1;
	sid = json_string_value(json_object_get(priv, "stdoutStream"));
	if (sid && sbx_stream(T.m, sid, &live, path, sizeof(path)) == 0 &&
	    (fd = open(path, O_RDONLY)) >= 0) {
		struct stat st;

		n = fstat(fd, &st) == 0 ? (long)st.st_size : -1;
		if (buf && len && pread(fd, buf, len - 1, 0) >= 0)
			buf[n < (long)len ? n : (long)len - 1] = '\0';
		close(fd);
	}
	json_decref(rec);
	json_decref(priv);
	return n;
}

static void output_and_codes(const char *id)
{
	char out[64] = "", err[512];
	const char *eid = t_exec_start(id, "[\"echo\",\"hello\",\"there\"]", 0, err, sizeof(err));
	json_t *rec = eid ? t_exec_wait(eid) : NULL;

	t_check("exec_streams_stdout",
	        rec && !strcmp(status_of(rec), "completed") &&
	                stream_bytes(eid, out, sizeof(out)) == 12 && !strcmp(out, "hello there\n"),
	        "%s, stdout %s", eid ? status_of(rec) : err, out);
	json_decref(rec);
	rec = t_exec(id, "[\"exit\",\"7\"]");
	t_check("exec_exit_code",
	        rec && !strcmp(status_of(rec), "failed") &&
	                json_integer_value(json_object_get(rec, "exitCode")) == 7,
	        "%s", status_of(rec));
	json_decref(rec);
	/* More than the 1 MiB the test's manager keeps per stream. */
	eid = t_exec_start(id, "[\"yes\",\"3000000\"]", 0, err, sizeof(err));
	rec = eid ? t_exec_wait(eid) : NULL;
	t_check("exec_output_truncated_at_limit",
	        rec && json_is_true(json_object_get(rec, "outputTruncated")) &&
	                stream_bytes(eid, NULL, 0) == 1 << 20,
	        "%s, %ld bytes kept", status_of(rec), eid ? stream_bytes(eid, NULL, 0) : -1);
	json_decref(rec);
}

static void one_at_a_time_and_cancel(const char *id)
{
	char err[512] = "";
	const char *first = t_exec_start(id, "[\"sleep\",\"600\"]", 0, err, sizeof(err));
	char eid[STORE_ID_LEN];
	struct t_done d = {0};
	pid_t pid = t_vmm_pid(id);
	json_t *rec;

	if (!first) {
		t_check("exec_busy_refused", false, "%s", err);
		return;
	}
	snprintf(eid, sizeof(eid), "%s", first);
	t_check("exec_busy_refused",
	        !t_exec_start(id, "[\"true\"]", 0, err, sizeof(err)) &&
	                strstr(err, "already running"),
	        "%s", err);
	/* Other requests go on beside the command on the same session. */
	sbx_fs_list(T.m, id, ".", t_done_cb, &d);
	t_check("requests_beside_a_command", t_wait_done(&d) && d.ok && t_state(id) == SBX_RUNNING,
	        "%s", d.msg);
	t_done_reset(&d);
	sbx_exec_cancel(T.m, eid, t_done_cb, &d);
	t_check("cancel_ends_command",
	        t_wait_done(&d) && d.ok && !strcmp(status_of(d.data), "cancelled") &&
	                json_integer_value(json_object_get(d.data, "exitCode")) == 143,
	        "%s %s", d.msg, d.data ? status_of(d.data) : "");
	t_done_reset(&d);
	t_check("cancel_keeps_vmm",
	        t_state(id) == SBX_IDLE && t_vmm_pid(id) == pid && kill(pid, 0) == 0,
	        "state %s, pid %d was %d", sbx_state_name(t_state(id)), (int)t_vmm_pid(id),
	        (int)pid);
	rec = t_exec(id, "[\"true\"]");
	t_check("usable_after_cancel", rec && !strcmp(status_of(rec), "completed"), "%s",
	        status_of(rec));
	json_decref(rec);
	first = t_exec_start(id, "[\"sleep\",\"600\"]", 300, err, sizeof(err));
	rec = first ? t_exec_wait(first) : NULL;
	t_check("timeout_ends_command",
	        rec && !strcmp(status_of(rec), "timeout") && t_vmm_pid(id) == pid &&
	                t_state(id) == SBX_IDLE,
	        "%s", status_of(rec));
	json_decref(rec);
	sbx_exec_cancel(T.m, "exec_nosuch", t_done_cb, &d);
	t_check("cancel_unknown_not_found", t_wait_done(&d) && !d.ok && d.fault == SBX_NOT_FOUND,
	        "%s", d.msg);
	t_done_reset(&d);
}

/* Destroy with a command running: it is recorded cancelled while its VMM still runs. */
static void destroy_while_running(void)
{
	char err[512], st[32];
	const char *id = t_create("{}", NULL, err, sizeof(err));
	const char *eid;
	json_t *rec = NULL;
	bool vmm_alive;
	pid_t pid;

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("destroy_records_execution_cancelled_first", false, "%s", err);
		return;
	}
	eid = t_exec_start(id, "[\"sleep\",\"600\"]", 0, err, sizeof(err));
	pid = t_vmm_pid(id);
	if (eid)
		t_wait_state(id, SBX_RUNNING);
	if (sbx_destroy(T.m, id, NULL))
		t_check("destroy_while_running", false, "refused");
	/* No loop turn since: the VMM's exit cannot have been seen yet. */
	vmm_alive = t_sb(id) && t_sb(id)->vmm;
	if (eid && store_execution_get(T.store, eid, &rec, NULL))
		rec = NULL;
	t_check("destroy_records_execution_cancelled_first",
	        eid && vmm_alive && rec && !strcmp(status_of(rec), "cancelled"), "vmm %d, %s",
	        vmm_alive, status_of(rec));
	json_decref(rec);
	t_check("destroy_ends_vmm",
	        t_wait_state(id, SBX_GONE) && t_ended(pid) &&
	                !strcmp(t_status(id, st, sizeof(st)), "deleted"),
	        "state %s", st);
}

/* Many requests at once on one session, each answered with its own bytes. */
static void many_at_once(const char *id)
{
	enum { N = 40 };
	struct t_done d[N] = {0};
	json_t *files[N];
	char path[32], want[64];
	unsigned ok = 0;

	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof(path), "f%d.txt", i);
		files[i] = json_pack("[{ssss}]", "path", path, "content", "ZmlsZS1udW1iZXI=");
		sbx_fs_write(T.m, id, files[i], t_done_cb, &d[i]);
	}
	for (int i = 0; i < N; i++) {
		t_wait_done(&d[i]);
		ok += d[i].ok;
		t_done_reset(&d[i]);
		json_decref(files[i]);
	}
	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof(path), "f%d.txt", i);
		sbx_fs_read(T.m, id, path, t_done_cb, &d[i]);
	}
	snprintf(want, sizeof(want), "file-number");
	for (int i = 0; i < N; i++) {
		t_wait_done(&d[i]);
		ok += d[i].ok;
		t_done_reset(&d[i]);
	}
	t_check("forty_requests_at_once", ok == 2 * N, "%u of %d answered well", ok, 2 * N);
}

void t_executions(void)
{
	char err[512];
	const char *id = t_create("{}", NULL, err, sizeof(err));
	char keep[STORE_ID_LEN];

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("exec_sandbox_up", false, "%s", err);
		return;
	}
	snprintf(keep, sizeof(keep), "%s", id);
	output_and_codes(keep);
	one_at_a_time_and_cancel(keep);
	many_at_once(keep);
	t_destroy(keep);
	destroy_while_running();
}
