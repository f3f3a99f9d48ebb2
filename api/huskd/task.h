/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TASK_H
#define HUSK_TASK_H

#include <uv.h>

/*
 * Blocking work for huskd's event loop: the agent client and disk images
 * are blocking, and an execution can run for hours, so each task gets a
 * thread of its own (libuv's pool has four, which long executions would
 * starve). work(arg) runs on that thread; done(arg) runs afterwards on the
 * loop thread, where all of huskd's state lives.
 */
struct task_runner;

int task_runner_create(uv_loop_t *loop, struct task_runner **out)
	__attribute__((warn_unused_result));

/* Waits for running tasks to finish (their done() calls are dropped), then frees. */
void task_runner_destroy(struct task_runner *r);

/* Starts work(arg) on a new thread. Returns 0 or -errno (nothing started). */
int task_run(struct task_runner *r, void (*work)(void *arg), void (*done)(void *arg), void *arg)
	__attribute__((warn_unused_result));

#endif
