/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_PAUSE_H
#define HUSK_SBX_PAUSE_H

/* Inside the manager: pause, freeze, resume (sbx_pause.c). */
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "sbx_int.h"

/* Pauses an idle sandbox to disk for plan; -EBUSY and friends with err when it cannot. */
int sbx_pause_start(struct sandbox *sb, const struct sbx_pause_plan *plan, struct sbx_err *err);
/* The same for a sandbox already paused: the plan's work and after() at once. */
int sbx_freeze_start(struct sandbox *sb, const struct sbx_pause_plan *plan, struct sbx_err *err);
/* A paused sandbox runs again: a VMM from its memory.snap; then up (or err to waiters). */
int sbx_resume_start(struct sandbox *sb, const char *reason, struct sbx_err *err);
/* Its VMM from memory.snap (RESUMING): 0, or -errno with why. */
int sbx_resume_vmm(struct sandbox *sb, char *why, size_t len);
/* PAUSED with a plan: its work off the loop (FREEZING), then the plan's after(). */
void sbx_plan_go(struct sandbox *sb);
/* PAUSING: the VMM exited (status 0 after its snapshot and quit: paused). */
void sbx_pause_vmm_gone(struct sandbox *sb, int status);
/* RESUMING: the VMM exited before the guest was up; it stays paused, its memory.snap kept. */
void sbx_resume_failed(struct sandbox *sb, const char *why);
/* RESUMING: its agent dialled in. */
void sbx_resume_hello(struct sandbox *sb);
/* The sandbox stops: a pause's plan ends with why (or once its work off the loop is done). */
void sbx_plan_abort(struct sandbox *sb, const char *why);

/* The sandbox's memory.snap: where a pause writes it and a resume reads it. */
static inline void sbx_pause_snap_path(const struct sandbox *sb, char *out, size_t len)
{
	snprintf(out, len, "%s/memory.snap", sb->dir);
}

/* CLOCK_MONOTONIC in ms (a pause's and a resume's durations). */
static inline long long sbx_pause_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
