// SPDX-License-Identifier: MIT
/*
 * Sandboxes: one husk-vmm each, on a copy-on-write layer over its runtime.
 * Create answers at once with "creating"; a task waits for the guest agent,
 * sets the sandbox up (workspace, env, files) and then the sandbox is idle
 * (or running its command). Every status change goes through the store,
 * which records its event, and wakes the long-polls waiting on it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_client.h"
#include "huskd.h"
#include "img.h"
#include "sbx_priv.h"
#include "vmm_proc.h"

struct sandbox *sbx_find(struct huskd *d, const char *id)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (!strcmp(sb->id, id))
			return sb;
	return NULL;
}

const char *sbx_id(const struct sandbox *sb)
{
	return sb->id;
}

struct execution *sbx_current(const struct sandbox *sb)
{
	return sb->current;
}

void sbx_set_current(struct sandbox *sb, struct execution *e)
{
	sb->current = e;
}

int sbx_transition(struct huskd *d, const char *id, const char *status, const char *reason,
                   json_t *patch)
{
	struct store_transition t = {.status = status, .patch = patch};
	struct sandbox *sb = sbx_find(d, id);
	int rc;

	if (reason)
		t.event = json_pack("{ss}", "reason", reason);
	rc = store_sandbox_transition(d->store, id, &t, NULL);
	json_decref(t.event);
	if (rc)
		huskd_log(id, "cannot record status %s: %s", status, strerror(-rc));
	else if (sb)
		snprintf(sb->status, sizeof(sb->status), "%s", status);
	if (sb && !rc && !strcmp(status, "idle"))
		sbx_idle_arm(sb);
	wait_kick(d, id);
	return rc;
}

static void idle_fired(uv_timer_t *t)
{
	struct sandbox *sb = t->data;
	char why[96];

	if (sb->current || sb->ending || strcmp(sb->status, "idle"))
		return;
	if (sb->d->idle_pause) {
		int rc = sbx_pause_idle(sb);

		huskd_log(sb->id, "idle for %llu s: %s%s", (unsigned long long)(sb->idle_ms / 1000),
		          rc ? "cannot pause it, terminating: " : "pausing it (--on-idle pause)",
		          rc ? strerror(-rc) : "");
		if (!rc)
			return;
	}
	snprintf(why, sizeof(why), "idle for %llu s: reaped (timeout.idle)",
	         (unsigned long long)(sb->idle_ms / 1000));
	huskd_log(sb->id, "%s", why);
	sbx_end(sb, "terminated", why, NULL);
}

void sbx_timer_start(struct sandbox *sb, uv_timer_cb fn, uint64_t ms)
{
	if (sb->ending)
		return;
	if (!sb->idle) {
		sb->idle = malloc(sizeof(*sb->idle));
		if (!sb->idle)
			return;
		uv_timer_init(sb->d->loop, sb->idle);
		sb->idle->data = sb;
	}
	uv_timer_start(sb->idle, fn, ms, 0);
}

void sbx_timer_stop(struct sandbox *sb)
{
	if (sb->idle)
		uv_timer_stop(sb->idle);
}

void sbx_idle_arm(struct sandbox *sb)
{
	if (sb->idle_ms)
		sbx_timer_start(sb, idle_fired, sb->idle_ms);
}

static void idle_closed(uv_handle_t *h)
{
	free(h);
}

void sbx_free(struct sandbox *sb)
{
	if (sb->idle) {
		uv_timer_stop(sb->idle);
		uv_close((uv_handle_t *)sb->idle, idle_closed);
		sb->idle = NULL;
	}
	struct huskd *d = sb->d;
	struct sandbox **pp = &d->sandboxes;

	while (*pp && *pp != sb)
		pp = &(*pp)->next;
	if (*pp)
		*pp = sb->next;
	vmm_proc_release(sb->vmm);
	if (d->cgroups) {
		char cg[4096];
		snprintf(cg, sizeof(cg), "%s/%s", d->cgroup_root, sb->id);
		rmdir(cg);
	}
	json_decref(sb->env);
	json_decref(sb->files);
	free(sb->dir);
	free(sb->vsock);
	free(sb->layer);
	free(sb->cgroup);
	free(sb->base);
	free(sb);
	/* It may have been the last user of a deleted snapshot. */
	snap_gc(d);
}

