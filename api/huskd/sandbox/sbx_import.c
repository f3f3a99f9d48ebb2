// SPDX-License-Identifier: MIT
/*
 * Imported runtimes (`husk runtime import`): an OCI or Docker image made a
 * runtime by husk-import. Each import is a small state machine:
 *
 *   UPLOADING --run--> CONVERTING --husk-import ends--> DONE | FAILED
 *
 * UPLOADING takes the archive in parts, each at the offset the last one
 * ended (none for a registry reference); CONVERTING runs husk-import, one at
 * a time, its steps relayed as progress (sbx_import_run.c); DONE has put
 * the runtime in the store and its image under state/runtimes. Either way
 * the work folder state/imports/<id> goes: nothing of a refused image is
 * left. Uploads left for an hour, and ended imports after an hour, are
 * dropped by the reaper; at start the folder is emptied.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sbx_import.h"
#include "sbx_int.h"

#define IMPORTS_MAX 8
#define IMPORT_IDLE_MS (3600 * 1000)
#define IMPORT_MAX_DEFAULT (16ull << 30)

static const char *const state_names[] = {
	[IMP_UPLOADING] = "uploading",
	[IMP_CONVERTING] = "converting",
	[IMP_DONE] = "done",
	[IMP_FAILED] = "failed",
};

uint64_t sbx_import_max(const struct sbx_mgr *m)
{
	return m->cfg.import_max_bytes ? m->cfg.import_max_bytes : IMPORT_MAX_DEFAULT;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void sbx_import_rm_tree(const char *dir)
{
	/* Depth first, links not followed, never past the folder's own file system. */
	nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

struct sbx_import *sbx_import_find(struct sbx_mgr *m, const char *id)
{
	for (struct sbx_import *i = m->imports; i; i = i->next)
		if (!strcmp(i->id, id))
			return i;
	return NULL;
}

/* name or name:tag, as registries spell them but without a host or '/'; ":latest" added. */
static int name_check(const char *in, char *out, size_t len, struct sbx_err *err)
{
	const char *colon = in ? strchr(in, ':') : NULL;
	size_t n = in ? strlen(in) : 0;
	size_t base = colon ? (size_t)(colon - in) : n;

	if (!n || n > 100 || base == 0 || !strchr("abcdefghijklmnopqrstuvwxyz0123456789", in[0]) ||
	    strspn(in, "abcdefghijklmnopqrstuvwxyz0123456789._-") != base ||
	    (colon && (!colon[1] || strspn(colon + 1, "abcdefghijklmnopqrstuvwxyz"
	                                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
	                                    strlen(colon + 1))))
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"name must be NAME or NAME:TAG (NAME: lowercase letters, digits, '.', "
			"'_', '-', up to 100 in all), e.g. myapp:1");
	snprintf(out, len, "%s%s", in, colon ? "" : ":latest");
	return 0;
}

static int source_check(json_t *src, struct sbx_err *err)
{
	const char *s = json_string_value(src);

	if (!src || json_is_null(src))
		return 0;
	if (!s || strncmp(s, "docker://", 9) || strlen(s) < 10 || strlen(s) > 1000 ||
	    strpbrk(s, " \t\r\n\"'\\$`"))
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"source must be a registry reference docker://HOST/NAME:TAG; a file "
			"or folder is uploaded instead (husk runtime import does that)");
	return 0;
}

/* Bytes free under the state folder beyond what huskd keeps free. */
static uint64_t room(const struct sbx_mgr *m)
{
	uint64_t keep = m->cfg.min_free_disk ? m->cfg.min_free_disk : 1ull << 30, avail;
	struct statvfs v;

	if (statvfs(m->cfg.state, &v) < 0)
		return 0;
	avail = (uint64_t)v.f_bavail * v.f_frsize;
	return avail > keep ? avail - keep : 0;
}

