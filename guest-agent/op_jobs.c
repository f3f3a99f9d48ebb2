// SPDX-License-Identifier: MIT
/*
 * Background jobs: processes that outlive the request that started them.
 * Their output is captured in a bounded ring per stream; job.output reads
 * it, and with "follow" goes on sending it as it comes until the stream's
 * pipe closes. stop sends SIGTERM (or SIGKILL at once) to the job's process
 * group and answers once it ends.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "evloop.h"
#include "exec_opts.h"
#include "jobs.h"
#include "proc.h"

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ring_append(struct ring *r, const uint8_t *p, size_t n)
{
	if (!r->buf && !(r->buf = malloc(JOB_OUTPUT_MAX)))
		return;
	for (size_t i = 0; i < n; i++) {
		r->buf[(r->start + r->len) % JOB_OUTPUT_MAX] = p[i];
		if (r->len < JOB_OUTPUT_MAX)
			r->len++;
		else
			r->start++;
	}
}

bool job_running(const struct job *j)
{
	return j->ch && !j->ch->exited;
}

static json_t *job_json(const struct job *j)
{
	json_t *o = json_pack("{s:s, s:O, s:b, s:I, s:I, s:I}", "id", j->id, "argv", j->argv,
	                      "running", job_running(j), "started_at", (json_int_t)j->started_at,
	                      "stdout_bytes", (json_int_t)(j->out.start + j->out.len),
	                      "stderr_bytes", (json_int_t)(j->err.start + j->err.len));

	if (!o)
		return NULL;
	json_object_set_new(o, "pid", j->ch ? json_integer(j->ch->pid) : json_null());
	if (j->ch && j->ch->exited) {
		int st = j->ch->status;

		json_object_set_new(
			o, "exit_code",
			json_integer(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)));
		json_object_set_new(o, "signal",
		                    WIFSIGNALED(st) ? json_integer(WTERMSIG(st)) : json_null());
		json_object_set_new(o, "ended_at", json_integer((json_int_t)j->ended_at));
	} else {
		json_object_set_new(o, "exit_code", json_null());
		json_object_set_new(o, "signal", json_null());
		json_object_set_new(o, "ended_at", json_null());
	}
	return o;
}

static void job_close_fd(struct job *j, int *fd)
{
	if (*fd < 0)
		return;
	evloop_del(j->a->loop, *fd);
	close(*fd);
	*fd = -1;
}

/* Captures one chunk; returns whether there may be more right now. */
static bool job_read(struct job *j, int *fd, struct ring *r)
{
	uint8_t buf[JOB_CHUNK];
	ssize_t n;

	if (*fd < 0)
		return false;
	n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n <= 0) {
		job_close_fd(j, fd);
		job_follow_pump_all(j, r); /* the end, for those that have it all */
		return false;
	}
	ring_append(r, buf, (size_t)n);
	job_follow_pump_all(j, r);
	return true;
}

static void job_out_event(void *ctx, uint32_t ev)
{
	struct job *j = ctx;

	(void)ev;
	job_read(j, &j->ch->out_fd, &j->out);
}

static void job_err_event(void *ctx, uint32_t ev)
{
	struct job *j = ctx;

	(void)ev;
	job_read(j, &j->ch->err_fd, &j->err);
}

static void answer_waiters(struct job *j)
{
	while (j->waiters) {
		struct stop_wait *w = j->waiters;

		j->waiters = w->next;
		req_unregister(&w->r);
		conn_send_json(w->r.conn, FRAME_RESULT, w->r.id, job_json(j));
		free(w);
	}
}

static void job_exited(struct child *ch)
{
	struct job *j = ch->owner;

	j->ended_at = wall_ms();
	/* Whatever is buffered in the pipes belongs to the output; what the
	 * job's own children write later keeps arriving through the loop. */
	while (job_read(j, &j->ch->out_fd, &j->out))
		;
	while (job_read(j, &j->ch->err_fd, &j->err))
		;
	job_close_fd(j, &j->timer_fd);
	answer_waiters(j);
}

