// SPDX-License-Identifier: MIT
/*
 * A new (or rebooted, or resumed-from-snapshot) sandbox's setup, on a task
 * thread: wait for its agent, make the workspace, set the env, write the
 * create request's files; then it is ready and whoever waited runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "huskd.h"
#include "sbx_priv.h"
#include "util.h"
#include "vmm_proc.h"

/* Under nested emulation a guest takes seconds to boot; natively well under one. */
#define READY_TIMEOUT_MS 180000

struct setup {
	struct sandbox *sb;
	char vsock[4096];
	json_t *env, *files;
	bool restored; /* started from a snapshot's memory */
	int rc;
	char err[256];
};

int sbx_write_files(struct agent_client *c, json_t *files, char *err, size_t errlen)
{
	size_t i;
	json_t *f, *out = NULL;

	json_array_foreach(files, i, f)
	{
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *b64 = json_string_value(json_object_get(f, "content"));
		size_t len = 0;
		unsigned char *data = b64 ? base64_decode(b64, &len) : NULL;
		char full[4096];
		int fd, rc;

		if (!path || !data) {
			free(data);
			snprintf(err, errlen, "files[%zu] needs a path and base64 content", i);
			return -EINVAL;
		}
		workspace_path(WORKSPACE, path, full, sizeof(full));
		fd = memfd_create("husk-file", MFD_CLOEXEC);
		rc = fd < 0 || write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0
		             ? -errno
		             : agent_put(c, full, fd, -1, &out);
		free(data);
		if (fd >= 0)
			close(fd);
		json_decref(out);
		out = NULL;
		if (rc) {
			snprintf(err, errlen, "cannot write %s: %s", full,
			         rc > 0 ? "refused by the sandbox" : strerror(-rc));
			return rc > 0 ? -EIO : rc;
		}
	}
	return 0;
}

/* On its own thread: waits for the agent, then prepares the sandbox. */
static void setup_work(void *arg)
{
	struct setup *s = arg;
	struct agent_client *c = NULL;
	struct timespec tick = {0, 20 * 1000 * 1000};
	json_t *req, *out = NULL;
	int rc = -ETIMEDOUT;

	for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 20) {
		rc = agent_client_connect_vsock(s->vsock, AGENT_VSOCK_PORT, &c);
		/*
		 * A guest resumed from a snapshot resets the connections it had
		 * as it wakes, maybe this one: it counts once it answers, and the
		 * clock and random state are set on it.
		 */
		if (!rc && s->restored && (rc = agent_resumed(c)) < 0) {
			agent_client_close(c);
			c = NULL;
		}
		/* rc > 0: an agent older than the "resumed" op answered; it is up. */
		if (rc > 0) {
			huskd_log(s->sb->id, "its agent cannot set the clock (an old agent)");
			rc = 0;
		}
		if (!rc)
			break;
		nanosleep(&tick, NULL);
	}
	if (rc) {
		s->rc = rc;
		snprintf(s->err, sizeof(s->err), "the sandbox's agent did not answer within %d s",
		         READY_TIMEOUT_MS / 1000);
		return;
	}
	req = json_pack("{sssssb}", "op", "file.mkdir", "path", WORKSPACE, "parents", 1);
	rc = agent_call(c, req, &out);
	json_decref(req);
	json_decref(out);
	out = NULL;
	if (!rc && json_object_size(s->env)) {
		req = json_pack("{sssO}", "op", "env.set", "vars", s->env);
		rc = agent_call(c, req, &out);
		json_decref(req);
		json_decref(out);
	}
	if (rc) {
		snprintf(s->err, sizeof(s->err), "cannot prepare the sandbox (workspace, env): %s",
		         rc > 0 ? "refused by the agent" : strerror(-rc));
		s->rc = rc > 0 ? -EIO : rc;
	} else if (s->files) {
		s->rc = sbx_write_files(c, s->files, s->err, sizeof(s->err));
	}
	agent_client_close(c);
}

void sbx_ready_fail(struct sandbox *sb)
{
	struct ready_cb *w = sb->waiting;

	sb->waiting = NULL;
	while (w) {
		struct ready_cb *next = w->next;
		w->fn(sb, false, w->arg);
		free(w);
		w = next;
	}
}

static void setup_done(void *arg)
{
	struct setup *s = arg;
	struct sandbox *sb = s->sb;

	sb->setup_running = false;
	json_decref(s->env);
	json_decref(s->files);
	if (sb->ending) {
		free(s);
		sbx_maybe_free(sb);
		return;
	}
	if (s->rc) {
		huskd_log(sb->id, "setup failed: %s", s->err);
		sbx_end(sb, "failed", s->err, NULL);
		free(s);
		return;
	}
	free(s);
	sb->ready = true;
	sbx_cpu_limit(sb, true);
	/*
	 * A oneshot's command starts from the waiting list and sets "running"
	 * itself: it must never look idle before its command ran (API.md §7.1).
	 */
	if (!sb->oneshot || !sb->current)
		sbx_transition(sb->d, sb->id, "idle", NULL, NULL);
	sbx_ready_run(sb);
}

void sbx_ready_run(struct sandbox *sb)
{
	struct ready_cb *w = sb->waiting;

	sb->waiting = NULL;
	while (w) {
		struct ready_cb *next = w->next;
		w->fn(sb, true, w->arg);
		free(w);
		w = next;
	}
}

void sbx_when_ready(struct sandbox *sb, void (*fn)(struct sandbox *sb, bool ready, void *arg),
                    void *arg)
{
	struct ready_cb *w, **pp;

	if (sb->ready || sb->ending) {
		fn(sb, sb->ready && !sb->ending, arg);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		fn(sb, false, arg);
		return;
	}
	w->fn = fn;
	w->arg = arg;
	for (pp = &sb->waiting; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	if (!strcmp(sb->status, "paused"))
		sbx_wake(sb);
}

int sbx_setup_start(struct sandbox *sb, json_t *files, bool restored)
{
	struct setup *s = calloc(1, sizeof(*s));

	if (!s) {
		json_decref(files);
		return -ENOMEM;
	}
	s->sb = sb;
	snprintf(s->vsock, sizeof(s->vsock), "%s", sb->vsock);
	s->env = json_incref(sb->env);
	s->files = files;
	s->restored = restored;
	if (task_run(sb->d->tasks, setup_work, setup_done, s)) {
		json_decref(s->env);
		json_decref(s->files);
		free(s);
		return -ENOMEM;
	}
	sb->setup_running = true;
	return 0;
}

int sbx_boot(struct sandbox *sb, char *err, size_t errlen)
{
	struct vmm_spec spec;

	if (sb->cgroup)
		mkdir(sb->cgroup, 0755);
	sbx_cpu_limit(sb, false);
	sbx_vmm_spec(sb, NULL, &spec);
	if (sbx_start_vmm(sb, &spec, err, errlen))
		return -EIO;
	sb->vmm_gone = false;
	if (sbx_setup_start(sb, NULL, false)) {
		snprintf(err, errlen, "cannot start the sandbox's setup");
		return -ENOMEM;
	}
	return 0;
}
