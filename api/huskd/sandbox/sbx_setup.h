/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_SETUP_H
#define HUSK_SBX_SETUP_H

/* Inside the manager: a guest that just dialled in is set up (sbx_setup.c). */
#include "sbx_int.h"

enum sbx_setup_kind {
	SETUP_BOOTED,   /* after a boot: workspace, env, the create request's files */
	SETUP_RESTORED, /* a warm create: the clock, then as after a boot */
	SETUP_TEMPLATE, /* from a template: as warm, its maker made the workspace */
	SETUP_RESUMED,  /* after a resume: the clock and the random generator only */
	SETUP_WARM,     /* a warm VMM's (sbx_pool.c): "resumed" with its identity, nothing else */
};
/*
 * done: err NULL once set up (the sandbox is not moved: done decides). A
 * RESTORED or TEMPLATE setup of a warm VMM set up as SETUP_WARM skips
 * "resumed": its guest's clock ran on while parked (kvmclock), its random
 * generator and identity are its own already.
 */
void sbx_setup_start(struct sandbox *sb, enum sbx_setup_kind kind,
                     void (*done)(struct sandbox *sb, const struct sbx_err *err));

#endif