static void job_timer_event(void *ctx, uint32_t ev)
{
	struct job *j = ctx;
	uint64_t v;

	(void)ev;
	if (read(j->timer_fd, &v, sizeof(v)) > 0 && job_running(j))
		proc_signal_group(j->ch, SIGKILL);
}

static void job_free(struct job *j)
{
	answer_waiters(j);
	while (j->follows)
		job_follow_end(j->follows);
	job_close_fd(j, &j->timer_fd);
	if (j->ch) {
		job_close_fd(j, &j->ch->out_fd);
		job_close_fd(j, &j->ch->err_fd);
		j->ch->on_exit = NULL;
		proc_free(j->ch);
	}
	json_decref(j->argv);
	free(j->out.buf);
	free(j->err.buf);
	free(j);
}

/* Keeps the newest finished jobs; the list is newest first. */
static void prune_finished(struct agent *a)
{
	unsigned finished = 0;

	for (struct job **pp = &a->jobs; *pp;) {
		struct job *j = *pp;

		if (!job_running(j) && ++finished > JOB_KEEP_FINISHED) {
			*pp = j->next;
			a->nr_jobs--;
			job_free(j);
			continue;
		}
		pp = &j->next;
	}
}

static struct job *job_find(struct agent *a, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "id"));

	for (struct job *j = a->jobs; id && j; j = j->next)
		if (!strcmp(j->id, id))
			return j;
	return NULL;
}

