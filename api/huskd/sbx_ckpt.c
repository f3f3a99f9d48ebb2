// SPDX-License-Identifier: MIT
/*
 * Disk checkpoints (API.md §5.7) on the image chain: a checkpoint freezes the
 * sandbox's layer as ckpt_<id>.qcow2 in its folder and puts a new, empty
 * layer over it. Creating one pauses a running sandbox to disk (its memory
 * belongs to the same instant as its disk), swaps the layers and resumes it:
 * processes go on. Restoring one throws away the layer and every newer
 * checkpoint and boots the sandbox afresh on a new layer over it: the files
 * come back, processes do not. Deleting one forgets it; its file stays while
 * newer layers are built on it (it goes with the sandbox).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentop.h"
#include "img.h"
#include "json_resp.h"
#include "sbx_priv.h"

struct ckpt_op {
	struct http_req *r;
	char id[STORE_ID_LEN];
	char name[80];
	char file[4096];
	bool was_idle; /* create: resume once the layers are swapped */
	json_t *rec;   /* create: the checkpoint, answered once the sandbox runs again */
	char err[512];
};

/* Answers a checkpoint create: the record, or why not. Frees op. */
static void create_answer(struct sandbox *sb, struct ckpt_op *op)
{
	sb->restoring = false;
	if (op->rec)
		api_ok(op->r, 201, op->rec);
	else
		api_error(op->r, 500, "INTERNAL", "cannot checkpoint sandbox %s: %s", sb->id,
		          op->err);
	free(op);
}

static void ckpt_path(struct sandbox *sb, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.qcow2", sb->dir, id);
}

/* The newest checkpoint's name ("" for none): the parent of the next one. */
static void newest_name(struct sandbox *sb, char *out, size_t len)
{
	json_t *list = NULL, *arr;

	out[0] = '\0';
	if (store_checkpoint_list(sb->d->store, sb->id, &list))
		return;
	arr = json_object_get(list, "checkpoints");
	if (json_array_size(arr))
		snprintf(out, len, "%s",
		         json_string_value(json_object_get(
				 json_array_get(arr, json_array_size(arr) - 1), "name")));
	json_decref(list);
}

/* Freezes the layer as the checkpoint's file, a new layer over it; records it. */
static int swap_layers(struct sandbox *sb, struct ckpt_op *op, json_t **rec, char *err,
                       size_t errlen)
{
	struct img_create_opts o = {.backing = op->file, .backing_fmt = IMG_FMT_QCOW2};
	char parent[80], e[256] = "";
	json_t *ckpt, *priv;
	int rc;

	newest_name(sb, parent, sizeof(parent));
	if (rename(sb->layer, op->file) < 0) {
		snprintf(err, errlen, "cannot keep the layer: %s", strerror(errno));
		return -errno;
	}
	rc = img_create(sb->layer, &o, e, sizeof(e));
	if (rc) {
		if (rename(op->file, sb->layer) < 0)
			huskd_log(sb->id, "cannot put its layer back: %s", strerror(errno));
		snprintf(err, errlen, "cannot make a new layer: %s", e);
		return rc;
	}
	ckpt = json_pack("{ssssss}", "id", op->id, "name", op->name, "parent", parent);
	priv = json_pack("{ss}", "file", op->file);
	rc = store_checkpoint_insert(sb->d->store, sb->id, ckpt, priv);
	json_decref(ckpt);
	json_decref(priv);
	if (!rc)
		rc = store_checkpoint_get(sb->d->store, sb->id, op->id, rec, NULL);
	if (rc)
		snprintf(err, errlen, "cannot record the checkpoint");
	return rc;
}

static void create_resumed(struct sandbox *sb, int rc, const char *err, void *arg)
{
	struct ckpt_op *op = arg;

	/* The checkpoint exists either way; a failed resume is the sandbox's own problem. */
	if (rc)
		huskd_log(sb->id, "after its checkpoint it did not resume: %s", err);
	create_answer(sb, op);
}

static void create_paused(struct sandbox *sb, int rc, const char *err, void *arg)
{
	struct ckpt_op *op = arg;

	if (rc) {
		snprintf(op->err, sizeof(op->err), "%s", err);
		create_answer(sb, op);
		return;
	}
	rc = swap_layers(sb, op, &op->rec, op->err, sizeof(op->err));
	huskd_log(sb->id, "checkpoint %s (%s)%s", op->name, op->id, rc ? " failed" : "");
	if (!op->was_idle || sbx_unsuspend(sb, "resumed after a checkpoint", create_resumed, op))
		create_answer(sb, op);
}

struct sandbox *sbx_quiet(struct huskd *d, struct http_req *r, const char *id, const char *what)
{
	struct sandbox *sb = sbx_live(d, r, id);

	if (!sb)
		return NULL;
	if (sb->restoring || sb->pausing || sb->resuming || sb->current ||
	    !(sb->on_disk || (sb->ready && !strcmp(sb->status, "idle")))) {
		api_error(r, 409, "INVALID_STATE",
		          "sandbox %s is %s: %s while it is idle or paused; try again when its "
		          "command has finished",
		          id, sb->current ? "running a command" : sb->status, what);
		return NULL;
	}
	return sb;
}

static struct sandbox *ckpt_target(struct huskd *d, struct http_req *r, const char *id)
{
	return sbx_quiet(d, r, id, "checkpoints are made and restored");
}

