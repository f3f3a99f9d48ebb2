// SPDX-License-Identifier: MIT
/*
 * Snapshots (API.md §5.8): a sandbox's disk frozen as a new read-only base in
 * state/snapshots/<id>/disk.qcow2, with its memory by default (memory.snap,
 * for warm starts: a sandbox from it resumes where the snapshot was taken
 * instead of booting). Taking one is a checkpoint whose frozen layer leaves
 * the sandbox's folder: the guest syncs, the sandbox pauses to disk, its
 * layer becomes the snapshot (flattened onto the sandbox's base when
 * checkpoints lie between), a new layer goes over it, and it resumes.
 * A deleted snapshot's files stay while a live sandbox or a kept child
 * snapshot is built on them (snap_gc removes them once nothing is).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img.h"
#include "sbx_int.h"
#include "sbx_pause.h"
#include "sbx_snap.h"

struct snap {
	struct sandbox *sb;
	char id[STORE_ID_LEN];
	json_t *body; /* name, tag, description, public, memory, and build extras */
	int64_t files;
	bool flatten; /* checkpoints lie between the layer and the base */
	bool memory;  /* keep the memory too */
	char dir[4096], disk[4200], mem[4200];
	json_t *rec; /* the SnapshotInfo, given to done once the sandbox runs again */
	sbx_snap_fn done;
	void *arg;
};

static void snap_end(struct snap *s, const struct sbx_err *err)
{
	s->done(s->sb, err ? NULL : s->rec, err, s->arg);
	json_decref(s->rec);
	json_decref(s->body);
	sbx_drop(s->sb);
	free(s);
}

/* Off the loop: the layer into the snapshot's folder (flattened), a new layer over it. */
static int freeze(struct sandbox *sb, void *arg, char *err, size_t errlen)
{
	struct snap *s = arg;
	char e[512] = "", src[4200];
	struct sbx_dkeys dk;
	struct img *img;
	int rc;

	if (mkdir(s->dir, 0700) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot make its folder: %s", strerror(-rc));
		return rc;
	}
	if (rename(sb->layer, s->disk) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot keep the layer: %s", strerror(-rc));
		rmdir(s->dir);
		return rc;
	}
	rc = 0;
	if (s->flatten && !sb->base) {
		snprintf(err, errlen, "the sandbox's base image is not recorded");
		rc = -EINVAL;
	} else if (s->flatten && !(rc = sbx_dkey_open(sb, s->disk, &dk, e, sizeof(e)))) {
		/* Its own images and those below, read and written through their keys. */
		rc = img_open_secrets(&img, s->disk, IMG_FMT_QCOW2, 0, &dk.set, e, sizeof(e));
		if (!rc) {
			int crc;

			rc = img_rebase_secrets(img, sb->base, IMG_FMT_QCOW2, 0, &dk.set, e,
			                        sizeof(e));
			crc = img_close(img);
			rc = rc ? rc : crc;
		}
		sbx_dkey_close(&dk);
	}
	if (rc && s->flatten && sb->base)
		snprintf(err, errlen, "cannot flatten the layer onto its base: %s", e);
	if (!rc) {
		rc = sbx_dkey_layer(sb, s->disk, 0, false, e, sizeof(e));
		if (rc)
			snprintf(err, errlen, "cannot make a new layer: %s", e);
	}
	if (rc) {
		/* The layer goes back as it was (a failed rebase leaves it readable). */
		if (rename(s->disk, sb->layer) < 0)
			snprintf(err, errlen, "cannot put its layer back: %s", strerror(errno));
		rmdir(s->dir);
		return rc;
	}
	/* The memory of the same instant; a hard link, as resuming unlinks the sandbox's. */
	snprintf(src, sizeof(src), "%s/memory.snap", sb->dir);
	if (s->memory && link(src, s->mem) < 0)
		s->memory = false;
	return 0;
}

