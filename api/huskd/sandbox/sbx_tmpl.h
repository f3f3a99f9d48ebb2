/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_TMPL_H
#define HUSK_SBX_TMPL_H

/* Inside the manager: templates, a booted guest per runtime and shape (sbx_tmpl.c,
 * sbx_tmpl_make.c). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx_int.h"

enum sbx_tmpl_state { TMPL_MAKING, TMPL_READY, TMPL_FAILED };
struct sbx_tmpl {
	struct sbx_mgr *m;
	char key[17];        /* its folder's name: a hash of identity */
	char identity[2048]; /* runtime, image, kernel, initrd, VMM and shape it was made of */
	char runtime[STORE_ID_LEN + 64], rt_name[256];
	uint64_t mem_mib;
	unsigned vcpus;
	bool nic;
	enum sbx_tmpl_state state;
	uint64_t failed_ms; /* when it last failed (uv_now) */
	char dir[4200], disk[4300], snap[4300], mem[4300];
	/* A create that found it being made (sbx_tmpl_wish): its first warm VMM's, once ready. */
	json_t *like;
	struct sbx_tmpl *next;
};
/*
 * The ready template for a create of this runtime and shape, or NULL: then
 * (templates on, none being made or recently failed) it is wanted, and the
 * template_wanted hook starts making it.
 */
const struct sbx_tmpl *sbx_tmpl_get(struct sbx_mgr *m, json_t *rt, json_t *rt_priv,
                                    uint64_t mem_mib, unsigned vcpus, bool nic);
/*
 * A create of this runtime and shape found its template being made: like (a
 * reference taken), a create like it, makes the template's first warm VMM
 * as soon as it is ready, so the next create need not restore it itself.
 */
void sbx_tmpl_wish(struct sbx_mgr *m, json_t *rt, json_t *rt_priv, uint64_t mem_mib, unsigned vcpus,
                   json_t *like);
/* At start: the templates an earlier huskd made; unfinished ones removed. */
void sbx_tmpl_load(struct sbx_mgr *m);
/* Removes out-of-date templates nothing sits on any more. */
void sbx_tmpl_prune(struct sbx_mgr *m);
void sbx_tmpl_free(struct sbx_mgr *m);

#endif