/* Removes the sandbox's folder: its layers, sockets, snapshot and console log. */
void sbx_remove_dir(const char *dir)
{
	static const char *const files[] = {"layer.qcow2",    "vsock.sock", "control.sock",
	                                    "console.log",    "vmm.log",    "memory.snap",
	                                    "memory.snap.tmp"};
	char path[4096];

	DIR *dp;
	struct dirent *e;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	/* Checkpoints' frozen layers (sbx_ckpt.c), and what a crashed writer left. */
	dp = opendir(dir);
	while (dp && (e = readdir(dp))) {
		if (strncmp(e->d_name, "ckpt_", 5) && !strstr(e->d_name, ".tmp"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
}

/* The last line husk-vmm wrote, as ": line", or "" (for the reason of a failure). */
static void vmm_last_words(const char *dir, char *out, size_t outlen)
{
	char path[4096], buf[1024];
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/vmm.log", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = pread(fd, buf, sizeof(buf) - 1,
	          lseek(fd, 0, SEEK_END) > (off_t)sizeof(buf) - 1
	                  ? lseek(fd, 0, SEEK_END) - (off_t)sizeof(buf) + 1
	                  : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* A usage error ends with a pointer to --help: the line before says what was wrong. */
	for (int drop = 0; drop < 2; drop++) {
		char *nl;
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		nl = strrchr(buf, '\n');
		if (!strstr(nl ? nl : buf, "Try 'husk-vmm --help'"))
			break;
		if (!nl)
			return;
		*nl = '\0';
		n = nl - buf;
	}
	snprintf(out, outlen, ": %.150s", strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf);
}

/* The VMM ended. Expected after destroy or a oneshot's end; otherwise the sandbox failed. */
static void on_vmm_exit(struct vmm_proc *p, int status, void *arg)
{
	struct sandbox *sb = arg;
	struct huskd *d = sb->d;
	char reason[256];

	sb->vmm_gone = true;
	/* Quit after its snapshot: the sandbox lives on in the file (sbx_pause.c). */
	if ((sb->pausing || sb->on_disk) && !sb->ending && status == 0) {
		vmm_proc_release(p);
		sb->vmm = NULL;
		return;
	}
	if (!sb->ending) {
		char last[160];

		sb->ending = true;
		vmm_last_words(sb->dir, last, sizeof(last));
		if (status < 0)
			snprintf(reason, sizeof(reason),
			         "husk-vmm ended (adopted after a restart: its exit status is "
			         "unknown)%s",
			         last);
		else if (status == 3)
			snprintf(reason, sizeof(reason),
			         "the guest crashed (husk-vmm exit status 3)%s", last);
		else
			snprintf(reason, sizeof(reason),
			         "husk-vmm exited unexpectedly (status %d)%s", status, last);
		huskd_log(sb->id, "%s", reason);
		if (sb->current)
			exec_cancel(sb->current, reason);
		sbx_transition(d, sb->id, "failed", reason, NULL);
		sbx_ready_fail(sb);
	}
	if (sb->current || sb->pausing || sb->resuming)
		return; /* the execution's or the task's end frees the sandbox (sbx_maybe_free) */
	sbx_remove_dir(sb->dir);
	sbx_free(sb);
}

void sbx_maybe_free(struct sandbox *sb)
{
	if (sb->held)
		return;
	if (sb->vmm_gone && !sb->current && !sb->setup_running && !sb->pausing && !sb->resuming) {
		sbx_remove_dir(sb->dir);
		sbx_free(sb);
	}
}

void sbx_end(struct sandbox *sb, const char *status, const char *reason, json_t *patch)
{
	if (sb->ending)
		return;
	sb->ending = true;
	sbx_transition(sb->d, sb->id, status, reason, patch);
	if (sb->current)
		exec_cancel(sb->current, reason ? reason : "the sandbox was stopped");
	sbx_ready_fail(sb);
	/* The layer is thrown away: no need for the guest to shut down cleanly. */
	if (sb->vmm && !sb->vmm_gone)
		vmm_proc_kill(sb->vmm, SIGKILL);
	else
		sbx_maybe_free(sb);
}

int sbx_destroy(struct huskd *d, const char *id, char *err, size_t errlen)
{
	struct sandbox *sb = sbx_find(d, id);
	json_t *info = NULL;
	int rc;

	if (sb) {
		sbx_end(sb, "deleted", "destroyed by request", NULL);
		return 0;
	}
	rc = store_sandbox_get(d->store, id, &info, NULL);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "sandbox %s not found", id);
		return 404;
	}
	if (!rc && strcmp(json_string_value(json_object_get(info, "status")), "deleted"))
		rc = store_sandbox_set_status(d->store, id, "deleted", "destroyed by request");
	json_decref(info);
	wait_kick(d, id);
	if (rc && rc != -EINVAL) {
		snprintf(err, errlen, "cannot destroy %s: %s", id, strerror(-rc));
		return 500;
	}
	return 0;
}

struct sandbox *sbx_new(struct huskd *d, const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->d = d;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->status, sizeof(sb->status), "creating");
	if (asprintf(&sb->dir, "%s/sandboxes/%s", d->state, id) < 0 ||
	    asprintf(&sb->vsock, "%s/vsock.sock", sb->dir) < 0) {
		free(sb->dir);
		free(sb);
		return NULL;
	}
	sb->env = json_object();
	sb->next = d->sandboxes;
	d->sandboxes = sb;
	return sb;
}

int sbx_start_vmm(struct sandbox *sb, const struct vmm_spec *spec, char *err, size_t errlen)
{
	int rc = vmm_proc_spawn(sb->d->loop, spec, on_vmm_exit, sb, &sb->vmm, err, errlen);
	json_t *priv;

	if (rc)
		return rc;
	priv = json_pack("{sIsI}", "pid", (json_int_t)vmm_proc_pid(sb->vmm), "starttime",
	                 (json_int_t)vmm_proc_starttime(sb->vmm));
	rc = store_sandbox_update(sb->d->store, sb->id, NULL, priv, NULL);
	json_decref(priv);
	return rc;
}

