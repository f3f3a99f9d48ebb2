// SPDX-License-Identifier: MIT
/*
 * Deleted snapshots keep their files while a live sandbox or a kept child
 * snapshot is built on them; once nothing is, the files go (after a delete,
 * and whenever a sandbox is freed).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx_int.h"

void snap_gc(struct sbx_mgr *m)
{
	static const char *const files[] = {"disk.qcow2", "memory.snap", "memory.raw"};
	json_t *list = NULL, *s;
	bool again = true;
	size_t i;

	/* Purging a child can free its parent: until nothing changes. */
	for (int round = 0; again && round < 64; round++) {
		again = false;
		if (store_snapshot_unused(m->store, &list))
			return;
		json_array_foreach(list, i, s)
		{
			json_t *priv = json_object_get(s, "private");
			const char *id = json_string_value(json_object_get(s, "id"));
			const char *dir = json_string_value(json_object_get(priv, "dir"));
			char path[4200];

			for (size_t k = 0; dir && k < sizeof(files) / sizeof(files[0]); k++) {
				snprintf(path, sizeof(path), "%s/%s", dir, files[k]);
				unlink(path);
			}
			/* A memory file's extraction cut short by a stop (swept at start too). */
			snprintf(path, sizeof(path), "%s/extract", dir ? dir : "");
			if (dir)
				sbx_remove_dir(path);
			if (dir && rmdir(dir) < 0 && errno != ENOENT)
				log_warn(NULL, "snapshot %s: cannot remove %s: %s", id, dir,
				         strerror(errno));
			if (store_snapshot_purge(m->store, id) == 0) {
				log_info(NULL,
				         "snapshot %s: files removed (deleted, no longer used)",
				         id);
				again = true;
			}
		}
		json_decref(list);
		list = NULL;
	}
}
