/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_SNAP_H
#define HUSK_SBX_SNAP_H

/* Taking a snapshot of a sandbox (sbx_snap.c), for the API and for builds. */
#include <jansson.h>
#include <stdint.h>

#include "sbx.h"

struct sandbox;

/* rec: the SnapshotInfo (borrowed), or NULL with err. */
typedef void (*sbx_snap_fn)(struct sandbox *sb, json_t *rec, const struct sbx_err *err, void *arg);

/*
 * Snapshots an idle sandbox (its guest synced already) as id. body has name,
 * tag, and optionally description, public, memory (default true), message,
 * userMetadata, files (SnapshotInfo fields) and contentHash, env (kept
 * privately); keepPaused leaves it paused on disk. done runs once it runs
 * again (or is paused, with keepPaused). 0, or -errno with err (no done).
 */
int sbx_snap_take(struct sandbox *sb, const char *id, json_t *body, int64_t files, sbx_snap_fn done,
                  void *arg, struct sbx_err *err) __attribute__((warn_unused_result));

#endif
