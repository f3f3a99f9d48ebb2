// SPDX-License-Identifier: MIT
/*
 * Disk checkpoints (API.md §5.7) on the image chain: a checkpoint freezes the
 * sandbox's layer as ckpt_<id>.qcow2 in its folder and puts a new, empty
 * layer over it. Creating one syncs the guest, pauses it to disk (its
 * memory belongs to the same instant as its disk), swaps the layers off the
 * loop and resumes it: processes go on. Restoring one throws away the layer
 * and every newer checkpoint and boots the sandbox afresh on a new layer
 * over it: the files come back, processes do not. Deleting one forgets it;
 * its file stays while newer layers are built on it (it goes with the
 * sandbox).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img.h"
#include "sbx_int.h"
#include "sbx_pause.h"

struct ckpt {
	struct sandbox *sb;
	sbx_done_fn done;
	void *ctx;
	char id[STORE_ID_LEN];
	char name[80];
	char parent[80];
	char file[4200];
	json_t *drop; /* restore: the newer checkpoints' ids, their files removed */
	json_t *rec;  /* create: the checkpoint, answered once the sandbox runs again */
};

static void ckpt_free(struct ckpt *c)
{
	json_decref(c->drop);
	json_decref(c->rec);
	sbx_drop(c->sb);
	free(c);
}

static void answer(struct ckpt *c, const struct sbx_err *err)
{
	struct sbx_reply reply = {.data = c->rec};

	c->done(c->ctx, err, err ? NULL : &reply);
	ckpt_free(c);
}

static void ckpt_path(struct sandbox *sb, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.qcow2", sb->dir, id);
}

/* Idle, or paused to disk: checkpoints are made and restored only then. */
static struct sandbox *quiet(struct sbx_mgr *m, const char *id, struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);

	if (sb && sb->state != SBX_IDLE && sb->state != SBX_PAUSED) {
		sbx_fail(err, SBX_STATE, -EBUSY,
		         "sandbox %s is %s: checkpoints are made and restored while it is idle or "
		         "paused; try again when its command has finished",
		         id, sb->exec ? "running a command" : sbx_state_name(sb->state));
		return NULL;
	}
	return sb;
}

static struct ckpt *ckpt_new(struct sandbox *sb, sbx_done_fn done, void *ctx)
{
	struct ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	*c = (struct ckpt){.sb = sb, .done = done, .ctx = ctx};
	sbx_hold(sb);
	return c;
}

/* ---- create ---- */

/* Off the loop: the layer becomes the checkpoint's file, a new layer over it. */
static int create_freeze(struct sandbox *sb, void *arg, char *err, size_t errlen)
{
	struct ckpt *c = arg;
	char e[512] = "";
	int rc;

	if (rename(sb->layer, c->file) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot keep the layer: %s", strerror(-rc));
		return rc;
	}
	rc = sbx_dkey_layer(sb, c->file, 0, false, e, sizeof(e));
	if (rc) {
		if (rename(c->file, sb->layer) < 0)
			snprintf(err, errlen,
			         "cannot make a new layer (%s) nor put the old one back", e);
		else
			snprintf(err, errlen, "cannot make a new layer: %s", e);
	}
	return rc;
}

static void create_up(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	/* The checkpoint exists either way; a failed resume is the sandbox's own problem. */
	if (err && err->fault == SBX_ENDED)
		log_info(sb->id, "ended right after its checkpoint: %s", err->msg);
	else if (err)
		log_error(sb->id, "after its checkpoint it did not resume: %s", err->msg);
	answer(arg, NULL);
}

