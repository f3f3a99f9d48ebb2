// SPDX-License-Identifier: MIT
/*
 * Jobs: the built-in commands in the background, their output kept in a
 * ring of the newest FAKE_JOB_OUTPUT bytes per stream, as husk-agent keeps
 * it. Only sleep runs for a while; job.stop ends it at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define JOBS_KEEP_FINISHED 64
#define JOBS_MAX_RUNNING 256
#define JOB_PID_BASE 1000 /* a job's pretend pid: this plus its number */

struct ring {
	uint8_t *buf;
	uint64_t start; /* offset of the oldest byte kept */
	uint64_t len;
};

struct job {
	char id[24];
	int pid;
	json_t *argv;
	struct run run;
	bool running;
	int exit_code, sig;
	int64_t started_at, ended_at; /* wall ms */
	struct ring out, err;
	struct job *next;
};

static void ring_append(struct ring *r, const uint8_t *p, size_t n)
{
	if (!r->buf && !(r->buf = malloc(FAKE_JOB_OUTPUT))) {
		r->start += r->len + n; /* counted, not kept */
		r->len = 0;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		r->buf[(r->start + r->len) % FAKE_JOB_OUTPUT] = p[i];
		if (r->len < FAKE_JOB_OUTPUT)
			r->len++;
		else
			r->start++;
	}
}

/* total bytes of "y\n": only the newest FAKE_JOB_OUTPUT are made. */
static void ring_yes(struct ring *r, uint64_t total)
{
	uint8_t buf[FAKE_CHUNK];
	uint64_t off = 0;

	if (total > FAKE_JOB_OUTPUT) {
		off = total - FAKE_JOB_OUTPUT;
		r->start += r->len + off;
		r->len = 0;
	}
	while (off < total) {
		size_t n = total - off < sizeof(buf) ? total - off : sizeof(buf);

		yes_fill(buf, off, n);
		ring_append(r, buf, n);
		off += n;
	}
}

static void job_out(void *ctx, uint8_t type, const void *p, size_t n)
{
	struct job *j = ctx;

	ring_append(type == FRAME_STDERR ? &j->err : &j->out, p, n);
}

static void job_end(struct job *j, int code, int sig)
{
	j->running = false;
	j->exit_code = code;
	j->sig = sig;
	j->ended_at = wall_ms();
}

static json_t *job_json(const struct job *j)
{
	json_t *o =
		json_pack("{s:s, s:i, s:O, s:b, s:I, s:I, s:I}", "id", j->id, "pid", j->pid, "argv",
	                  j->argv, "running", j->running, "started_at", (json_int_t)j->started_at,
	                  "stdout_bytes", (json_int_t)(j->out.start + j->out.len), "stderr_bytes",
	                  (json_int_t)(j->err.start + j->err.len));

	if (!o)
		return NULL;
	json_object_set_new(o, "exit_code", j->running ? json_null() : json_integer(j->exit_code));
	json_object_set_new(o, "signal",
	                    j->running || !j->sig ? json_null() : json_integer(j->sig));
	json_object_set_new(o, "ended_at",
	                    j->running ? json_null() : json_integer((json_int_t)j->ended_at));
	return o;
}

static void job_free(struct job *j)
{
	json_decref(j->argv);
	free(j->out.buf);
	free(j->err.buf);
	free(j);
}

/* Keeps the newest finished jobs; the list is newest first. */
static void prune_finished(struct fake *fk)
{
	unsigned finished = 0;

	for (struct job **pp = &fk->jobs; *pp;) {
		struct job *j = *pp;

		if (!j->running && ++finished > JOBS_KEEP_FINISHED) {
			*pp = j->next;
			job_free(j);
			continue;
		}
		pp = &j->next;
	}
}

