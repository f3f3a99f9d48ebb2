/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_AHEAD_H
#define HUSK_SBX_AHEAD_H

/* Inside the manager: a paused sandbox's next VMM, made ahead of its resume (sbx_ahead.c). */
#include <stdbool.h>

#include "sbx_int.h"

/* Paused and nothing under way: its next VMM is restored now and held (if huskd allows more). */
void sbx_ahead_make(struct sandbox *sb);
/* Its keys still open (its org's key not shredded since its VMM was made ahead). */
bool sbx_ahead_keys_open(struct sandbox *sb);
/* Its VMM made ahead goes (killed); what waits for that goes on from sbx_ahead_exited(). */
void sbx_ahead_drop(struct sandbox *sb);
/*
 * A resume of a sandbox with a VMM made ahead (RESUMING already): its vCPUs
 * are asked to run. One that is going, or does not answer, is replaced by a
 * VMM started the usual way once it has gone.
 */
void sbx_ahead_resume(struct sandbox *sb);
/* What follows the exit of a sandbox's VMM, for the VMM made ahead (sbx_ahead_exited()). */
enum sbx_ahead_next {
	SBX_AHEAD_NOT_OURS,    /* not one made ahead (or no longer): as for any VMM */
	SBX_AHEAD_GONE,        /* PAUSED: nothing more */
	SBX_AHEAD_PLAN_GOES,   /* PAUSED: the plan that waited for it goes on (sbx_plan_go()) */
	SBX_AHEAD_RESUME_USUAL /* RESUMING: the usual VMM starts (sbx_resume_vmm()) */
};
/* Its VMM exited (status as vmm_exited's): what comes next. */
enum sbx_ahead_next sbx_ahead_exited(struct sandbox *sb, int status);
/* huskd stops: VMMs made ahead go with it (a paused sandbox's record holds no VMM). */
void sbx_ahead_close(struct sbx_mgr *m);

#endif
