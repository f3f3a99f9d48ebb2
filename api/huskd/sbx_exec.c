// SPDX-License-Identifier: MIT
/*
 * Executions: one command at a time per sandbox. The agent client runs on
 * a task thread and writes the command's output into two pipes; the loop
 * reads them into the execution's output streams, which HTTP readers
 * follow. The execution ends when the agent's result and both pipes' ends
 * have arrived, in whatever order.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_client.h"
#include "huskd.h"
#include "outbuf.h"
#include "sbx_priv.h"

#define GRACE_MS 2000

struct execution {
	struct huskd *d;
	struct sandbox *sb;
	char id[STORE_ID_LEN];
	char vsock[4096];
	json_t *req, *files, *result;
	struct outbuf *out[2];
	int wfd[2];
	uv_pipe_t pipe[2];
	int open_pipes;
	pthread_mutex_t lock;
	struct agent_client *client; /* while the task talks to the agent (lock) */
	bool cancelled, task_done;
	int rc;
	char error[256];
	struct execution *next; /* huskd's live executions, for stream lookups */
};

static struct execution *live;

static json_t *exec_patch_result(struct execution *e, const char **status)
{
	json_t *patch = json_object(), *r = e->result;
	json_int_t code = 1;

	if (e->rc || !r) {
		*status = e->cancelled ? "cancelled" : "failed";
		json_object_set_new(
			patch, "error",
			json_string(e->error[0] ? e->error : "the sandbox's agent went away"));
		code = e->cancelled ? 137 : 1;
	} else {
		code = json_integer_value(json_object_get(r, "exit_code"));
		if (json_is_true(json_object_get(r, "timed_out"))) {
			*status = "timeout";
			json_object_set_new(patch, "error",
			                    json_string("the command ran past its timeout"));
		} else if (json_is_true(json_object_get(r, "cancelled")) || e->cancelled) {
			*status = "cancelled";
			json_object_set_new(patch, "error",
			                    json_string(e->error[0] ? e->error : "cancelled"));
		} else {
			*status = code == 0 ? "completed" : "failed";
		}
		if (json_object_get(r, "duration_ms"))
			json_object_set(patch, "durationMs", json_object_get(r, "duration_ms"));
	}
	json_object_set_new(patch, "exitCode", json_integer(code));
	if ((e->out[0] && outbuf_truncated(e->out[0])) ||
	    (e->out[1] && outbuf_truncated(e->out[1])))
		json_object_set_new(patch, "outputTruncated", json_true());
	return patch;
}

static void exec_finish(struct execution *e)
{
	struct sandbox *sb = e->sb;
	struct huskd *d = e->d;
	const char *status;
	json_t *patch = exec_patch_result(e, &status), *sbpatch;
	struct execution **pp;

	for (int i = 0; i < 2; i++)
		outbuf_release(e->out[i]);
	if (store_execution_update(d->store, e->id, status, patch, NULL, NULL))
		huskd_log(sb->id, "cannot record the end of %s", e->id);
	sbpatch = json_pack("{sO}", "exitCode", json_object_get(patch, "exitCode"));
	sbx_set_current(sb, NULL);
	if (!sb->ending) {
		if (sb->oneshot)
			sbx_end(sb, "terminated", "its command ended", sbpatch);
		else
			sbx_transition(d, sb->id, "idle", NULL, NULL);
	} else {
		sbx_maybe_free(sb);
	}
	json_decref(sbpatch);
	wait_kick(d, e->id);
	for (pp = &live; *pp && *pp != e; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = e->next;
	json_decref(patch);
	json_decref(e->req);
	json_decref(e->files);
	json_decref(e->result);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static void maybe_finish(struct execution *e)
{
	if (e->task_done && !e->open_pipes)
		exec_finish(e);
}

static void pipe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	buf->base = malloc(65536);
	buf->len = buf->base ? 65536 : 0;
}

static void pipe_closed(uv_handle_t *h)
{
	struct execution *e = h->data;

	e->open_pipes--;
	maybe_finish(e);
}

static void pipe_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct execution *e = s->data;
	int which = (uv_pipe_t *)s == &e->pipe[1];

	if (n > 0 && e->out[which])
		outbuf_append(e->out[which], buf->base, (size_t)n);
	free(buf->base);
	if (n < 0)
		uv_close((uv_handle_t *)s, pipe_closed);
}

