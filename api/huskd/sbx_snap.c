// SPDX-License-Identifier: MIT
/*
 * Snapshots (API.md §5.8): a sandbox's disk frozen as a new read-only base in
 * state/snapshots/<id>/disk.qcow2, optionally with its memory (memory.snap,
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

#include "agentop.h"
#include "img.h"
#include "json_resp.h"
#include "sbx_priv.h"

struct snap_op {
	char id[STORE_ID_LEN];
	json_t *body; /* name, tag, description, public, memory, and build extras */
	int64_t files;
	char dir[4096], disk[4200];
	json_t *rec; /* the SnapshotInfo, given to done once the sandbox runs again */
	char err[512];
	sbx_snap_done_fn done;
	void *arg;
};

static void op_done(struct sandbox *sb, struct snap_op *op)
{
	sb->restoring = false;
	op->done(sb, op->rec, op->err, op->arg);
	json_decref(op->rec);
	json_decref(op->body);
	free(op);
}

/* The frozen layer as a file of its own: onto base if checkpoints lie between. */
static int flatten(struct sandbox *sb, const char *disk, char *err, size_t errlen)
{
	json_t *list = NULL;
	struct img *img;
	char e[256] = "";
	size_t n;
	int rc;

	if (store_checkpoint_list(sb->d->store, sb->id, &list))
		return -EIO;
	n = json_array_size(json_object_get(list, "checkpoints"));
	json_decref(list);
	if (n == 0)
		return 0; /* the layer already sits right on the base */
	if (!sb->base) {
		snprintf(err, errlen, "the sandbox's base image is not recorded");
		return -EINVAL;
	}
	rc = img_open(&img, disk, IMG_FMT_QCOW2, 0, e, sizeof(e));
	if (!rc) {
		rc = img_rebase(img, sb->base, IMG_FMT_QCOW2, 0, e, sizeof(e));
		int crc = img_close(img);
		rc = rc ? rc : crc;
	}
	if (rc)
		snprintf(err, errlen, "cannot flatten the layer onto its base: %s", e);
	return rc;
}

/* The SnapshotInfo and private record of the frozen disk; records it. */
static int record(struct sandbox *sb, struct snap_op *op, const char *memory)
{
	json_t *b = op->body, *info, *priv, *rt = NULL;
	struct img *img;
	uint64_t size = 0;
	char e[256] = "";
	int rc;

	if (img_open(&img, op->disk, IMG_FMT_QCOW2, IMG_RDONLY, e, sizeof(e)) == 0) {
		size = img_allocated(img);
		(void)img_close(img);
	}
	if (store_sandbox_get(sb->d->store, sb->id, &rt, NULL))
		rt = NULL;
	info = json_pack("{s:s, s:O, s:O*, s:O*, s:I, s:I, s:b, s:s?, s:{s:s, s:n, s:n}, s:n}",
	                 "snapshotId", op->id, "name", json_object_get(b, "name"), "tag",
	                 json_object_get(b, "tag"), "description",
	                 json_object_get(b, "description"), "sizeBytes", (json_int_t)size,
	                 "fileCount", (json_int_t)op->files, "public",
	                 json_is_true(json_object_get(b, "public")), "parentSnapshotId",
	                 sb->base_snap[0] ? sb->base_snap : NULL, "user", "id", "usr_local",
	                 "firstName", "lastName", "userMetadata");
	if (info) {
		json_object_set_new(info, "sandboxId", json_string(sb->id));
		json_object_set(info, "runtimeId",
		                json_object_get(json_object_get(rt, "runtime"), "id"));
		if (!json_object_get(info, "runtimeId"))
			json_object_set_new(info, "runtimeId", json_null());
	}
	priv = json_pack("{sssssIsI}", "dir", op->dir, "disk", op->disk, "memMib",
	                 (json_int_t)sb->mem_mib, "vcpus", (json_int_t)sb->vcpus);
	if (priv && memory)
		json_object_set_new(priv, "memory", json_string(memory));
	/* What a build (sbx_build.c) adds: shown, and kept for children and rebuilds. */
	for (const char *const *k = (const char *const[]){"message", "userMetadata", "files", NULL};
	     info && *k; k++)
		if (json_object_get(b, *k))
			json_object_set(info, *k, json_object_get(b, *k));
	for (const char *const *k = (const char *const[]){"contentHash", "env", NULL}; priv && *k;
	     k++)
		if (json_object_get(b, *k))
			json_object_set(priv, *k, json_object_get(b, *k));
	rc = info && priv ? store_snapshot_insert(sb->d->store, info, priv) : -ENOMEM;
	if (!rc)
		rc = store_snapshot_get(sb->d->store, op->id, &op->rec, NULL);
	json_decref(rt);
	json_decref(info);
	json_decref(priv);
	return rc;
}

