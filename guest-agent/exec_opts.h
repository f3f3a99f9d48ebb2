/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_EXEC_OPTS_H
#define HUSK_AGENT_EXEC_OPTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "proc.h"

/* What exec and job.start have in common, parsed and checked. */
struct exec_opts {
	struct spawn_opts spawn;
	char **argv;
	char **env;
	char *cwd;
	uint64_t timeout_ms; /* 0: none */
	uint64_t grace_ms;   /* SIGTERM to SIGKILL */
	bool keep;           /* exec: the process outlives its connection (its output dropped) */
};

#define DEFAULT_GRACE_MS 2000
#define MAX_ARGS 4096

/*
 * Reads argv (non-empty array of strings), env (object: merged over the
 * sandbox defaults), cwd, stdin (bool), pty (true or {rows, cols}),
 * timeout_ms, grace_ms and keep (bool). Returns 0, or -EINVAL with *why set.
 */
int exec_opts_parse(struct agent *a, json_t *req, struct exec_opts *o, const char **why)
	__attribute__((warn_unused_result));
void exec_opts_free(struct exec_opts *o);

/*
 * How a process's streams map to frames. exec: STDIN in, STDOUT/STDERR out,
 * RESULT with the exit status. data (tar): DATA in and out, stderr kept for
 * the message of an ERROR when the process fails, RESULT {size} otherwise.
 */
struct exec_mode {
	const char *name;
	bool data;
};

/*
 * Starts o's process for request id and streams it as mode says until it
 * ends. Everything in o is copied; the caller frees it.
 */
void exec_start(struct conn *c, uint32_t id, struct exec_opts *o, const struct exec_mode *mode);

/*
 * Answers a request whose program could not start as a shell would: a
 * line on STDERR and a RESULT with exit code 127 (126 when not executable).
 */
void exec_report_spawn_failure(struct conn *c, uint32_t id, const struct exec_opts *o, int err);

#endif
