/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_POOL_H
#define HUSK_SBX_POOL_H

/* Inside the manager: warm VMMs, a template's guest restored ahead of its create (sbx_pool.c). */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx_int.h"

struct sbx_tmpl;

/* What a warm VMM is made for: one of a template, or of a snapshot with memory. */
struct sbx_pool_key {
	const struct sbx_tmpl *tmpl; /* the template it restores, or NULL */
	const char *snap;            /* else the snapshot whose memory it resumes */
	const char *snap_ref;        /* and how the create named it (an id, name or name:tag) */
	const char *org;
	int64_t disk; /* resources.disk, 0: the base's size */
	uint64_t mem_mib;
	unsigned vcpus;
};

/*
 * Whether one more warm VMM for k is worth making: pooling is on, none of
 * them is being made, fewer than huskd --warm-pool are ready, and the host's
 * bound is not met.
 */
bool sbx_pool_wanted(struct sbx_mgr *m, const struct sbx_pool_key *k);
/*
 * A pooled sandbox for k, out of the pool (still POOLED, its agent
 * connected), or NULL. Those of an older template of k's runtime and shape,
 * and those of a snapshot k's name no longer names (its tag moved), end
 * here: no create takes them any more.
 */
struct sandbox *sbx_pool_take(struct sbx_mgr *m, const struct sbx_pool_key *k);
/* sb, being created, is a warm VMM for k; body (a reference taken) makes the next one. */
void sbx_pool_begin(struct sandbox *sb, const struct sbx_pool_key *k, json_t *body);
/* Snapshot id was deleted: its warm VMMs end (nothing would take them). */
void sbx_pool_forget_snap(struct sbx_mgr *m, const char *id);
/*
 * Warm VMMs of a snapshot that no create took for an hour end (the reaper's
 * tick): snapshots are many, and most are not started from again and again.
 */
void sbx_pool_expire(struct sbx_mgr *m, time_t now);
/* Its VMM started: its pid kept in its folder, for sbx_pool_sweep. */
void sbx_pool_vmm_started(struct sandbox *sb);
/* At start: warm VMMs a huskd killed outright left running are killed, their folders removed. */
void sbx_pool_sweep(struct sbx_mgr *m);
/* Its agent dialled in: its vCPUs are parked, then it is POOLED (or it fails). */
void sbx_pool_hello(struct sandbox *sb);
/*
 * A taken sandbox, recorded: its VMM recorded, its vCPUs asked to run again
 * (a failure ends it). 0 or -errno with err.
 */
int sbx_pool_resume(struct sandbox *sb, char *err, size_t errlen);
/* A taken sandbox is RESTORING: its create's setup starts (agent_hello). */
void sbx_pool_claimed(struct sandbox *sb);
/* huskd stops: warm VMMs are killed and their folders removed (nothing records them). */
void sbx_pool_close(struct sbx_mgr *m);

#endif