/* From now on the sandbox's chain sits on the snapshot: remembered across restarts. */
static void rebase_sandbox(struct sandbox *sb, struct snap_op *op)
{
	json_t *priv = json_pack("{ssss}", "base", op->disk, "baseSnapshot", op->id);

	free(sb->base);
	sb->base = strdup(op->disk);
	snprintf(sb->base_snap, sizeof(sb->base_snap), "%s", op->id);
	if (!priv || store_sandbox_update(sb->d->store, sb->id, NULL, priv, NULL))
		huskd_log(sb->id, "cannot record its new base %s", op->id);
	json_decref(priv);
}

/* Paused to disk: freeze the layer into the snapshot's folder, a new layer over it. */
static int freeze(struct sandbox *sb, struct snap_op *op)
{
	struct img_create_opts o = {.backing = op->disk, .backing_fmt = IMG_FMT_QCOW2};
	char e[256] = "", mem[4200], src[4200];
	/* Memory by default: sandboxes from it then resume instead of booting. */
	bool want_mem = !json_is_false(json_object_get(op->body, "memory"));
	int rc;

	if (mkdir(op->dir, 0700) < 0) {
		snprintf(op->err, sizeof(op->err), "cannot make its folder: %s", strerror(errno));
		return -errno;
	}
	if (rename(sb->layer, op->disk) < 0) {
		snprintf(op->err, sizeof(op->err), "cannot keep the layer: %s", strerror(errno));
		rc = -errno;
		rmdir(op->dir);
		return rc;
	}
	rc = flatten(sb, op->disk, op->err, sizeof(op->err));
	if (!rc) {
		rc = img_create(sb->layer, &o, e, sizeof(e));
		if (rc)
			snprintf(op->err, sizeof(op->err), "cannot make a new layer: %s", e);
	}
	if (rc) {
		/* The layer goes back as it was (a failed rebase leaves it readable). */
		if (rename(op->disk, sb->layer) < 0)
			huskd_log(sb->id, "cannot put its layer back: %s", strerror(errno));
		rmdir(op->dir);
		return rc;
	}
	/* The memory of the same instant; a hard link, as resuming unlinks the sandbox's. */
	snprintf(src, sizeof(src), "%s/memory.snap", sb->dir);
	snprintf(mem, sizeof(mem), "%s/memory.snap", op->dir);
	if (want_mem && link(src, mem) < 0) {
		huskd_log(sb->id, "snapshot %s without memory: cannot link %s: %s", op->id, src,
		          strerror(errno));
		want_mem = false;
	}
	rc = record(sb, op, want_mem ? mem : NULL);
	if (rc) {
		snprintf(op->err, sizeof(op->err), "cannot record the snapshot");
		return rc; /* the sandbox runs on the frozen file; it stays */
	}
	rebase_sandbox(sb, op);
	return 0;
}

static void resumed(struct sandbox *sb, int rc, const char *err, void *arg)
{
	if (rc)
		huskd_log(sb->id, "after its snapshot it did not resume: %s", err);
	op_done(sb, arg);
}

static void paused(struct sandbox *sb, int rc, const char *err, void *arg)
{
	struct snap_op *op = arg;

	if (rc) {
		snprintf(op->err, sizeof(op->err), "%s", err);
		op_done(sb, op);
		return;
	}
	rc = freeze(sb, op);
	huskd_log(sb->id, "snapshot %s (%s)%s%s",
	          json_string_value(json_object_get(op->body, "name")), op->id,
	          rc ? " failed: " : "", rc ? op->err : "");
	/* A build's sandbox ends right after: no need to wake it first. */
	if (json_is_true(json_object_get(op->body, "keepPaused")) ||
	    sbx_unsuspend(sb, "resumed after a snapshot", resumed, op))
		op_done(sb, op);
}

int sbx_snapshot_take(struct sandbox *sb, const char *id, json_t *body, int64_t files,
                      sbx_snap_done_fn done, void *arg)
{
	struct snap_op *op = calloc(1, sizeof(*op));
	char parent[4096];
	int rc;

	if (!op)
		return -ENOMEM;
	snprintf(op->id, sizeof(op->id), "%s", id);
	op->files = files;
	op->body = json_incref(body);
	op->done = done;
	op->arg = arg;
	snprintf(op->dir, sizeof(op->dir), "%s/snapshots/%s", sb->d->state, op->id);
	snprintf(op->disk, sizeof(op->disk), "%s/disk.qcow2", op->dir);
	snprintf(parent, sizeof(parent), "%s/snapshots", sb->d->state);
	mkdir(parent, 0700);
	sb->restoring = true;
	rc = sbx_suspend(sb, "paused for a snapshot", paused, op);
	if (rc) {
		sb->restoring = false;
		json_decref(op->body);
		free(op);
	}
	return rc;
}

