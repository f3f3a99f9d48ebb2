// SPDX-License-Identifier: MIT
/* Snapshots and disk checkpoints in the state store. */
#include <errno.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

static int add_snap(struct store *s, const char *id, const char *name, const char *tag,
                    const char *parent, const char *sandbox, json_int_t size)
{
	json_t *info = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:I, s:i, s:b, s:n, s:[{s:s}]}",
	                         "snapshotId", id, "name", name, "tag", tag, "parentSnapshotId",
	                         parent, "sandboxId", sandbox, "sizeBytes", size, "fileCount", 3,
	                         "public", 0, "userMetadata", "files", "path", "package.json");
	int ret = store_snapshot_insert(s, info, NULL);

	json_decref(info);
	return ret;
}

/* The id of what ref resolves to, or "ENOENT" and the like. */
static const char *found(struct store *s, const char *ref)
{
	static char buf[STORE_ID_LEN];
	json_t *info;
	int ret = store_snapshot_find(s, STORE_DEFAULT_ORG, ref, &info, NULL);

	if (ret < 0)
		return ret == -ENOENT ? "ENOENT" : "error";
	snprintf(buf, sizeof(buf), "%s", tstore_str(info, "snapshotId"));
	json_decref(info);
	return buf;
}

UNIT_TEST(store_snapshot_crud_tags_and_find)
{
	struct store *s = tstore_open("snap.db");
	json_t *info, *patch;

	CHECK(s);
	CHECK(add_snap(s, "snp_a", "bun-zod", "latest", NULL, "sbx_1", 100) == 0);
	CHECK(store_snapshot_get(s, "snp_a", &info, NULL) == 0);
	/* The shape GET /sandbox/snapshots/{id} answers with. */
	CHECK(!strcmp(tstore_str(info, "name"), "bun-zod"));
	CHECK(!strcmp(tstore_str(info, "tag"), "latest"));
	CHECK(tstore_int(info, "sizeBytes") == 100 && tstore_int(info, "fileCount") == 3);
	CHECK(!strcmp(tstore_str(info, "createdAt"), "2026-05-01T12:00:00.000Z"));
	CHECK(json_is_null(json_object_get(info, "userMetadata")));
	CHECK(json_array_size(json_object_get(info, "files")) == 1);
	CHECK(!json_object_get(info, "deleted"));
	json_decref(info);
	CHECK(add_snap(s, "snp_a", "dup", NULL, NULL, NULL, 1) == -EEXIST);
	info = json_pack("{s:s, s:s}", "snapshotId", "snp_nosize", "name", "x");
	CHECK(store_snapshot_insert(s, info, NULL) == -EINVAL);
	json_decref(info);

	/* A second "latest" of the name takes the tag. */
	tstore_now += 1000;
	CHECK(add_snap(s, "snp_b", "bun-zod", "latest", "snp_a", "sbx_1", 200) == 0);
	CHECK(store_snapshot_get(s, "snp_a", &info, NULL) == 0);
	CHECK(!json_object_get(info, "tag"));
	json_decref(info);
	CHECK(!strcmp(found(s, "snp_a"), "snp_a"));
	CHECK(!strcmp(found(s, "bun-zod:latest"), "snp_b"));
	CHECK(!strcmp(found(s, "@local/bun-zod:latest"), "snp_b"));
	CHECK(!strcmp(found(s, "bun-zod"), "snp_b")); /* the newest of the name */
	CHECK(!strcmp(found(s, "nothing"), "ENOENT"));

	patch = json_pack("{s:s}", "tag", "v1");
	CHECK(store_snapshot_update(s, "snp_a", patch, NULL, &info) == 0);
	CHECK(!strcmp(tstore_str(info, "tag"), "v1"));
	json_decref(info);
	json_decref(patch);
	CHECK(!strcmp(found(s, "v1"), "snp_a")); /* a bare tag */
	patch = json_pack("{s:n}", "tag");
	CHECK(store_snapshot_update(s, "snp_b", patch, NULL, NULL) == 0);
	json_decref(patch);
	CHECK(!strcmp(found(s, "bun-zod:latest"), "ENOENT"));
	patch = json_pack("{s:s}", "snapshotId", "snp_z");
	CHECK(store_snapshot_update(s, "snp_b", patch, NULL, NULL) == -EINVAL);
	json_decref(patch);
	patch = json_pack("{s:n}", "name");
	CHECK(store_snapshot_update(s, "snp_b", patch, NULL, NULL) == -EINVAL);
	json_decref(patch);
	CHECK(store_snapshot_update(s, "snp_missing", NULL, NULL, NULL) == -ENOENT);

	CHECK(store_snapshot_delete(s, "snp_a") == 0);
	CHECK(store_snapshot_delete(s, "snp_a") == -ENOENT);
	CHECK(store_snapshot_get(s, "snp_a", &info, NULL) == -ENOENT);
	CHECK(!strcmp(found(s, "v1"), "ENOENT"));
	/* Its name:tag is free again. */
	CHECK(add_snap(s, "snp_c", "bun-zod", "v1", NULL, NULL, 1) == 0);
	CHECK(!tstore_log()[0]);
	store_close(s);
}

