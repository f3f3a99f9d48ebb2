/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_SPARE_H
#define HUSK_SBX_SPARE_H

/* Inside the manager: spare layers, a sandbox's own disk made ahead (sbx_spare.c). */
#include <stdbool.h>
#include <stdint.h>

#include "sbx_int.h"

struct sbx_spare;

/* At start: what a crash left in state/spares goes (its keys were only in memory). */
void sbx_spare_start(struct sbx_mgr *m);
/*
 * A ready spare for sb's create over base (resources.disk `disk`, 0: the
 * base's size), or NULL. Its key becomes sb->disk_key; the caller moves its
 * file into place with sbx_spare_use and frees it with sbx_spare_free.
 */
struct sbx_spare *sbx_spare_take(struct sandbox *sb, const char *base, int64_t disk);
/* Off the loop: the spare's file becomes sb->layer, its master key kept for the first VMM
 * start. 0 or -errno; *vsize its size. */
int sbx_spare_use(struct sbx_spare *s, struct sandbox *sb, uint64_t *vsize);
void sbx_spare_free(struct sbx_spare *s);
/* After sb's create: a spare made for the next create like it, unless one is there. */
void sbx_spare_want(struct sandbox *sb, const char *base, int64_t disk);
/* How many spares there are (ready: only those ready to take). */
unsigned sbx_spare_count(struct sbx_mgr *m, bool ready);
/* At stop: ready spares removed; one being made is removed when its worker ends. */
void sbx_spare_close(struct sbx_mgr *m);

#endif
