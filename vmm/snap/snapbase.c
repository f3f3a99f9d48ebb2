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
#include <sys/mman.h>
#include <unistd.h>

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

/* Marks the pages of [from, to) as holes. */
static void holes_mark(uint8_t *holes, uint64_t from, uint64_t to)
{
	for (uint64_t pg = from / SNAP_PAGE; pg < to / SNAP_PAGE; pg++)
		holes[pg / 8] |= (uint8_t)(1U << (pg % 8));
}

/*
 * Maps the data pages (not the holes: a read there would add pages to a
 * tmpfs file) in one call per run, rather than a fault per page as they are
 * compared (see snap_writer_add_memory).
 */
static void populate_data(const struct snap_base_view *v)
{
	uint64_t pages = v->size / SNAP_PAGE, pg = 0, start;

	while (pg < pages) {
		while (pg < pages && v->holes[pg / 8] >> (pg % 8) & 1)
			pg++;
		start = pg;
		while (pg < pages && !(v->holes[pg / 8] >> (pg % 8) & 1))
			pg++;
		if (pg > start)
			madvise((void *)(v->map + start * SNAP_PAGE), (pg - start) * SNAP_PAGE,
			        MADV_POPULATE_READ);
	}
}

int snap_base_view_open(struct snap_base_view *v, int fd, uint64_t size, bool populate)
{
	uint64_t off = 0;
	off_t data, hole;

	*v = (struct snap_base_view){.size = size};
	v->holes = calloc(size / SNAP_PAGE / 8 + 1, 1);
	if (!v->holes)
		return -ENOMEM;
	/* Data and holes as the file system says (a file system that cannot say: all data). */
	while (off < size) {
		data = lseek(fd, (off_t)off, SEEK_DATA);
		if (data < 0 && errno != ENXIO)
			break;
		if (data < 0 || (uint64_t)data >= size) {
			holes_mark(v->holes, off, size);
			break;
		}
		holes_mark(v->holes, off, (uint64_t)data & ~(uint64_t)(SNAP_PAGE - 1));
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			break;
		/* A hole that starts inside a page leaves that page data. */
		off = ((uint64_t)hole + SNAP_PAGE - 1) & ~(uint64_t)(SNAP_PAGE - 1);
	}
	v->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (v->map == MAP_FAILED) {
		int ret = -errno;

		free(v->holes);
		*v = (struct snap_base_view){0};
		return ret;
	}
	if (populate)
		populate_data(v);
	return 0;
}

void snap_base_view_close(struct snap_base_view *v)
{
	if (v->map)
		munmap((void *)v->map, v->size);
	free(v->holes);
	*v = (struct snap_base_view){0};
}