/* The snapshotIds of a list, comma-separated. */
static const char *ids(json_t *list, const char *key)
{
	static char buf[256];
	json_t *item;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(json_object_get(list, key), i, item)
	{
		strcat(buf, i ? "," : "");
		strcat(buf, tstore_str(item, "snapshotId"));
	}
	return buf;
}

UNIT_TEST(store_snapshot_list_and_lineage)
{
	struct store *s = tstore_open("snap_list.db");
	struct store_snapshot_filter f = {0};
	json_t *list, *patch;

	CHECK(s);
	CHECK(add_snap(s, "snp_1", "root", NULL, NULL, "sbx_1", 300) == 0);
	tstore_now += 1;
	CHECK(add_snap(s, "snp_2", "mid", NULL, "snp_1", "sbx_2", 100) == 0);
	tstore_now += 1;
	CHECK(add_snap(s, "snp_3", "top", NULL, "snp_2", "sbx_1", 200) == 0);
	patch = json_pack("{s:b}", "public", 1);
	CHECK(store_snapshot_update(s, "snp_2", patch, NULL, NULL) == 0);
	json_decref(patch);

	CHECK(store_snapshot_list(s, &f, &list) == 0);
	CHECK(!strcmp(ids(list, "snapshots"), "snp_3,snp_2,snp_1") &&
	      tstore_int(list, "total") == 3);
	json_decref(list);
	f = (struct store_snapshot_filter){
		.sort = "size", .ascending = true, .limit = 2, .offset = 1};
	CHECK(store_snapshot_list(s, &f, &list) == 0);
	CHECK(!strcmp(ids(list, "snapshots"), "snp_3,snp_1") && tstore_int(list, "total") == 3);
	json_decref(list);
	f = (struct store_snapshot_filter){.sandbox_id = "sbx_1"};
	CHECK(store_snapshot_list(s, &f, &list) == 0);
	CHECK(!strcmp(ids(list, "snapshots"), "snp_3,snp_1") && tstore_int(list, "total") == 2);
	json_decref(list);
	f = (struct store_snapshot_filter){.public_only = true};
	CHECK(store_snapshot_list(s, &f, &list) == 0);
	CHECK(!strcmp(ids(list, "snapshots"), "snp_2"));
	json_decref(list);
	f = (struct store_snapshot_filter){.sort = "bogus"};
	CHECK(store_snapshot_list(s, &f, &list) == -EINVAL);

	CHECK(store_snapshot_lineage(s, "snp_3", 0, &list) == 0);
	CHECK(!strcmp(ids(list, "lineage"), "snp_3,snp_2,snp_1") && tstore_int(list, "total") == 3);
	CHECK(json_is_false(
		json_object_get(json_array_get(json_object_get(list, "lineage"), 0), "public")));
	json_decref(list);
	/* Deleted ancestors stay in the lineage, marked. */
	CHECK(store_snapshot_delete(s, "snp_2") == 0);
	CHECK(store_snapshot_lineage(s, "snp_3", 2, &list) == 0);
	CHECK(!strcmp(ids(list, "lineage"), "snp_3,snp_2") && tstore_int(list, "total") == 3);
	CHECK(json_is_true(
		json_object_get(json_array_get(json_object_get(list, "lineage"), 1), "deleted")));
	json_decref(list);
	CHECK(store_snapshot_lineage(s, "snp_2", 0, &list) == -ENOENT);

	/* A parent loop (damaged data) ends in an error, not a hang. */
	CHECK(add_snap(s, "snp_x", "x", NULL, "snp_y", NULL, 1) == 0);
	CHECK(add_snap(s, "snp_y", "y", NULL, "snp_x", NULL, 1) == 0);
	CHECK(store_snapshot_lineage(s, "snp_x", 5, &list) == -EIO);
	CHECK(strstr(tstore_log(), "loop"));
	store_close(s);
}