static void exec_work(void *arg)
{
	struct execution *e = arg;
	struct agent_client *c = NULL;
	int rc = agent_client_connect_vsock(e->vsock, AGENT_VSOCK_PORT, &c);

	if (!rc && json_array_size(e->files))
		rc = sbx_write_files(c, e->files, e->error, sizeof(e->error));
	if (!rc) {
		pthread_mutex_lock(&e->lock);
		e->client = c;
		if (e->cancelled)
			agent_client_cancel(c);
		pthread_mutex_unlock(&e->lock);
		rc = agent_exec(c, e->req, -1, e->wfd[0], e->wfd[1], &e->result);
		pthread_mutex_lock(&e->lock);
		e->client = NULL;
		pthread_mutex_unlock(&e->lock);
	} else if (!e->error[0]) {
		snprintf(e->error, sizeof(e->error), "cannot reach the sandbox's agent: %s",
		         strerror(-rc));
	}
	if (rc > 0) {
		snprintf(e->error, sizeof(e->error), "the agent refused the command: %s",
		         json_string_value(json_object_get(e->result, "message")));
		json_decref(e->result);
		e->result = NULL;
	}
	e->rc = rc;
	agent_client_close(c);
	/* The pipes' ends tell the loop all output is in. */
	close(e->wfd[0]);
	close(e->wfd[1]);
}

static void exec_task_done(void *arg)
{
	struct execution *e = arg;

	e->task_done = true;
	maybe_finish(e);
}

/* The sandbox is ready (or never will be): run the command. */
static void exec_begin(struct sandbox *sb, bool ready, void *arg)
{
	struct execution *e = arg;
	int fds[2][2] = {{-1, -1}, {-1, -1}};

	if (!ready) {
		snprintf(e->error, sizeof(e->error),
		         "the sandbox stopped before the command started");
		e->cancelled = true;
		e->task_done = true;
		maybe_finish(e);
		return;
	}
	if (pipe2(fds[0], O_CLOEXEC) || pipe2(fds[1], O_CLOEXEC))
		goto fail;
	for (int i = 0; i < 2; i++) {
		if (uv_pipe_init(e->d->loop, &e->pipe[i], 0) ||
		    uv_pipe_open(&e->pipe[i], fds[i][0]))
			goto fail;
		e->pipe[i].data = e;
		e->open_pipes++;
		fds[i][0] = -1;
		uv_read_start((uv_stream_t *)&e->pipe[i], pipe_alloc, pipe_read);
		e->wfd[i] = fds[i][1];
	}
	sbx_transition(e->d, sb->id, "running", NULL, NULL);
	if (store_execution_update(e->d->store, e->id, "running", NULL, NULL, NULL))
		huskd_log(sb->id, "cannot record %s as running", e->id);
	wait_kick(e->d, e->id);
	if (task_run(e->d->tasks, exec_work, exec_task_done, e) == 0)
		return;
	close(e->wfd[0]);
	close(e->wfd[1]);
	snprintf(e->error, sizeof(e->error), "cannot start a thread for the command");
	e->task_done = true;
	return; /* the pipes' ends finish it */
fail:
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			if (fds[i][j] >= 0)
				close(fds[i][j]);
	snprintf(e->error, sizeof(e->error), "out of file descriptors");
	e->task_done = true;
	for (int i = 0; i < 2; i++)
		if (e->open_pipes > i)
			uv_close((uv_handle_t *)&e->pipe[i], pipe_closed);
	maybe_finish(e);
}

void exec_cancel(struct execution *e, const char *why)
{
	pthread_mutex_lock(&e->lock);
	if (!e->cancelled) {
		e->cancelled = true;
		snprintf(e->error, sizeof(e->error), "%s", why);
		if (e->client)
			agent_client_cancel(e->client);
	}
	pthread_mutex_unlock(&e->lock);
}

