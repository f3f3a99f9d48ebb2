/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_BASE_H
#define HUSK_SBX_BASE_H

/* What a new sandbox's layer goes on: a runtime, or a snapshot (and its runtime). */
#include <jansson.h>
#include <stdint.h>

#include "sbx.h"

struct sandbox;

struct sbx_base {
	json_t *rt, *rt_priv;     /* the runtime */
	json_t *snap, *snap_priv; /* the snapshot, NULL for none */
	const char *path;         /* the image */
};

/* From POST /sandbox's runtime, runtimeId or snapshot: 0, or -errno with err. */
int sbx_base_find(struct sbx_mgr *m, json_t *body, struct sbx_base *b, struct sbx_err *err)
	__attribute__((warn_unused_result));
void sbx_base_free(struct sbx_base *b);
/* Records the base in the new sandbox, its public ("snapshot") and private objects. */
void sbx_base_apply(struct sandbox *sb, const struct sbx_base *b, json_t *pub, json_t *priv);
/*
 * The size of a new layer over the image at base: resources.disk (disk) rounded
 * up to 512 bytes, or the base's own size for 0. -ERANGE when disk is smaller
 * than the base (its file system would be cut off), -errno when the base is
 * unusable; err says which. Off the loop too.
 */
int sbx_base_layer_size(const char *base, int64_t disk, uint64_t *size, char *err, size_t errlen)
	__attribute__((warn_unused_result));
/* The snapshot's memory file if a VM of this shape (and NIC or none) can resume from it, else NULL.
 */
const char *sbx_base_memory(const struct sbx_base *b, uint64_t mem_mib, unsigned vcpus, bool net);

/*
 * The memory file of the base snapshot (dir/memory.raw) into out if it has
 * one; else NULL, and one is made in the background (templates on).
 */
const char *sbx_base_memfile(struct sbx_mgr *m, const struct sbx_base *b, char *out, size_t len);

#endif