/* The SnapshotInfo and private record of the frozen disk; records it. */
static int record(struct sandbox *sb, struct snap *s)
{
	json_t *b = s->body, *info, *priv, *rt = NULL;
	struct img *img;
	uint64_t size = 0;
	char e[256] = "";
	int rc;

	if (img_open(&img, s->disk, IMG_FMT_QCOW2, IMG_RDONLY, e, sizeof(e)) == 0) {
		size = img_allocated(img);
		(void)img_close(img);
	}
	if (store_sandbox_get(sb->m->store, sb->id, &rt, NULL))
		rt = NULL;
	info = json_pack("{s:s, s:O, s:O*, s:O*, s:I, s:I, s:b, s:s?, s:{s:s, s:n, s:n}, s:n}",
	                 "snapshotId", s->id, "name", json_object_get(b, "name"), "tag",
	                 json_object_get(b, "tag"), "description",
	                 json_object_get(b, "description"), "sizeBytes", (json_int_t)size,
	                 "fileCount", (json_int_t)s->files, "public",
	                 json_is_true(json_object_get(b, "public")), "parentSnapshotId",
	                 sb->base_snap[0] ? sb->base_snap : NULL, "user", "id", "usr_local",
	                 "firstName", "lastName", "userMetadata");
	if (info) {
		json_object_set_new(info, "sandboxId", json_string(sb->id));
		/* The sandbox's org owns it (a build's sandbox: the build's). */
		if (json_is_object(json_object_get(rt, "org")))
			json_object_set(info, "org", json_object_get(rt, "org"));
		json_object_set(info, "runtimeId",
		                json_object_get(json_object_get(rt, "runtime"), "id"));
		if (!json_object_get(info, "runtimeId"))
			json_object_set_new(info, "runtimeId", json_null());
	}
	priv = json_pack("{sssssIsI}", "dir", s->dir, "disk", s->disk, "memMib",
	                 (json_int_t)sb->mem_mib, "vcpus", (json_int_t)sb->vcpus);
	if (priv && s->memory)
		json_object_set_new(priv, "memory", json_string(s->mem));
	/* Its disk is the sandbox's layer, under the sandbox's key, over its base's images. */
	if (priv && sbx_dkey_any(sb)) {
		json_t *keys = sbx_dkey_snapshot(sb, s->disk, e, sizeof(e));

		if (!keys) {
			log_error(sb->id, "snapshot %s: its disk's keys: %s", s->id, e);
			json_decref(priv);
			priv = NULL;
		} else {
			json_object_set_new(priv, "diskKeys", keys);
		}
	}
	/* The memory is the sandbox's memory.snap of that instant: its key goes with it. */
	if (priv && s->memory && sb->mem_key)
		json_object_set_new(priv, "memKey", json_string(sb->mem_key));
	if (priv && sbx_has_nic(sb)) /* the device set a restore must match */
		json_object_set_new(priv, "network", json_true());
	/* What a build (sbx_build.c) adds: shown, and kept for children and rebuilds. */
	for (const char *const *k = (const char *const[]){"message", "userMetadata", "files", NULL};
	     info && *k; k++)
		if (json_object_get(b, *k))
			json_object_set(info, *k, json_object_get(b, *k));
	for (const char *const *k = (const char *const[]){"contentHash", "env", NULL}; priv && *k;
	     k++)
		if (json_object_get(b, *k))
			json_object_set(priv, *k, json_object_get(b, *k));
	rc = info && priv ? store_snapshot_insert(sb->m->store, info, priv) : -ENOMEM;
	if (!rc)
		rc = store_snapshot_get(sb->m->store, s->id, &s->rec, NULL);
	json_decref(rt);
	json_decref(info);
	json_decref(priv);
	return rc;
}

static void resumed(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	if (err && err->fault == SBX_ENDED)
		log_info(sb->id, "ended right after its snapshot: %s", err->msg);
	else if (err)
		log_error(sb->id, "after its snapshot it did not resume: %s", err->msg);
	snap_end(arg, NULL);
}

static void frozen(struct sandbox *sb, int rc, const char *why, void *arg)
{
	struct snap *s = arg;
	struct sbx_err err, rerr;

	if (!rc) {
		rc = record(sb, s);
		why = "cannot record the snapshot";
		if (!rc) {
			/* From now on its chain sits on the snapshot, across restarts too. */
			free(sb->base);
			sb->base = strdup(s->disk);
			snprintf(sb->base_snap, sizeof(sb->base_snap), "%s", s->id);
			sbx_save(sb, json_pack("{ssss}", "base", s->disk, "baseSnapshot", s->id));
		}
	}
	log_info(sb->id, "snapshot %s (%s)%s%s",
	         json_string_value(json_object_get(s->body, "name")), s->id, rc ? " failed: " : "",
	         rc ? why : "");
	if (rc)
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot snapshot sandbox %s: %s", sb->id,
		         why ? why : strerror(-rc));
	/* A build's sandbox ends right after: no need to wake it first. */
	if (json_is_true(json_object_get(s->body, "keepPaused")) ||
	    (sb->state != SBX_FREEZING && sb->state != SBX_PAUSED)) {
		snap_end(s, rc ? &err : NULL);
		return;
	}
	if (sbx_resume_start(sb, "resumed after a snapshot", &rerr)) {
		log_error(sb->id, "after its snapshot it did not resume: %s", rerr.msg);
		snap_end(s, rc ? &err : NULL);
	} else if (rc) {
		snap_end(s, &err);
	} else {
		sbx_when_ready(sb, resumed, s);
	}
}