static void create_after(struct sandbox *sb, int rc, const char *why, void *arg)
{
	struct ckpt *c = arg;
	struct sbx_err err;
	json_t *ckpt, *priv;

	if (!rc) {
		ckpt = json_pack("{ssssss}", "id", c->id, "name", c->name, "parent", c->parent);
		priv = json_pack("{ss}", "file", c->file);
		rc = store_checkpoint_insert(sb->m->store, sb->id, ckpt, priv);
		if (!rc)
			rc = store_checkpoint_get(sb->m->store, sb->id, c->id, &c->rec, NULL);
		json_decref(ckpt);
		json_decref(priv);
		why = rc ? "cannot record the checkpoint" : NULL;
	}
	log_info(sb->id, "checkpoint %s (%s)%s%s", c->name, c->id, rc ? " failed: " : "",
	         rc ? why : "");
	if (rc)
		sbx_fail(&err,
		         sb->state == SBX_STOPPING || sb->state == SBX_GONE ? SBX_ENDED
		                                                            : SBX_INTERNAL,
		         rc, "cannot checkpoint sandbox %s: %s", sb->id, why ? why : strerror(-rc));
	/* The guest goes on either way (if it can). */
	if (sb->state == SBX_FREEZING || sb->state == SBX_PAUSED) {
		struct sbx_err rerr;

		if (sbx_resume_start(sb, "resumed after a checkpoint", &rerr)) {
			log_error(sb->id, "after its checkpoint it did not resume: %s", rerr.msg);
		} else if (!rc) {
			sbx_when_ready(sb, create_up, c);
			return;
		}
	}
	answer(c, rc ? &err : NULL);
}

/* The newest checkpoint's name ("" for none): the parent of the next one. */
static void newest_name(struct sandbox *sb, char *out, size_t len)
{
	json_t *list = NULL, *arr;

	out[0] = '\0';
	if (store_checkpoint_list(sb->m->store, sb->id, &list))
		return;
	arr = json_object_get(list, "checkpoints");
	if (json_array_size(arr))
		snprintf(out, len, "%s",
		         json_string_value(json_object_get(
				 json_array_get(arr, json_array_size(arr) - 1), "name")));
	json_decref(list);
}

static void synced(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                   void *arg)
{
	struct ckpt *c = arg;
	struct sbx_err e;

	(void)out;
	if (err) {
		answer(c, err);
		return;
	}
	/* Again: another create of this name may have finished while the guest synced. */
	if (store_checkpoint_get(sb->m->store, sb->id, c->name, NULL, NULL) == 0) {
		sbx_fail(&e, SBX_EXISTS, -EEXIST, "sandbox %s already has a checkpoint named %s",
		         sb->id, c->name);
		answer(c, &e);
		return;
	}
	if (store_new_id("ckpt_", c->id)) {
		sbx_fail(&e, SBX_UNAVAILABLE, -ENOMEM, "out of ids");
		answer(c, &e);
		return;
	}
	newest_name(sb, c->parent, sizeof(c->parent));
	ckpt_path(sb, c->id, c->file, sizeof(c->file));
	if (sbx_pause_start(sb,
	                    &(struct sbx_pause_plan){.reason = "paused for a checkpoint",
	                                             .freeze = create_freeze,
	                                             .after = create_after,
	                                             .arg = c},
	                    &e))
		answer(c, &e);
}

/*
 * What the guest wrote may still sit in its page cache, which is memory, not
 * disk: a sync in the guest first (resuming a paused sandbox for it), then
 * the pause and the swap.
 */
void sbx_ckpt_create(struct sbx_mgr *m, const char *id, const char *name, sbx_done_fn done,
                     void *ctx)
{
	struct sbx_err err;
	struct sandbox *sb = quiet(m, id, &err);
	struct ckpt *c;

	if (!sb) {
		done(ctx, &err, NULL);
		return;
	}
	if (store_checkpoint_get(m->store, id, name, NULL, NULL) == 0) {
		sbx_fail(&err, SBX_EXISTS, -EEXIST, "sandbox %s already has a checkpoint named %s",
		         id, name);
		done(ctx, &err, NULL);
		return;
	}
	c = ckpt_new(sb, done, ctx);
	if (!c) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	sbx_run(sb, json_pack("[s]", "sync"), NULL, 0, synced, c);
}

/* ---- restore ---- */

/* Off the loop: the layer and newer checkpoints' files go, a new layer over the one kept. */
static int restore_freeze(struct sandbox *sb, void *arg, char *err, size_t errlen)
{
	struct ckpt *c = arg;
	char e[512] = "", path[4200];
	json_t *v;
	size_t i;
	int rc;

	unlink(sb->layer);
	json_array_foreach(c->drop, i, v)
	{
		ckpt_path(sb, json_string_value(v), path, sizeof(path));
		unlink(path);
	}
	sbx_pause_snap_path(sb, path, sizeof(path));
	unlink(path);
	rc = sbx_dkey_layer(sb, c->file, 0, false, e, sizeof(e));
	if (rc)
		snprintf(err, errlen, "cannot make a layer over the checkpoint: %s", e);
	return rc;
}