static void job_start(struct conn *c, uint32_t id, json_t *req)
{
	struct agent *a = conn_agent(c);
	struct exec_opts o;
	const char *why;
	struct job *j;
	unsigned running = 0;
	int ret;

	for (j = a->jobs; j; j = j->next)
		running += job_running(j);
	if (running >= JOB_MAX_RUNNING) {
		conn_send_error(c, id, "busy", "%u jobs are running; stop some first", running);
		return;
	}
	if (exec_opts_parse(a, req, &o, &why)) {
		conn_send_error(c, id, "bad_request", "%s", why);
		return;
	}
	o.spawn.stdin_pipe = false;
	o.spawn.pty = false;
	j = calloc(1, sizeof(*j));
	if (!j) {
		exec_opts_free(&o);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	j->a = a;
	j->timer_fd = -1;
	j->argv = json_incref(json_object_get(req, "argv"));
	ret = proc_spawn(a, &o.spawn, &j->ch);
	if (ret) {
		conn_send_error(c, id, errno_code(-ret), "cannot run '%s': %s", o.argv[0],
		                strerror(-ret));
		exec_opts_free(&o);
		json_decref(j->argv);
		free(j);
		return;
	}
	exec_opts_free(&o);
	snprintf(j->id, sizeof(j->id), "job-%u", ++a->next_job_id);
	j->started_at = wall_ms();
	j->ch->owner = j;
	j->ch->on_exit = job_exited;
	if (evloop_add(a->loop, j->ch->out_fd, EPOLLIN, job_out_event, j) ||
	    evloop_add(a->loop, j->ch->err_fd, EPOLLIN, job_err_event, j)) {
		proc_signal_group(j->ch, SIGKILL);
		job_free(j);
		conn_send_error(c, id, "io_error", "cannot watch the job's output");
		return;
	}
	j->next = a->jobs;
	a->jobs = j;
	a->nr_jobs++;
	prune_finished(a);
	conn_send_json(c, FRAME_RESULT, id, job_json(j));
}

static void job_output(struct conn *c, uint32_t id, struct job *j, json_t *req)
{
	const char *stream = json_string_value(json_object_get(req, "stream"));
	json_t *off = json_object_get(req, "offset"), *max = json_object_get(req, "max");
	struct ring *r = stream && !strcmp(stream, "stderr") ? &j->err : &j->out;
	uint64_t from = json_is_integer(off) && json_integer_value(off) > 0
	                        ? (uint64_t)json_integer_value(off)
	                        : 0;
	uint64_t limit = json_is_integer(max) && json_integer_value(max) > 0
	                         ? (uint64_t)json_integer_value(max)
	                         : JOB_OUTPUT_MAX;
	uint64_t end = r->start + r->len, pos;
	bool truncated = from < r->start;

	if (stream && strcmp(stream, "stdout") && strcmp(stream, "stderr")) {
		conn_send_error(c, id, "bad_request", "stream must be \"stdout\" or \"stderr\"");
		return;
	}
	if (from < r->start)
		from = r->start;
	if (from > end)
		from = end;
	if (end - from > limit)
		end = from + limit;
	if (json_is_true(json_object_get(req, "follow"))) {
		if (job_follow_start(c, id, j, r, from, truncated))
			conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	for (pos = from; pos < end;) {
		uint8_t chunk[JOB_CHUNK];
		size_t n = 0;

		while (n < sizeof(chunk) && pos < end)
			chunk[n++] = r->buf[pos++ % JOB_OUTPUT_MAX];
		conn_send(c, FRAME_DATA, 0, id, chunk, n);
	}
	conn_send_json(c, FRAME_RESULT, id, job_output_result(j, r, from, end, truncated));
}

static void stop_conn_lost(struct req *r)
{
	struct stop_wait *w = (struct stop_wait *)r;

	for (struct stop_wait **pp = &w->job->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	free(w);
}

static const struct req_ops stop_ops = {.on_conn_lost = stop_conn_lost};

static void job_stop(struct conn *c, uint32_t id, struct job *j, json_t *req)
{
	bool force = json_is_true(json_object_get(req, "force"));
	json_t *g = json_object_get(req, "grace_ms");
	uint64_t grace = json_is_integer(g) && json_integer_value(g) >= 0
	                         ? (uint64_t)json_integer_value(g)
	                         : DEFAULT_GRACE_MS;
	struct stop_wait *w;

	if (!job_running(j)) {
		conn_send_json(c, FRAME_RESULT, id, job_json(j));
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	w->job = j;
	w->next = j->waiters;
	j->waiters = w;
	req_register(c, &w->r, id, &stop_ops);
	if (force) {
		proc_signal_group(j->ch, SIGKILL);
		return;
	}
	proc_signal_group(j->ch, SIGTERM);
	if (j->timer_fd < 0) {
		struct itimerspec it = {
			.it_value = {.tv_sec = (time_t)(grace / 1000),
		                     .tv_nsec = (long)(grace % 1000) * 1000000 + 1}};

		j->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (j->timer_fd >= 0 &&
		    !evloop_add(j->a->loop, j->timer_fd, EPOLLIN, job_timer_event, j))
			timerfd_settime(j->timer_fd, 0, &it, NULL);
		else
			proc_signal_group(j->ch, SIGKILL);
	}
}

void op_job(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	struct agent *a = conn_agent(c);
	struct job *j;

	if (!strcmp(op, "job.start")) {
		job_start(c, id, req);
		return;
	}
	if (!strcmp(op, "job.list")) {
		json_t *list = json_array();

		for (j = a->jobs; j; j = j->next)
			json_array_append_new(list, job_json(j));
		conn_send_json(c, FRAME_RESULT, id, json_pack("{s:o}", "jobs", list));
		return;
	}
	j = job_find(a, req);
	if (!j) {
		conn_send_error(c, id, "not_found", "no job with that id");
		return;
	}
	if (!strcmp(op, "job.get"))
		conn_send_json(c, FRAME_RESULT, id, job_json(j));
	else if (!strcmp(op, "job.output"))
		job_output(c, id, j, req);
	else if (!strcmp(op, "job.stop"))
		job_stop(c, id, j, req);
	else
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
}

void jobs_destroy(struct agent *a)
{
	while (a->jobs) {
		struct job *j = a->jobs;

		a->jobs = j->next;
		if (job_running(j))
			proc_signal_group(j->ch, SIGKILL);
		job_free(j);
	}
	a->nr_jobs = 0;
}
