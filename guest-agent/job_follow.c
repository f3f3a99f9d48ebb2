// SPDX-License-Identifier: MIT
/*
 * job.output with "follow": a job's stdout or stderr sent as it comes, paced
 * by the connection (past OUTQ_HIGH queued it waits for the drain; bytes the
 * ring dropped meanwhile are reported as truncated), until the stream's pipe
 * closes; then its RESULT. A CANCEL ends it early.
 */
#include <errno.h>
#include <stdlib.h>

#include "jobs.h"
#include "proc.h"

static void follow_unlink(struct follow *f)
{
	for (struct follow **pp = &f->job->follows; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			return;
		}
}

static bool stream_open(const struct job *j, bool err)
{
	return j->ch && (err ? j->ch->err_fd : j->ch->out_fd) >= 0;
}

/* The last answer of a follow (or of a plain job.output): where it got to. */
json_t *job_output_result(const struct job *j, const struct ring *r, uint64_t from, uint64_t to,
                          bool truncated)
{
	return json_pack("{s:I, s:I, s:I, s:b, s:b}", "offset", (json_int_t)from, "next_offset",
	                 (json_int_t)to, "total", (json_int_t)(r->start + r->len), "truncated",
	                 truncated, "running", job_running(j));
}

void job_follow_end(struct follow *f)
{
	follow_unlink(f);
	req_unregister(&f->r);
	conn_send_json(f->r.conn, FRAME_RESULT, f->r.id,
	               job_output_result(f->job, f->ring, f->pos, f->pos, f->truncated));
	free(f);
}

/* Sends what is new while the connection keeps up; the end once the pipe is closed. */
static void follow_pump(struct follow *f)
{
	struct ring *r = f->ring;
	uint64_t end = r->start + r->len;

	if (f->pos < r->start) {
		f->truncated = true; /* the ring moved on while the connection was full */
		f->pos = r->start;
	}
	while (f->pos < end && conn_queued(f->r.conn) < OUTQ_HIGH) {
		uint8_t chunk[JOB_CHUNK];
		size_t n = 0;

		while (n < sizeof(chunk) && f->pos < end)
			chunk[n++] = r->buf[f->pos++ % JOB_OUTPUT_MAX];
		conn_send(f->r.conn, FRAME_DATA, 0, f->r.id, chunk, n);
	}
	if (f->pos == end && !stream_open(f->job, f->err))
		job_follow_end(f);
}

void job_follow_pump_all(struct job *j, const struct ring *r)
{
	struct follow *f = j->follows, *next;

	for (; f; f = next) {
		next = f->next;
		if (f->ring == r)
			follow_pump(f);
	}
}

static void follow_drained(struct req *r)
{
	follow_pump((struct follow *)r);
}

static void follow_frame(struct req *r, const struct frame *fr)
{
	if (fr->type == FRAME_CANCEL)
		job_follow_end((struct follow *)r);
}

static void follow_conn_lost(struct req *r)
{
	struct follow *f = (struct follow *)r;

	follow_unlink(f);
	free(f);
}

static const struct req_ops follow_ops = {
	.on_frame = follow_frame, .on_drain = follow_drained, .on_conn_lost = follow_conn_lost};

int job_follow_start(struct conn *c, uint32_t id, struct job *j, struct ring *r, uint64_t from,
                     bool truncated)
{
	struct follow *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	*f = (struct follow){.job = j,
	                     .ring = r,
	                     .err = r == &j->err,
	                     .pos = from,
	                     .truncated = truncated,
	                     .next = j->follows};
	j->follows = f;
	req_register(c, &f->r, id, &follow_ops);
	follow_pump(f);
	return 0;
}