static void synced(struct op *sop)
{
	struct huskd *d = sop->d;
	struct http_req *r = sop->r;
	const char *id = sop->sandbox;
	const char *name = json_string_value(sop->ctx);
	struct sandbox *sb;
	struct ckpt_op *op;
	int rc;

	if (sop->rc) {
		answer_agent_error(sop);
		return;
	}
	/* Again: another create of this name may have finished while the guest synced. */
	if (store_checkpoint_get(d->store, id, name, NULL, NULL) == 0) {
		api_error(r, 409, "CONFLICT", "sandbox %s already has a checkpoint named %s", id,
		          name);
		return;
	}
	sb = ckpt_target(d, r, id);
	if (!sb)
		return;
	op = calloc(1, sizeof(*op));
	if (!op || store_new_id("ckpt_", op->id)) {
		free(op);
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->r = r;
	snprintf(op->name, sizeof(op->name), "%s", name);
	ckpt_path(sb, op->id, op->file, sizeof(op->file));
	sb->restoring = true;
	op->was_idle = true;
	rc = sbx_suspend(sb, "paused for a checkpoint", create_paused, op);
	if (rc) {
		sb->restoring = false;
		free(op);
		api_error(r, 503, "UNAVAILABLE", "cannot checkpoint sandbox %s now: %s", id,
		          strerror(-rc));
	}
}

/*
 * What the guest wrote may still sit in its page cache, which is memory, not
 * disk: a sync in the guest first (resuming a paused sandbox for it), then
 * the pause and the swap.
 */
void sbx_checkpoint_create(struct huskd *d, struct http_req *r, const char *id, const char *name)
{
	struct op *op;

	if (store_checkpoint_get(d->store, id, name, NULL, NULL) == 0) {
		api_error(r, 409, "CONFLICT", "sandbox %s already has a checkpoint named %s", id,
		          name);
		return;
	}
	op = op_new(OP_EXEC, synced);
	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->req = json_pack("{sss[s]ss}", "op", "exec", "argv", "sync", "cwd", "/");
	op->ctx = json_string(name);
	op_submit(d, r, id, op);
}

/* Drops the layer and the checkpoints newer than the one restored, files and records. */
static void drop_newer(struct sandbox *sb, const char *keep_id)
{
	json_t *list = NULL, *c;
	bool newer = false;
	size_t i;

	unlink(sb->layer);
	if (store_checkpoint_list(sb->d->store, sb->id, &list))
		return;
	json_array_foreach(json_object_get(list, "checkpoints"), i, c)
	{
		const char *cid = json_string_value(json_object_get(c, "id"));
		char file[4096];

		if (newer) {
			ckpt_path(sb, cid, file, sizeof(file));
			unlink(file);
			if (store_checkpoint_delete(sb->d->store, sb->id, cid))
				huskd_log(sb->id, "cannot forget checkpoint %s", cid);
		}
		if (!strcmp(cid, keep_id))
			newer = true;
	}
	json_decref(list);
}

static void restore_ready(struct sandbox *sb, bool ready, void *arg)
{
	struct ckpt_op *op = arg;

	sb->restoring = false;
	if (ready)
		api_ok(op->r, 200, NULL);
	else
		api_error(op->r, 500, "INTERNAL", "sandbox %s did not come back from checkpoint %s",
		          sb->id, op->name);
	free(op);
}

/* Paused to disk (or was): the disk goes back, the memory is dropped, a fresh boot. */
static void restore_paused(struct sandbox *sb, int rc, const char *err, void *arg)
{
	struct ckpt_op *op = arg;
	struct img_create_opts o = {.backing = op->file, .backing_fmt = IMG_FMT_QCOW2};
	char e[256] = "", path[4200];

	if (rc) {
		sb->restoring = false;
		api_error(op->r, 500, "INTERNAL", "cannot restore sandbox %s: %s", sb->id, err);
		free(op);
		return;
	}
	drop_newer(sb, op->id);
	snprintf(path, sizeof(path), "%s/memory.snap", sb->dir);
	unlink(path);
	sb->on_disk = false;
	rc = img_create(sb->layer, &o, e, sizeof(e));
	if (rc || sbx_boot(sb, e, sizeof(e))) {
		huskd_log(sb->id, "checkpoint restore failed: %s", e);
		sb->restoring = false;
		api_error(op->r, 500, "INTERNAL", "cannot restore sandbox %s: %s", sb->id, e);
		free(op);
		sb->vmm_gone = true;
		sbx_end(sb, "failed", "its checkpoint restore failed", NULL);
		return;
	}
	huskd_log(sb->id, "restoring checkpoint %s (%s): booting on it", op->name, op->id);
	/* setup_done makes it idle and runs the waiters, this one first. */
	sbx_when_ready(sb, restore_ready, op);
}

void sbx_checkpoint_restore(struct huskd *d, struct http_req *r, const char *id, const char *ref)
{
	struct sandbox *sb = ckpt_target(d, r, id);
	json_t *ckpt = NULL;
	struct ckpt_op *op;
	int rc;

	if (!sb)
		return;
	if (store_checkpoint_get(d->store, id, ref, &ckpt, NULL)) {
		api_error(r, 404, "CHECKPOINT_NOT_FOUND", "sandbox %s has no checkpoint %s", id,
		          ref);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		json_decref(ckpt);
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->r = r;
	snprintf(op->id, sizeof(op->id), "%s", json_string_value(json_object_get(ckpt, "id")));
	snprintf(op->name, sizeof(op->name), "%s",
	         json_string_value(json_object_get(ckpt, "name")));
	json_decref(ckpt);
	ckpt_path(sb, op->id, op->file, sizeof(op->file));
	sb->restoring = true;
	if (sb->on_disk) {
		restore_paused(sb, 0, "", op);
		return;
	}
	rc = sbx_suspend(sb, "stopped to restore a checkpoint", restore_paused, op);
	if (rc) {
		sb->restoring = false;
		free(op);
		api_error(r, 503, "UNAVAILABLE", "cannot restore sandbox %s now: %s", id,
		          strerror(-rc));
	}
}