static void answer(struct sandbox *sb, json_t *rec, const char *err, void *arg)
{
	if (rec)
		api_ok(arg, 201, json_incref(rec));
	else
		api_error(arg, 500, "INTERNAL", "cannot snapshot sandbox %s: %s", sb->id, err);
}

static void synced(struct op *sop)
{
	struct sandbox *sb;
	char count[32] = "", id[STORE_ID_LEN];
	int rc;

	if (sop->rc) {
		answer_agent_error(sop);
		return;
	}
	sb = sbx_quiet(sop->d, sop->r, sop->sandbox, "snapshots are taken");
	if (!sb)
		return;
	if (sop->fd >= 0 && pread(sop->fd, count, sizeof(count) - 1, 0) <= 0)
		count[0] = '\0';
	rc = store_new_id("snp_", id);
	if (!rc)
		rc = sbx_snapshot_take(sb, id, sop->ctx, strtoll(count, NULL, 10), answer, sop->r);
	if (rc)
		api_error(sop->r, 503, "UNAVAILABLE", "cannot snapshot sandbox %s now: %s",
		          sop->sandbox, strerror(-rc));
}

/* body: checked by the handler (name, tag, description, public, memory). */
void sbx_snapshot_create(struct huskd *d, struct http_req *r, const char *id, json_t *body)
{
	struct op *op = op_new(OP_EXEC, synced);

	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	/* The page cache to disk first; the file count is what the snapshot reports. */
	op->req = json_pack("{sss[sss]ss}", "op", "exec", "argv", "sh", "-c",
	                    "sync; find / -xdev -type f 2>/dev/null | wc -l", "cwd", "/");
	op->ctx = json_incref(body);
	op_submit(d, r, id, op);
}

/* Removes the folders of deleted snapshots nothing is built on any more. */
void snap_gc(struct huskd *d)
{
	json_t *list = NULL, *s;
	size_t i;
	bool again = true;

	/* Purging a child can free its parent: until nothing changes. */
	for (int round = 0; again && round < 64; round++) {
		again = false;
		if (store_snapshot_unused(d->store, &list))
			return;
		json_array_foreach(list, i, s)
		{
			json_t *priv = json_object_get(s, "private");
			const char *id = json_string_value(json_object_get(s, "id"));
			const char *dir = json_string_value(json_object_get(priv, "dir"));
			static const char *const files[] = {"disk.qcow2", "memory.snap"};
			char path[4200];

			for (size_t k = 0; dir && k < sizeof(files) / sizeof(files[0]); k++) {
				snprintf(path, sizeof(path), "%s/%s", dir, files[k]);
				unlink(path);
			}
			if (dir && rmdir(dir) < 0 && errno != ENOENT)
				huskd_log(NULL, "snapshot %s: cannot remove %s: %s", id, dir,
				          strerror(errno));
			if (store_snapshot_purge(d->store, id) == 0) {
				huskd_log(NULL,
				          "snapshot %s: files removed (deleted, no longer used)",
				          id);
				again = true;
			}
		}
		json_decref(list);
		list = NULL;
	}
}