static void job_start(struct conn *c, uint32_t id, json_t *req)
{
	struct fake *fk = conn_fake(c);
	unsigned running = 0;
	const char *why;
	struct job *j;
	json_t *env;

	for (j = fk->jobs; j; j = j->next)
		running += j->running;
	if (running >= JOBS_MAX_RUNNING) {
		conn_send_error(c, id, "busy", "%u jobs are running; stop some first", running);
		return;
	}
	why = exec_check_req(req);
	if (why) {
		conn_send_error(c, id, "bad_request", "%s", why);
		return;
	}
	j = calloc(1, sizeof(*j));
	env = exec_env(fk, req);
	if (!j || !env) {
		free(j);
		json_decref(env);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	fk->next_job++;
	snprintf(j->id, sizeof(j->id), "job-%u", fk->next_job);
	j->pid = JOB_PID_BASE + (int)fk->next_job;
	j->argv = json_incref(json_object_get(req, "argv"));
	j->started_at = wall_ms();
	j->running = true;
	run_start(fk, j->argv, env, &j->run, job_out, j);
	json_decref(env);
	if (j->run.kind == RUN_YES)
		ring_yes(&j->out, j->run.total);
	if (j->run.kind != RUN_SLEEP) /* a job's stdin is /dev/null: cat ends at once */
		job_end(j, j->run.kind == RUN_DONE ? j->run.exit_code : 0, 0);
	j->next = fk->jobs;
	fk->jobs = j;
	prune_finished(fk);
	conn_send_json(c, FRAME_RESULT, id, job_json(j));
}

/*
 * job.output with "follow": the fake's jobs make all their output at start,
 * so a follower has only to wait for its job's end (or a CANCEL) to send
 * its RESULT. It finds the job by id: a finished one may be pruned meanwhile.
 */
struct follow {
	struct req r;
	char job[24];
	uint64_t pos;
};

static struct job *job_by_id(struct fake *fk, const char *id)
{
	struct job *j = fk->jobs;

	while (j && strcmp(j->id, id))
		j = j->next;
	return j;
}

static void follow_end(struct follow *f)
{
	struct job *j = job_by_id(conn_fake(f->r.c), f->job);

	req_unregister(&f->r);
	conn_send_json(f->r.c, FRAME_RESULT, f->r.id,
	               json_pack("{s:I, s:I, s:b, s:b}", "offset", (json_int_t)f->pos,
	                         "next_offset", (json_int_t)f->pos, "truncated", 0, "running",
	                         j && j->running));
	free(f);
}

static void follow_tick(struct req *r)
{
	struct follow *f = (struct follow *)r;
	struct job *j = job_by_id(conn_fake(r->c), f->job);

	if (!j || !j->running)
		follow_end(f);
}

static void follow_frame(struct req *r, const struct frame *fr)
{
	if (fr->type == FRAME_CANCEL)
		follow_end((struct follow *)r);
}

static void follow_drop(struct req *r)
{
	free(r);
}

static const struct req_ops follow_ops = {
	.on_frame = follow_frame, .tick = follow_tick, .drop = follow_drop};

static void job_output(struct conn *c, uint32_t id, struct job *j, json_t *req)
{
	const char *stream = json_string_value(json_object_get(req, "stream"));
	json_t *off = json_object_get(req, "offset"), *max = json_object_get(req, "max");
	struct ring *r = stream && !strcmp(stream, "stderr") ? &j->err : &j->out;
	uint64_t from = json_integer_value(off) > 0 ? (uint64_t)json_integer_value(off) : 0;
	uint64_t limit =
		json_integer_value(max) > 0 ? (uint64_t)json_integer_value(max) : FAKE_JOB_OUTPUT;
	uint64_t end = r->start + r->len, pos;
	bool truncated = from < r->start;
	uint8_t chunk[FAKE_CHUNK];

	if (stream && strcmp(stream, "stdout") && strcmp(stream, "stderr")) {
		conn_send_error(c, id, "bad_request", "stream must be \"stdout\" or \"stderr\"");
		return;
	}
	from = from < r->start ? r->start : from > end ? end : from;
	if (end - from > limit)
		end = from + limit;
	for (pos = from; pos < end;) {
		size_t n = 0;

		while (n < sizeof(chunk) && pos < end)
			chunk[n++] = r->buf[pos++ % FAKE_JOB_OUTPUT];
		conn_send(c, FRAME_DATA, 0, id, chunk, n);
	}
	if (json_is_true(json_object_get(req, "follow")) && j->running) {
		struct follow *f = calloc(1, sizeof(*f));

		if (!f) {
			conn_send_error(c, id, "io_error", "out of memory");
			return;
		}
		snprintf(f->job, sizeof(f->job), "%s", j->id);
		f->pos = end;
		req_register(c, &f->r, id, &follow_ops);
		return;
	}
	conn_send_json(c, FRAME_RESULT, id,
	               json_pack("{s:I, s:I, s:I, s:b, s:b}", "offset", (json_int_t)from,
	                         "next_offset", (json_int_t)end, "total",
	                         (json_int_t)(r->start + r->len), "truncated", truncated, "running",
	                         j->running));
}

void op_job(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	struct fake *fk = conn_fake(c);
	const char *want = json_string_value(json_object_get(req, "id"));
	struct job *j;

	if (!strcmp(op, "job.start")) {
		job_start(c, id, req);
		return;
	}
	if (!strcmp(op, "job.list")) {
		json_t *list = json_array();

		for (j = fk->jobs; j; j = j->next)
			json_array_append_new(list, job_json(j));
		conn_send_json(c, FRAME_RESULT, id, json_pack("{s:o}", "jobs", list));
		return;
	}
	if (strcmp(op, "job.get") && strcmp(op, "job.output") && strcmp(op, "job.stop")) {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
		return;
	}
	for (j = fk->jobs; want && j; j = j->next)
		if (!strcmp(j->id, want))
			break;
	if (!want || !j) {
		conn_send_error(c, id, "not_found", "no job with that id");
		return;
	}
	if (!strcmp(op, "job.output")) {
		job_output(c, id, j, req);
		return;
	}
	if (!strcmp(op, "job.stop") && j->running) {
		bool force = json_is_true(json_object_get(req, "force"));

		job_end(j, 128 + (force ? FAKE_SIGKILL : FAKE_SIGTERM),
		        force ? FAKE_SIGKILL : FAKE_SIGTERM);
		/* Not pruned here: j itself could go. The next start or tick prunes. */
	}
	conn_send_json(c, FRAME_RESULT, id, job_json(j));
}

void jobs_tick(struct fake *fk)
{
	int64_t now = guest_ms(fk);
	bool ended = false;

	for (struct job *j = fk->jobs; j; j = j->next) {
		if (j->running && now >= j->run.until) {
			job_end(j, 0, 0);
			ended = true;
		}
	}
	if (ended)
		prune_finished(fk);
}

int64_t jobs_deadline(const struct fake *fk)
{
	int64_t best = -1;

	for (const struct job *j = fk->jobs; j; j = j->next)
		if (j->running && (best < 0 || j->run.until < best))
			best = j->run.until;
	return best;
}

void jobs_free(struct fake *fk)
{
	while (fk->jobs) {
		struct job *j = fk->jobs;

		fk->jobs = j->next;
		job_free(j);
	}
}
