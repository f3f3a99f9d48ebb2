/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_JOBS_H
#define HUSK_AGENT_JOBS_H

/* Background jobs (op_jobs.c) and the followers of their output (job_follow.c). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent.h"

#define JOB_OUTPUT_MAX (1U << 20) /* per stream; older bytes are dropped */
#define JOB_KEEP_FINISHED 64
#define JOB_MAX_RUNNING 256
#define JOB_CHUNK 65536

struct ring {
	uint8_t *buf;
	uint64_t start; /* offset of the oldest byte kept, counted from the job's start */
	uint64_t len;
};

struct stop_wait {
	struct req r;
	struct job *job;
	struct stop_wait *next;
};

/* A job.output with "follow": new bytes of one stream go out as they come. */
struct follow {
	struct req r;
	struct job *job;
	struct ring *ring;
	bool err; /* stderr's */
	uint64_t pos;
	bool truncated;
	struct follow *next;
};

struct job {
	struct agent *a;
	struct follow *follows;
	char id[24];
	struct child *ch;
	json_t *argv;
	struct ring out, err;
	int timer_fd;
	bool stopping;
	int64_t started_at, ended_at; /* wall clock, ms */
	struct stop_wait *waiters;
	struct job *next;
};

bool job_running(const struct job *j);
/* A job.output's last answer: where it read from and to. */
json_t *job_output_result(const struct job *j, const struct ring *r, uint64_t from, uint64_t to,
                          bool truncated);
/* Follows ring r of j for request id from offset from; -ENOMEM. */
int job_follow_start(struct conn *c, uint32_t id, struct job *j, struct ring *r, uint64_t from,
                     bool truncated);
/* Ring r of j grew or its pipe closed: its followers send what is new (and end). */
void job_follow_pump_all(struct job *j, const struct ring *r);
/* Ends a follower with its RESULT (the job is going). */
void job_follow_end(struct follow *f);

#endif