int sbx_import_init(struct sbx_mgr *m, json_t *body, json_t **out, struct sbx_err *err)
{
	json_t *size = json_object_get(body, "size"), *src = json_object_get(body, "source");
	char name[128];
	struct sbx_import *imp;
	unsigned n = 0;
	json_t *have = NULL;

	if (name_check(json_string_value(json_object_get(body, "name")), name, sizeof(name), err) ||
	    source_check(src, err))
		return -EINVAL;
	if (size && (!json_is_integer(size) || json_integer_value(size) < 0))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "size must be the archive's bytes");
	if (size && (uint64_t)json_integer_value(size) > sbx_import_max(m))
		return sbx_fail(err, SBX_TOO_LARGE, -EFBIG,
		                "the image is %lld bytes; huskd takes images up to %llu bytes "
		                "(huskd --import-max-bytes)",
		                (long long)json_integer_value(size),
		                (unsigned long long)sbx_import_max(m));
	if (size && (uint64_t)json_integer_value(size) > room(m))
		return sbx_fail(err, SBX_NO_SPACE, -ENOSPC,
		                "the state folder has %llu bytes to spare, not the %lld of the "
		                "image",
		                (unsigned long long)room(m), (long long)json_integer_value(size));
	if (!store_runtime_get(m->store, name, &have, NULL)) {
		json_decref(have);
		return sbx_fail(err, SBX_EXISTS, -EEXIST,
		                "a runtime named %s exists; delete it first (husk runtime delete "
		                "%s) or import under another name",
		                name, name);
	}
	for (imp = m->imports; imp; imp = imp->next) {
		n++;
		if (!strcmp(imp->name, name) && imp->state <= IMP_CONVERTING)
			return sbx_fail(err, SBX_EXISTS, -EEXIST,
			                "an import of %s is under way (%s)", name, imp->id);
	}
	if (n >= IMPORTS_MAX)
		return sbx_fail(err, SBX_FULL, -EBUSY,
		                "%u imports are under way or just ended; try again later", n);
	imp = calloc(1, sizeof(*imp));
	if (!imp || store_new_id("imp_", imp->id)) {
		free(imp);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	imp->m = m;
	imp->fd = -1;
	imp->declared = size ? (uint64_t)json_integer_value(size) : 0;
	imp->sized = size != NULL;
	snprintf(imp->name, sizeof(imp->name), "%s", name);
	snprintf(imp->source, sizeof(imp->source), "%s", src ? json_string_value(src) : "");
	snprintf(imp->dir, sizeof(imp->dir), "%s/imports/%s", m->cfg.state, imp->id);
	if (mkdir(imp->dir, 0700) < 0 ||
	    (!imp->source[0] &&
	     (imp->fd = open(sbx_import_file(imp), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) <
	             0)) {
		int rc = -errno;

		rmdir(imp->dir);
		free(imp);
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot make the import's folder: %s",
		                strerror(-rc));
	}
	imp->touched_ms = uv_now(m->loop);
	imp->next = m->imports;
	m->imports = imp;
	log_info(NULL, "import %s of %s begun%s%s", imp->id, name, imp->source[0] ? " from " : "",
	         imp->source);
	*out = json_pack("{s:s, s:s, s:s, s:I}", "importId", imp->id, "name", name, "status",
	                 state_names[imp->state], "maxBytes", (json_int_t)sbx_import_max(m));
	return 0;
}

const char *sbx_import_file(const struct sbx_import *imp)
{
	static __thread char path[4300];

	snprintf(path, sizeof(path), "%s/image.tar", imp->dir);
	return path;
}

struct part {
	uv_fs_t req;
	struct sbx_import *imp;
	size_t len;
	sbx_done_fn done;
	void *ctx;
};

static void part_written(uv_fs_t *req)
{
	struct part *p = req->data;
	struct sbx_import *imp = p->imp;
	ssize_t rc = req->result;
	struct sbx_err err;

	uv_fs_req_cleanup(req);
	imp->writing = false;
	imp->touched_ms = uv_now(imp->m->loop);
	if (rc < 0 || (size_t)rc != p->len) {
		sbx_fail(&err, rc == UV_ENOSPC ? SBX_NO_SPACE : SBX_INTERNAL, (int)rc,
		         "cannot keep the upload: %s",
		         rc < 0 ? uv_strerror((int)rc) : "short write");
		p->done(p->ctx, &err, NULL);
	} else {
		json_t *data;

		imp->received += p->len;
		data = json_pack("{s:s, s:I}", "importId", imp->id, "received",
		                 (json_int_t)imp->received);
		p->done(p->ctx, NULL, &(struct sbx_reply){.data = data});
		json_decref(data);
	}
	free(p);
	/* huskd stopped while the part was on its way (sbx_import_close left it to us). */
	if (imp->m->closing)
		sbx_import_free(imp);
}

void sbx_import_upload(struct sbx_mgr *m, const char *id, uint64_t offset, const void *bytes,
                       size_t len, sbx_done_fn done, void *ctx)
{
	struct sbx_import *imp = sbx_import_find(m, id);
	uint64_t max = sbx_import_max(m);
	struct sbx_err err;
	struct part *p;
	uv_buf_t buf;

	if (!imp) {
		sbx_fail(&err, SBX_NOT_FOUND, -ENOENT,
		         "import %s not found (it ended, or was left "
		         "for an hour)",
		         id);
	} else if (imp->source[0]) {
		sbx_fail(&err, SBX_STATE, -EINVAL,
		         "import %s pulls %s: it takes no upload; start it (POST .../run)", id,
		         imp->source);
	} else if (imp->state != IMP_UPLOADING || imp->fd < 0 || imp->writing) {
		sbx_fail(&err, SBX_STATE, -EBUSY, "import %s takes no upload now (%s%s)", id,
		         imp->writing ? "a part is being written; send one at a time" : "",
		         imp->writing ? "" : state_names[imp->state]);
	} else if (offset != imp->received) {
		sbx_fail(&err, SBX_STATE, -EINVAL,
		         "the upload of %s is at byte %llu; send the part that starts there "
		         "(?offset=%llu)",
		         id, (unsigned long long)imp->received, (unsigned long long)imp->received);
	} else if (!len) {
		sbx_fail(&err, SBX_BAD_INPUT, -EINVAL, "an upload part needs a body");
	} else if (len > max - imp->received ||
	           (imp->sized && imp->received + len > imp->declared)) {
		sbx_fail(&err, SBX_TOO_LARGE, -EFBIG, "the upload would pass %llu bytes (%s)",
		         (unsigned long long)(imp->sized && imp->declared < max ? imp->declared
		                                                                : max),
		         imp->sized && imp->declared < max ? "the size given at the start"
		                                           : "huskd --import-max-bytes");
	} else if (len > room(m)) {
		sbx_fail(&err, SBX_NO_SPACE, -ENOSPC, "the state folder's disk is full");
	} else if (!(p = calloc(1, sizeof(*p)))) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	} else {
		*p = (struct part){.imp = imp, .len = len, .done = done, .ctx = ctx};
		p->req.data = p;
		buf = uv_buf_init((char *)bytes, (unsigned)len);
		imp->writing = true;
		if (uv_fs_write(m->loop, &p->req, imp->fd, &buf, 1, (int64_t)offset,
		                part_written) == 0)
			return;
		imp->writing = false;
		free(p);
		sbx_fail(&err, SBX_INTERNAL, -EIO, "cannot write the upload");
	}
	done(ctx, &err, NULL);
}