int sbx_snap_take(struct sandbox *sb, const char *id, json_t *body, int64_t files, sbx_snap_fn done,
                  void *arg, struct sbx_err *err)
{
	struct snap *s = calloc(1, sizeof(*s));
	json_t *list = NULL;
	int rc;

	if (!s)
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->sb = sb;
	s->files = files;
	s->body = json_incref(body);
	s->done = done;
	s->arg = arg;
	/* Memory by default: sandboxes from it then resume instead of booting. */
	s->memory = !json_is_false(json_object_get(body, "memory"));
	if (!store_checkpoint_list(sb->m->store, sb->id, &list))
		s->flatten = json_array_size(json_object_get(list, "checkpoints")) > 0;
	json_decref(list);
	snprintf(s->dir, sizeof(s->dir), "%s/snapshots/%s", sb->m->cfg.state, s->id);
	snprintf(s->disk, sizeof(s->disk), "%s/disk.qcow2", s->dir);
	snprintf(s->mem, sizeof(s->mem), "%s/memory.snap", s->dir);
	sbx_hold(sb);
	rc = sbx_pause_start(sb,
	                     &(struct sbx_pause_plan){.reason = "paused for a snapshot",
	                                              .full = true, /* the snapshot keeps it */
	                                              .freeze = freeze,
	                                              .after = frozen,
	                                              .arg = s},
	                     err);
	if (rc) {
		json_decref(s->body);
		sbx_drop(sb);
		free(s);
	}
	return rc;
}

/* ---- POST /sandbox/{id}/snapshot ---- */

struct take {
	json_t *body;
	sbx_done_fn done;
	void *ctx;
};

static void taken(struct sandbox *sb, json_t *rec, const struct sbx_err *err, void *arg)
{
	struct take *t = arg;
	struct sbx_reply reply = {.data = rec};

	(void)sb;
	t->done(t->ctx, err, err ? NULL : &reply);
	json_decref(t->body);
	free(t);
}

/* The guest synced and counted its files: now the pause and the freeze. */
static void counted(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                    void *arg)
{
	struct take *t = arg;
	char id[STORE_ID_LEN], count[32] = "";
	struct sbx_err e;

	if (err) {
		taken(sb, NULL, err, t);
		return;
	}
	if (sb->state != SBX_IDLE) {
		sbx_fail(&e, SBX_STATE, -EBUSY,
		         "sandbox %s is %s: snapshots are taken while it is idle or paused", sb->id,
		         sb->exec ? "running a command" : sbx_state_name(sb->state));
		taken(sb, NULL, &e, t);
		return;
	}
	if (out->buf.len)
		snprintf(count, sizeof(count), "%.*s", (int)(out->buf.len < 31 ? out->buf.len : 31),
		         out->buf.data);
	if (store_new_id("snp_", id)) {
		sbx_fail(&e, SBX_UNAVAILABLE, -ENOMEM, "out of ids");
		taken(sb, NULL, &e, t);
		return;
	}
	if (sbx_snap_take(sb, id, t->body, strtoll(count, NULL, 10), taken, t, &e))
		taken(sb, NULL, &e, t);
}

void sbx_snap_create(struct sbx_mgr *m, const char *id, json_t *body, sbx_done_fn done, void *ctx)
{
	struct sbx_err err;
	struct sandbox *sb = sbx_lookup(m, id, &err);
	struct take *t;

	if (sb && sb->state != SBX_IDLE && sb->state != SBX_PAUSED) {
		sbx_fail(&err, SBX_STATE, -EBUSY,
		         "sandbox %s is %s: snapshots are taken while it is idle or paused; try "
		         "again when its command has finished",
		         id, sb->exec ? "running a command" : sbx_state_name(sb->state));
		sb = NULL;
	}
	t = sb ? calloc(1, sizeof(*t)) : NULL;
	if (!t) {
		if (sb)
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	*t = (struct take){.body = json_incref(body), .done = done, .ctx = ctx};
	/* The page cache to disk first; the file count is what the snapshot reports. */
	sbx_run(sb,
	        json_pack("[sss]", "sh", "-c", "sync; find / -xdev -type f 2>/dev/null | wc -l"),
	        NULL, 64, counted, t);
}
