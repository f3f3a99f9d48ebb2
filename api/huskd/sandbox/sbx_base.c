// SPDX-License-Identifier: MIT
/* The base a new sandbox's layer goes on: a runtime from the catalog, or a snapshot. */
#include "sbx_base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img.h"
#include "sbx_int.h"

int sbx_base_find(struct sbx_mgr *m, json_t *body, struct sbx_base *b, struct sbx_err *err)
{
	const char *rt_name = json_string_value(json_object_get(body, "runtime"));
	const char *rt_id = json_string_value(json_object_get(body, "runtimeId"));
	json_t *snap = json_object_get(body, "snapshot");
	const char *rt_ref = rt_id ? rt_id : rt_name ? rt_name : "base:latest";

	*b = (struct sbx_base){0};
	if (snap) {
		if (!json_is_string(snap) || !json_string_length(snap))
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "snapshot must be a snapshot id, name, name:tag or tag (a "
			                "string)");
		if (rt_name || rt_id)
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "give either snapshot or runtime: a snapshot brings its "
			                "runtime");
		if (store_snapshot_find(m->store, sbx_info_org(body), json_string_value(snap),
		                        &b->snap, &b->snap_priv))
			return sbx_fail(
				err, SBX_BAD_INPUT, -ENOENT,
				"snapshot '%s' not found; GET /sandbox/snapshots lists them",
				json_string_value(snap));
		b->path = json_string_value(json_object_get(b->snap_priv, "disk"));
		rt_ref = json_string_value(json_object_get(b->snap, "runtimeId"));
		if (!b->path || access(b->path, R_OK) < 0) {
			sbx_fail(err, SBX_INTERNAL, -EIO, "snapshot '%s' has lost its disk image",
			         json_string_value(snap));
			sbx_base_free(b);
			return -EIO;
		}
	}
	if (!rt_ref || store_runtime_get(m->store, rt_ref, &b->rt, &b->rt_priv)) {
		sbx_fail(
			err, SBX_BAD_INPUT, -ENOENT,
			b->snap ? "the runtime '%s' of this snapshot is no longer in the catalog"
				: "runtime '%s' is not in the catalog; GET /sandbox/runtimes lists "
				  "them",
			rt_ref ? rt_ref : "(none)");
		sbx_base_free(b);
		return -ENOENT;
	}
	if (!b->snap)
		b->path = json_string_value(json_object_get(b->rt_priv, "path"));
	if (!b->path) {
		sbx_base_free(b);
		return sbx_fail(err, SBX_INTERNAL, -EIO, "the runtime has no image");
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

const char *sbx_base_memory(const struct sbx_base *b, uint64_t mem_mib, unsigned vcpus, bool net)
{
	json_t *p = b->snap_priv;
	const char *mem = json_string_value(json_object_get(p, "memory"));

	if (!mem || access(mem, R_OK) < 0)
		return NULL;
	/* A VM resumes only with the shape it was saved with. */
	if ((uint64_t)json_integer_value(json_object_get(p, "memMib")) != mem_mib ||
	    (unsigned)json_integer_value(json_object_get(p, "vcpus")) != vcpus)
		return NULL;
	/* Nor with another set of devices: a NIC, or none. */
	if (json_is_true(json_object_get(p, "network")) != net)
		return NULL;
	return mem;
}

void sbx_base_apply(struct sandbox *sb, const struct sbx_base *b, json_t *pub, json_t *priv)
{
	const char *sid = json_string_value(json_object_get(b->snap, "snapshotId"));
	bool pub_snap;

	free(sb->base); /* a warm VMM's, taken by a create: the same path */
	sb->base = strdup(b->path);
	json_object_set_new(priv, "base", json_string(b->path));
	if (!sid)
		return;
	snprintf(sb->base_snap, sizeof(sb->base_snap), "%s", sid);
	json_object_set_new(priv, "baseSnapshot", json_string(sid));
	pub_snap = json_is_true(json_object_get(b->snap, "public"));
	/* API.md §5.1 (3): a public one names its org, a private one its user. */
	json_object_set_new(
		pub, "snapshot",
		json_pack("{sssOsO*sbso}", "id", sid, "name", json_object_get(b->snap, "name"),
	                  "tag", json_object_get(b->snap, "tag"), "public", pub_snap,
	                  pub_snap ? "org" : "user",
	                  pub_snap ? json_pack("{ssss}", "id", sbx_info_org(b->snap), "name",
	                                       json_string_value(json_object_get(
						       json_object_get(b->snap, "org"), "name"))
	                                               ?: STORE_DEFAULT_ORG_NAME)
	                           : json_pack("{ss}", "id", "usr_local")));
}

static void memfile_made(struct sbx_mgr *m, int rc, const char *why, void *arg)
{
	char *sid = arg;

	(void)m;
	if (rc)
		log_warn(NULL, "no memory file for snapshot %s: %s (its sandboxes read its memory)",
		         sid, why);
	else
		log_info(NULL, "snapshot %s has a memory file: its sandboxes map its memory", sid);
	free(sid);
}

const char *sbx_base_memfile(struct sbx_mgr *m, const struct sbx_base *b, char *out, size_t len)
{
	const char *dir = json_string_value(json_object_get(b->snap_priv, "dir"));
	const char *mem = json_string_value(json_object_get(b->snap_priv, "memory"));
	const char *sid = json_string_value(json_object_get(b->snap, "snapshotId"));
	char err[256], *arg;

	if (!dir || !mem || !sid || !m->cfg.templates)
		return NULL;
	snprintf(out, len, "%s/memory.raw", dir);
	if (access(out, R_OK) == 0)
		return out;
	/* A template being made will need the tool uid for its own: this one waits. */
	if (m->making)
		return NULL;
	/* Made once, in the background, for the sandboxes after this one. */
	arg = strdup(sid);
	if (arg &&
	    sbx_memfile_make(m, mem, dir,
	                     (uint64_t)json_integer_value(json_object_get(b->snap_priv, "memMib")),
	                     memfile_made, arg, err, sizeof(err))) {
		log_debug(NULL, "snapshot %s: no memory file made now: %s", sid, err);
		free(arg);
	}
	return NULL;
}

int sbx_base_layer_size(const char *base, int64_t disk, uint64_t *size, char *err, size_t errlen)
{
	struct img *b;
	int rc = img_open(&b, base, IMG_FMT_QCOW2, IMG_RDONLY, err, errlen);

	if (rc)
		return rc;
	*size = img_size(b);
	(void)img_close(b);
	if (disk && (uint64_t)disk < *size) {
		snprintf(err, errlen, "resources.disk must be at least %llu MiB for this runtime",
		         (unsigned long long)(*size >> 20));
		return -ERANGE;
	}
	if (disk)
		*size = ((uint64_t)disk + 511) & ~511ull;
	return 0;
}