/* One sandbox from before the restart: its VMM, if it still runs, is ours again. */
static void adopt_one(struct huskd *d, json_t *row)
{
	const char *id = json_string_value(json_object_get(row, "sandboxId"));
	const char *status = json_string_value(json_object_get(row, "status"));
	json_t *priv = json_object_get(row, "private");
	pid_t pid = (pid_t)json_integer_value(json_object_get(priv, "pid"));
	uint64_t start = (uint64_t)json_integer_value(json_object_get(priv, "starttime"));
	struct sandbox *sb;
	int n = 0;

	if (!id || !status)
		return;
	sb = sbx_new(d, id);
	if (!sb)
		return;
	snprintf(sb->status, sizeof(sb->status), "%s", status);
	sb->oneshot = json_is_true(json_object_get(priv, "oneshot"));
	sb->exec_timeout_ms = (uint64_t)json_integer_value(json_object_get(priv, "execTimeoutMs"));
	sb->idle_ms = (uint64_t)json_integer_value(json_object_get(priv, "idleMs"));
	sb->paused_ms = (uint64_t)json_integer_value(json_object_get(priv, "pausedMs"));
	sb->mem_mib = (uint64_t)json_integer_value(json_object_get(priv, "memMib"));
	sb->vcpus = (unsigned)json_integer_value(json_object_get(priv, "vcpus"));
	sb->cpu_millis = json_integer_value(json_object_get(priv, "cpuMillis"));
	if (sb->cpu_millis <= 0)
		sb->cpu_millis = (int64_t)sb->vcpus * 1000;
	sb->on_disk = json_is_true(json_object_get(priv, "onDisk"));
	if (json_is_string(json_object_get(priv, "layer")))
		sb->layer = strdup(json_string_value(json_object_get(priv, "layer")));
	if (json_is_string(json_object_get(priv, "base")))
		sb->base = strdup(json_string_value(json_object_get(priv, "base")));
	snprintf(sb->base_snap, sizeof(sb->base_snap), "%s",
	         json_string_value(json_object_get(priv, "baseSnapshot"))
	                 ? json_string_value(json_object_get(priv, "baseSnapshot"))
	                 : "");
	if (d->cgroups && asprintf(&sb->cgroup, "%s/%s", d->cgroup_root, id) < 0)
		sb->cgroup = NULL;
	json_decref(sb->env);
	sb->env = json_deep_copy(json_object_get(priv, "env"));
	if (!sb->env)
		sb->env = json_object();
	if (store_abandon_unfinished(d->store, id, "huskd restarted while it ran", &n) == 0 && n)
		huskd_log(id, "%d unfinished command(s) marked failed: huskd restarted", n);
	if (sb->on_disk && !strcmp(status, "paused")) {
		/* Paused to its snapshot file: no VMM to adopt; the next request resumes it. */
		sb->vmm_gone = true;
		huskd_log(id, "paused on disk; resumes when asked for");
		return;
	}
	if (vmm_proc_adopt(d->loop, pid, start, on_vmm_exit, sb, &sb->vmm) == 0 &&
	    strcmp(status, "creating")) {
		/* A paused VMM stays paused; the first request resumes it. */
		sb->ready = strcmp(status, "paused") != 0;
		huskd_log(id, "adopted its running VMM (pid %d)", (int)pid);
		/* A restart during its start-up left the quota lifted. */
		sbx_cpu_limit(sb, true);
		if (!strcmp(status, "idle"))
			sbx_idle_arm(sb);
		if (!strcmp(status, "running"))
			sbx_transition(d, id, sb->oneshot ? "terminated" : "idle",
			               "huskd restarted: the running command was lost", NULL);
		if (sb->oneshot)
			sbx_end(sb, "terminated", "huskd restarted during a one-shot command",
			        NULL);
		return;
	}
	if (sb->vmm)
		vmm_proc_kill(sb->vmm, SIGKILL);
	huskd_log(id, "its VMM is gone after a huskd restart; marking it failed");
	sb->ending = true;
	sbx_transition(d, id, "failed",
	               "huskd restarted and the sandbox's VMM was no longer running", NULL);
	if (!sb->vmm) {
		sb->vmm_gone = true;
		sbx_maybe_free(sb);
	}
}

void sbx_adopt_all(struct huskd *d)
{
	json_t *rows = NULL, *row;
	size_t i;

	if (store_sandboxes_live(d->store, &rows))
		return;
	json_array_foreach(rows, i, row)
	{
		adopt_one(d, row);
	}
	json_decref(rows);
	snap_gc(d);
}

void sbx_forget(struct sandbox *sb)
{
	struct ready_cb *w = sb->waiting;

	while (w) {
		struct ready_cb *next = w->next;
		free(w);
		w = next;
	}
	sb->waiting = NULL;
	sbx_free(sb);
}