UNIT_TEST(store_checkpoints)
{
	struct store *s = tstore_open("ckpt.db");
	char sbx[STORE_ID_LEN], other[STORE_ID_LEN];
	json_t *c, *list, *priv;

	CHECK(s);
	CHECK(tstore_sandbox(s, "x", sbx) == 0);
	CHECK(tstore_sandbox(s, "y", other) == 0);
	c = json_pack("{s:s, s:s}", "id", "ckpt_1", "name", "before-upgrade");
	priv = json_pack("{s:s}", "layer", "/var/lib/husk/ckpt_1.qcow2");
	CHECK(store_checkpoint_insert(s, sbx, c, priv) == 0);
	json_decref(priv);
	json_decref(c);
	tstore_now += 10;
	c = json_pack("{s:s, s:s, s:s}", "id", "ckpt_2", "name", "after", "parent",
	              "before-upgrade");
	CHECK(store_checkpoint_insert(s, sbx, c, NULL) == 0);
	json_decref(c);
	c = json_pack("{s:s, s:s}", "id", "ckpt_3", "name", "after");
	CHECK(store_checkpoint_insert(s, sbx, c, NULL) == -EEXIST);
	CHECK(store_checkpoint_insert(s, "sbx_missing", c, NULL) == -ENOENT);
	CHECK(store_checkpoint_insert(s, other, c, NULL) == 0); /* names are per sandbox */
	json_decref(c);

	CHECK(store_checkpoint_get(s, sbx, "before-upgrade", &c, &priv) == 0);
	CHECK(!strcmp(tstore_str(c, "id"), "ckpt_1"));
	CHECK(!strcmp(tstore_str(c, "parent"), ""));
	CHECK(!strcmp(tstore_str(c, "createdAt"), "2026-05-01T12:00:00.000Z"));
	CHECK(!strcmp(tstore_str(priv, "layer"), "/var/lib/husk/ckpt_1.qcow2"));
	json_decref(c);
	json_decref(priv);
	CHECK(store_checkpoint_get(s, sbx, "ckpt_2", &c, NULL) == 0);
	CHECK(!strcmp(tstore_str(c, "parent"), "before-upgrade"));
	json_decref(c);
	CHECK(store_checkpoint_get(s, other, "ckpt_2", &c, NULL) == -ENOENT);

	CHECK(store_checkpoint_list(s, sbx, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "checkpoints")) == 2);
	CHECK(!strcmp(tstore_str(json_array_get(json_object_get(list, "checkpoints"), 0), "name"),
	              "before-upgrade"));
	json_decref(list);
	CHECK(store_checkpoint_delete(s, sbx, "before-upgrade") == 0);
	CHECK(store_checkpoint_delete(s, sbx, "ckpt_1") == -ENOENT);
	CHECK(store_checkpoint_delete(s, sbx, "ckpt_2") == 0);
	CHECK(store_checkpoint_list(s, sbx, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "checkpoints")) == 0);
	json_decref(list);
	CHECK(store_checkpoint_list(s, "sbx_missing", &list) == -ENOENT);
	store_close(s);
}