/* An output stream of e unless the request says "ignore"; its URL goes in info. */
static int exec_stream(struct execution *e, int which, json_t *stream, const char *base,
                       json_t *info, json_t *priv)
{
	static const char *const names[] = {"stdout", "stderr"};
	const char *want = json_string_value(json_object_get(stream, names[which]));
	char sid[STORE_ID_LEN], key[32];
	int rc;

	if (want && !strcmp(want, "ignore"))
		return 0;
	rc = store_new_id("str_", sid);
	if (!rc)
		rc = outbuf_create(e->d->streams, sid, e->d->output_limit, &e->out[which]);
	if (rc)
		return rc;
	snprintf(key, sizeof(key), "%sStreamUrl", names[which]);
	json_object_set_new(info, key, json_sprintf("%s/streams/%s", base, sid));
	snprintf(key, sizeof(key), "%sStream", names[which]);
	json_object_set_new(priv, key, json_string(sid));
	return 0;
}

int exec_start(struct huskd *d, struct sandbox *sb, json_t *argv, json_t *files,
               uint64_t timeout_ms, json_t *stream, const char *base, json_t **exec, char *err,
               size_t errlen)
{
	struct execution *e;
	json_t *info, *priv, *v;
	size_t i;
	int rc;

	if (!json_is_array(argv) || !json_array_size(argv)) {
		snprintf(err, errlen, "command must be a non-empty array of strings");
		return 400;
	}
	json_array_foreach(argv, i, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen, "command[%zu] must be a string", i);
			return 400;
		}
	}
	if (files && !json_is_array(files)) {
		snprintf(err, errlen, "files must be an array of {path, content}");
		return 400;
	}
	if (sbx_current(sb)) {
		snprintf(err, errlen,
		         "sandbox %s is already running a command; wait for its result", sb->id);
		return 409;
	}
	e = calloc(1, sizeof(*e));
	if (!e || store_new_id("exec_", e->id)) {
		free(e);
		snprintf(err, errlen, "out of memory");
		return 500;
	}
	pthread_mutex_init(&e->lock, NULL);
	e->d = d;
	e->sb = sb;
	e->wfd[0] = e->wfd[1] = -1;
	snprintf(e->vsock, sizeof(e->vsock), "%s", sb->vsock);
	if (!timeout_ms)
		timeout_ms = sb->exec_timeout_ms;
	e->req = json_pack("{sssOsssOsbsIsI}", "op", "exec", "argv", argv, "cwd", WORKSPACE, "env",
	                   sb->env, "stdin", 0, "timeout_ms", (json_int_t)timeout_ms, "grace_ms",
	                   (json_int_t)GRACE_MS);
	e->files = files ? json_incref(files) : NULL;
	info = json_pack("{sssssssO}", "executionId", e->id, "sandboxId", sb->id, "type", "exec",
	                 "command", argv);
	priv = json_object();
	rc = exec_stream(e, 0, stream, base, info, priv);
	if (!rc)
		rc = exec_stream(e, 1, stream, base, info, priv);
	if (!rc)
		rc = store_execution_insert(d->store, info, priv);
	json_decref(priv);
	if (rc) {
		for (int k = 0; k < 2; k++)
			outbuf_release(e->out[k]);
		json_decref(info);
		json_decref(e->req);
		json_decref(e->files);
		free(e);
		snprintf(err, errlen, "cannot record the command: %s", strerror(-rc));
		return 500;
	}
	json_object_set_new(info, "status", json_string("queued"));
	sbx_set_current(sb, e);
	e->next = live;
	live = e;
	*exec = info;
	sbx_when_ready(sb, exec_begin, e);
	return 0;
}

void exec_serve_stream(struct huskd *d, struct http_req *r, const char *sid)
{
	for (struct execution *e = live; e; e = e->next)
		for (int i = 0; i < 2; i++)
			if (e->out[i] && !strcmp(outbuf_id(e->out[i]), sid)) {
				outbuf_serve(e->out[i], r);
				return;
			}
	if (outbuf_serve_file(d->streams, sid, r))
		http_respond(r, 404, "text/plain", "no such stream\n", 15);
}