int sbx_import_get(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
{
	struct sbx_import *imp = sbx_import_find(m, id);

	if (!imp)
		return sbx_fail(err, SBX_NOT_FOUND, -ENOENT, "import %s not found", id);
	*out = json_pack("{s:s, s:s, s:s, s:I, s:O*, s:s*, s:O*}", "importId", imp->id, "name",
	                 imp->name, "status", state_names[imp->state], "received",
	                 (json_int_t)imp->received, "progress", imp->last, "error",
	                 imp->state == IMP_FAILED ? imp->error : NULL, "runtime", imp->runtime);
	return *out ? 0 : sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
}

static void unlink_import(struct sbx_import *imp)
{
	struct sbx_import **pp = &imp->m->imports;

	while (*pp && *pp != imp)
		pp = &(*pp)->next;
	if (*pp)
		*pp = imp->next;
}

void sbx_import_free(struct sbx_import *imp)
{
	unlink_import(imp);
	if (imp->fd >= 0)
		close(imp->fd);
	json_decref(imp->last);
	json_decref(imp->runtime);
	free(imp);
}

void sbx_import_reap(struct sbx_mgr *m)
{
	uint64_t now = uv_now(m->loop);
	struct sbx_import *imp, *next;

	for (imp = m->imports; imp; imp = next) {
		next = imp->next;
		if (imp->state == IMP_CONVERTING || imp->writing ||
		    now - (uint64_t)imp->touched_ms < IMPORT_IDLE_MS)
			continue;
		if (imp->state == IMP_UPLOADING) {
			log_info(NULL, "import %s of %s: upload left for an hour, dropped", imp->id,
			         imp->name);
			sbx_import_rm_tree(imp->dir);
		}
		sbx_import_free(imp);
	}
}

void sbx_import_start(struct sbx_mgr *m)
{
	char path[4200];

	/* What an import under way when huskd last stopped left behind. */
	snprintf(path, sizeof(path), "%s/imports", m->cfg.state);
	sbx_import_rm_tree(path);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/runtimes", m->cfg.state);
	mkdir(path, 0755);
}

int sbx_runtime_delete(struct sbx_mgr *m, const char *ref, struct sbx_err *err)
{
	json_t *rt = NULL, *priv = NULL;
	int64_t sandboxes = 0, snapshots = 0;
	const char *id, *name, *path;
	int rc = store_runtime_get(m->store, ref, &rt, &priv);

	if (rc == -ENOENT)
		return sbx_fail(err, SBX_NOT_FOUND, rc, "runtime %s not found", ref);
	if (rc)
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot read runtime %s", ref);
	id = json_string_value(json_object_get(rt, "id"));
	name = json_string_value(json_object_get(rt, "name"));
	path = json_string_value(json_object_get(priv, "path"));
	if (!json_is_true(json_object_get(priv, "imported")))
		rc = sbx_fail(
			err, SBX_STATE, -EPERM,
			"runtime %s comes with husk (images/runtimes); only imported runtimes "
			"can be deleted",
			name);
	else if ((rc = store_runtime_users(m->store, id, name, &sandboxes, &snapshots)))
		sbx_fail(err, SBX_INTERNAL, rc, "cannot tell what uses runtime %s", name);
	else if (sandboxes || snapshots)
		rc = sbx_fail(err, SBX_STATE, -EBUSY,
		              "runtime %s is the base of %lld sandboxes and %lld snapshots; delete "
		              "them first",
		              name, (long long)sandboxes, (long long)snapshots);
	else if ((rc = store_runtime_delete(m->store, id)))
		sbx_fail(err, SBX_INTERNAL, rc, "cannot delete runtime %s", name);
	else if (path && unlink(path) < 0 && errno != ENOENT)
		log_warn(NULL, "runtime %s deleted, but not its image %s: %s", name, path,
		         strerror(errno));
	if (!rc)
		log_info(NULL, "runtime %s (%s) deleted", name, id);
	json_decref(rt);
	json_decref(priv);
	return rc;
}
