/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TESTS_SESSION_TEST_H
#define HUSK_TESTS_SESSION_TEST_H

/*
 * The harness shared by session_test.c (against a real agent) and
 * session_fake.c (against a fake one): the loop, checks, waits, and call
 * and session records whose callbacks count what happened.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_session.h"
#include "proto.h"

extern uv_loop_t *loop;
extern const char *tmpdir;
extern int in_api;    /* inside agent_call_start/cancel: a callback now is a bug */
extern int callbacks; /* every callback so far */

/* Prints PASS agent/session_NAME, or FAIL with the detail (and fails the run). */
void check(bool ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Runs the loop until *count reaches want; false after 60 s without it. */
bool wait_for(const int *count, int want);
/* Runs the loop until nothing is left on it (closed sessions freed); false if that hangs. */
bool drain(void);

/* A session's callbacks, counted. */
struct sess {
	struct agent_session *s;
	int hellos, closed, closed_rc, dones_at_closed;
	json_t *hello;
	int *dones; /* the calls' done counter, read when closed() comes */
};
extern const struct agent_session_ops sess_ops;

/* A call's callbacks: output collected, the end recorded, and what to do on the way. */
struct call {
	int done, rc, releases, data_after_done;
	json_t *reply;
	char *out; /* STDOUT and DATA bytes, NUL-terminated */
	size_t out_len;
	int *dones;                /* shared counter of finished calls */
	struct agent_call *c;      /* until done */
	struct agent_session *ses; /* close_on_data: the session to close */
	const char *cancel_on;     /* cancel when this text arrives */
	bool close_on_data;
	int callbacks_at_close; /* close_on_data: callbacks when the close returned */
};
extern const struct agent_call_ops call_ops;

/* A release() for struct agent_input whose arg is the struct call. */
void on_release(void *arg);
/* agent_call_start, marked as inside the API; takes req's reference. */
int start(struct agent_session *s, json_t *req, const struct agent_input *in, struct call *k);
void call_free(struct call *k);
/* The reply's "code", or "(none)". */
const char *code_of(const struct call *k);
int connect_unix(const char *path);
uint8_t *random_bytes(size_t len, uint64_t seed);

/* A session on the agent's socket (exits the run if it cannot connect). */
struct agent_session *open_agent(const char *sock, struct sess *x);
/* session_pull.c: input that arrives while the call runs. */
void session_pull_tests(const char *sock);
/* session_fake.c: against a fake agent. */
void session_fake_tests(void);

#endif