static void restore_up(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct ckpt *c = arg;
	struct sbx_err e;

	if (err) {
		sbx_fail(&e, SBX_INTERNAL, -EIO,
		         "sandbox %s did not come back from checkpoint %s: %s", sb->id, c->name,
		         err->msg);
		answer(c, &e);
		return;
	}
	answer(c, NULL);
}

static void restore_after(struct sandbox *sb, int rc, const char *why, void *arg)
{
	struct ckpt *c = arg;
	struct sbx_err err;
	char e[512];
	json_t *v;
	size_t i;

	if (rc) {
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot restore sandbox %s: %s", sb->id,
		         why ? why : strerror(-rc));
		/* Its disk is half reworked: it cannot go on. */
		if (sb->state == SBX_FREEZING)
			sbx_end(sb, "failed", "its checkpoint restore failed", NULL);
		answer(c, &err);
		return;
	}
	json_array_foreach(c->drop, i, v)
	{
		if (store_checkpoint_delete(sb->m->store, sb->id, json_string_value(v)))
			log_warn(sb->id, "cannot forget checkpoint %s", json_string_value(v));
	}
	sbx_save(sb, json_pack("{sb}", "onDisk", 0));
	rc = sbx_vmm_start(sb, NULL, NULL, NULL, e, sizeof(e));
	if (rc) {
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot restore sandbox %s: %s", sb->id, e);
		sbx_end(sb, "failed", "its checkpoint restore failed", NULL);
		answer(c, &err);
		return;
	}
	log_info(sb->id, "restoring checkpoint %s (%s): booting on it", c->name, c->id);
	sb->up_reason = "restored a checkpoint";
	sbx_to(sb, SBX_REBOOTING, NULL, NULL);
	sbx_when_ready(sb, restore_up, c);
}

void sbx_ckpt_restore(struct sbx_mgr *m, const char *id, const char *ref, sbx_done_fn done,
                      void *ctx)
{
	struct sbx_err err;
	struct sandbox *sb = quiet(m, id, &err);
	json_t *ckpt = NULL, *list = NULL, *v;
	struct sbx_pause_plan plan = {.reason = "stopped to restore a checkpoint",
	                              .freeze = restore_freeze,
	                              .after = restore_after};
	struct ckpt *c;
	bool newer = false;
	size_t i;
	int rc;

	if (!sb) {
		done(ctx, &err, NULL);
		return;
	}
	if (store_checkpoint_get(m->store, id, ref, &ckpt, NULL)) {
		sbx_fail(&err, SBX_NOT_FOUND, -ENOENT, "sandbox %s has no checkpoint %s", id, ref);
		done(ctx, &err, NULL);
		return;
	}
	c = ckpt_new(sb, done, ctx);
	if (!c || store_checkpoint_list(m->store, id, &list)) {
		json_decref(ckpt);
		if (c)
			ckpt_free(c);
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	snprintf(c->id, sizeof(c->id), "%s", json_string_value(json_object_get(ckpt, "id")));
	snprintf(c->name, sizeof(c->name), "%s", json_string_value(json_object_get(ckpt, "name")));
	ckpt_path(sb, c->id, c->file, sizeof(c->file));
	json_decref(ckpt);
	c->drop = json_array();
	json_array_foreach(json_object_get(list, "checkpoints"), i, v)
	{
		const char *cid = json_string_value(json_object_get(v, "id"));

		if (newer)
			json_array_append_new(c->drop, json_string(cid));
		if (cid && !strcmp(cid, c->id))
			newer = true;
	}
	json_decref(list);
	plan.arg = c;
	rc = sb->state == SBX_PAUSED ? sbx_freeze_start(sb, &plan, &err)
	                             : sbx_pause_start(sb, &plan, &err);
	if (rc)
		answer(c, &err);
}

int sbx_ckpt_list(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
{
	if (store_checkpoint_list(m->store, id, out))
		return sbx_fail(err, SBX_NO_SANDBOX, -ENOENT, "sandbox %s not found", id);
	return 0;
}

int sbx_ckpt_delete(struct sbx_mgr *m, const char *id, const char *ref, struct sbx_err *err)
{
	if (store_checkpoint_delete(m->store, id, ref))
		return sbx_fail(err, SBX_NOT_FOUND, -ENOENT, "sandbox %s has no checkpoint %s", id,
		                ref);
	return 0;
}
