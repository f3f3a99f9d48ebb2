// SPDX-License-Identifier: MIT
/*
 * Diff snapshots (FORMAT.md, "Diff snapshots"): a header flag and a BASE
 * section naming the snapshot whose RAM the diff's pages go over. The flag
 * makes a reader that does not know diffs refuse the file instead of
 * restoring a guest with holes; the section ties the diff to one base.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snap_priv.h"

int snap_writer_set_base(struct snap_writer *w, uint64_t file_len, uint32_t table_sum)
{
	uint8_t buf[SNAP_BASE_LEN] = {0}, frame[64];
	size_t stored;
	uint32_t csum;
	int ret;

	if (w->err)
		return w->err;
	if (w->flags & SNAP_FLAG_DIFF || w->has_memory)
		return -EEXIST;
	snap_put64(buf, file_len);
	snap_put32(buf + 8, table_sum);
	ret = snap_frame_compress(NULL, frame, sizeof(frame), buf, sizeof(buf), &stored, &csum);
	if (!ret)
		ret = snap_writer_put(w, SNAP_BASE, 0, NULL, frame, stored, sizeof(buf), csum);
	if (!ret)
		w->flags |= SNAP_FLAG_DIFF;
	return ret;
}

int snap_base_check(struct snap_reader *r, char *err, size_t errlen)
{
	uint8_t buf[SNAP_BASE_LEN];
	uint32_t i = r->nr, n = 0;
	int ret;

	for (uint32_t k = 0; k < r->nr; k++)
		if (r->ents[k].type == SNAP_BASE && n++ == 0)
			i = k;
	if (n > 1) {
		snap_fail(err, errlen, r->path, "names %u base snapshots", n);
		return -EINVAL;
	}
	if (!(r->flags & SNAP_FLAG_DIFF)) {
		if (!n)
			return 0;
		snap_fail(err, errlen, r->path, "names a base snapshot but is not a diff");
		return -EINVAL;
	}
	if (i == r->nr) {
		snap_fail(err, errlen, r->path, "is a diff that names no base snapshot");
		return -EINVAL;
	}
	/* Checked before it is read: the table may claim any size up to a blob's. */
	if (r->ents[i].raw != SNAP_BASE_LEN || r->ents[i].id || r->ents[i].name[0] || !r->has_ram) {
		snap_fail(err, errlen, r->path, "has a malformed base section");
		return -EINVAL;
	}
	ret = snap_section_read(r, i, NULL, NULL, buf, err, errlen);
	if (ret)
		return ret;
	if (snap_get32(buf + 12)) {
		snap_fail(err, errlen, r->path, "has a malformed base section (reserved bytes)");
		return -EINVAL;
	}
	r->base_len = snap_get64(buf);
	r->base_sum = snap_get32(buf + 8);
	return 0;
}

int snap_reader_base(const struct snap_reader *r, uint64_t *file_len, uint32_t *table_sum)
{
	if (!(r->flags & SNAP_FLAG_DIFF))
		return -ENOENT;
	*file_len = r->base_len;
	*table_sum = r->base_sum;
	return 0;
}