int sbx_base_find(struct huskd *d, json_t *body, struct sbx_base *b, char *err, size_t errlen)
{
	const char *rt_name = json_string_value(json_object_get(body, "runtime"));
	const char *rt_id = json_string_value(json_object_get(body, "runtimeId"));
	json_t *snap = json_object_get(body, "snapshot");
	const char *rt_ref = rt_id ? rt_id : rt_name ? rt_name : "base:latest";

	*b = (struct sbx_base){0};
	if (snap) {
		if (!json_is_string(snap) || !json_string_length(snap)) {
			snprintf(
				err, errlen,
				"snapshot must be a snapshot id, name, name:tag or tag (a string)");
			return 400;
		}
		if (rt_name || rt_id) {
			snprintf(err, errlen,
			         "give either snapshot or runtime: a snapshot brings its runtime");
			return 400;
		}
		if (store_snapshot_find(d->store, json_string_value(snap), &b->snap,
		                        &b->snap_priv)) {
			snprintf(err, errlen,
			         "snapshot '%s' not found; GET /sandbox/snapshots lists them",
			         json_string_value(snap));
			return 400;
		}
		b->path = json_string_value(json_object_get(b->snap_priv, "disk"));
		rt_ref = json_string_value(json_object_get(b->snap, "runtimeId"));
		if (!b->path || access(b->path, R_OK) < 0) {
			snprintf(err, errlen, "snapshot '%s' has lost its disk image",
			         json_string_value(snap));
			sbx_base_free(b);
			return 500;
		}
	}
	if (!rt_ref || store_runtime_get(d->store, rt_ref, &b->rt, &b->rt_priv)) {
		snprintf(err, errlen,
		         b->snap ? "the runtime '%s' of this snapshot is no longer in the catalog"
		                 : "runtime '%s' is not in the catalog; GET /sandbox/runtimes "
		                   "lists them",
		         rt_ref ? rt_ref : "(none)");
		sbx_base_free(b);
		return 400;
	}
	if (!b->snap)
		b->path = json_string_value(json_object_get(b->rt_priv, "path"));
	if (!b->path) {
		snprintf(err, errlen, "the runtime has no image");
		sbx_base_free(b);
		return 500;
	}
	return 0;
}

void sbx_base_free(struct sbx_base *b)
{
	json_decref(b->rt);
	json_decref(b->rt_priv);
	json_decref(b->snap);
	json_decref(b->snap_priv);
	*b = (struct sbx_base){0};
}

const char *sbx_base_memory(const struct sbx_base *b, uint64_t mem_mib, unsigned vcpus)
{
	json_t *p = b->snap_priv;
	const char *mem = json_string_value(json_object_get(p, "memory"));

	if (!mem || access(mem, R_OK) < 0)
		return NULL;
	/* A VM resumes only with the shape it was saved with. */
	if ((uint64_t)json_integer_value(json_object_get(p, "memMib")) != mem_mib ||
	    (unsigned)json_integer_value(json_object_get(p, "vcpus")) != vcpus)
		return NULL;
	return mem;
}

void sbx_base_apply(struct sandbox *sb, const struct sbx_base *b, json_t *pub, json_t *priv)
{
	const char *sid = json_string_value(json_object_get(b->snap, "snapshotId"));

	sb->base = strdup(b->path);
	json_object_set_new(priv, "base", json_string(b->path));
	if (!sid)
		return;
	snprintf(sb->base_snap, sizeof(sb->base_snap), "%s", sid);
	json_object_set_new(priv, "baseSnapshot", json_string(sid));
	bool pub_snap = json_is_true(json_object_get(b->snap, "public"));
	/* API.md §5.1 (3): a public one names its org, a private one its user. */
	json_object_set_new(
		pub, "snapshot",
		json_pack("{sssOsO*sbso}", "id", sid, "name", json_object_get(b->snap, "name"),
	                  "tag", json_object_get(b->snap, "tag"), "public", pub_snap,
	                  pub_snap ? "org" : "user",
	                  pub_snap ? json_pack("{ssss}", "id", "org_local", "name", "local")
	                           : json_pack("{ss}", "id", "usr_local")));
}

int sbx_snapshot_delete(struct huskd *d, const char *ref, json_t **out)
{
	json_t *info = NULL, *priv = NULL, *users;
	const char *dir, *from;
	char id[STORE_ID_LEN];
	bool kept;
	int rc;

	*out = NULL;
	rc = store_snapshot_find(d->store, ref, &info, &priv);
	if (rc)
		return rc;
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(info, "snapshotId")));
	rc = store_snapshot_delete(d->store, id);
	if (!rc)
		snap_gc(d);
	dir = json_string_value(json_object_get(priv, "dir"));
	from = json_string_value(json_object_get(info, "sandboxId"));
	kept = !rc && dir && access(dir, F_OK) == 0;
	users = json_array();
	for (struct sandbox *sb = d->sandboxes; kept && sb; sb = sb->next)
		if (!sb->ending && (!strcmp(sb->base_snap, id) || (from && !strcmp(sb->id, from))))
			json_array_append_new(users, json_string(sb->id));
	if (!rc)
		*out = json_pack("{sssbsbsoss}", "snapshotId", id, "deleted", 1, "filesKept", kept,
		                 "usedBy", users, "message",
		                 kept ? "deleted; its files are kept while sandboxes or snapshots "
		                        "built on it exist, and go with the last of them"
		                      : "deleted; its files are removed");
	else
		json_decref(users);
	json_decref(info);
	json_decref(priv);
	return rc;
}
