// SPDX-License-Identifier: MIT
/* Helpers shared by the snapshot unit tests (see test_snap.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memfile.h"
#include "snap/snapfile.h"
#include "test_snap.h"

static char dir[64];

static const char *tsnap_dir(void)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/husk-snap-unit-XXXXXX");
		if (!mkdtemp(dir))
			dir[0] = '\0';
	}
	return dir;
}

/* The tests' files go when the runner exits. */
__attribute__((destructor)) static void tdir_remove(void)
{
	struct dirent *d;
	DIR *dp = dir[0] ? opendir(dir) : NULL;

	while (dp && (d = readdir(dp)))
		if (d->d_name[0] != '.')
			unlinkat(dirfd(dp), d->d_name, 0);
	if (dp)
		closedir(dp);
	if (dir[0])
		rmdir(dir);
}

char *tsnap_path(const char *name)
{
	static char path[4][128];
	static int n;
	char *p = path[n++ % 4];

	snprintf(p, sizeof(path[0]), "%s/%s", tsnap_dir(), name);
	return p;
}

uint64_t tsnap_xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

void tsnap_fill_random(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tsnap_xs(&x);

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* Fills guest RAM page by page: random, zero, or a mix with edge cases. */
void tsnap_fill_mem(const struct guest_mem *mem, enum fill how, uint64_t seed)
{
	uint64_t x = seed + 7;

	if (how == FILL_ZERO)
		return;
	for (int r = 0; r < mem->nr_regions; r++) {
		for (uint64_t off = 0; off < mem->regions[r].size; off += PAGE) {
			uint8_t *p = gpa_ptr(mem, mem->regions[r].gpa + off, PAGE);
			uint64_t kind = how == FILL_RANDOM ? 0 : tsnap_xs(&x) % 8;

			if (kind == 0 || kind == 1)
				tsnap_fill_random(p, PAGE, seed ^ off ^ (uint64_t)r << 40);
			else if (kind == 2)
				p[PAGE - 1] = 1; /* zero but for the last byte */
			else if (kind == 3)
				memset(p, 0x5a, PAGE); /* compresses well */
		}
	}
}

int tsnap_mem_equal(const struct guest_mem *a, const struct guest_mem *b)
{
	if (a->nr_regions != b->nr_regions)
		return 0;
	for (int r = 0; r < a->nr_regions; r++) {
		uint64_t gpa = a->regions[r].gpa, size = a->regions[r].size;

		if (size != b->regions[r].size ||
		    memcmp(gpa_ptr(a, gpa, size), gpa_ptr(b, gpa, size), size))
			return 0;
	}
	return 1;
}

uint8_t *tsnap_slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf = NULL;
	int fd = open(path, O_RDONLY);

	if (fd >= 0 && !fstat(fd, &st) && (buf = malloc((size_t)st.st_size + 1)) &&
	    read(fd, buf, (size_t)st.st_size) == st.st_size)
		*len = (size_t)st.st_size;
	else if (buf) {
		free(buf);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	return buf;
}

int tsnap_spit(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* A snapshot with a few blobs and, when mem is given, its RAM. */
int tsnap_write(const char *path, const struct guest_mem *mem, int threads)
{
	static uint8_t big[300000];
	struct snap_writer *w;
	int ret;

	tsnap_fill_random(big, sizeof(big), 99);
	memset(big + 100000, 0, 100000);
	ret = snap_writer_open(path, &w);
	if (ret)
		return ret;
	if (snap_writer_add(w, SNAP_VM, 0, NULL, "vm state", 8) ||
	    snap_writer_add(w, SNAP_VCPU, 0, NULL, "vcpu0", 5) ||
	    snap_writer_add(w, SNAP_VCPU, 1, NULL, big, sizeof(big)) ||
	    snap_writer_add(w, SNAP_DEVICE, 0, "serial", "", 0) ||
	    snap_writer_add(w, SNAP_DEVICE, 1, "virtio-blk", big, 1000) ||
	    (mem && snap_writer_add_memory(w, mem, threads)))
		ret = -EIO;
	return ret ? (snap_writer_abort(w), ret) : snap_writer_commit(w);
}

int tsnap_write_diff(const char *path, const struct guest_mem *g, const struct memfile_base *b)
{
	struct snap_writer *w;
	int ret = snap_writer_open(path, &w);

	if (ret)
		return ret;
	if (snap_writer_set_base(w, b->snap_len, b->snap_sum) ||
	    snap_writer_add(w, SNAP_VM, 0, NULL, "vm state", 8) ||
	    snap_writer_add_memory_diff(w, g, b->fd, 2))
		ret = -EIO;
	return ret ? (snap_writer_abort(w), ret) : snap_writer_commit(w);
}

void *tsnap_touch_pages(void *arg)
{
	struct tsnap_toucher *t = arg;
	uint64_t x = t->seed, pages = t->mem->ram_size / PAGE;

	for (int i = 0; i < t->rounds; i++) {
		uint64_t off = tsnap_xs(&x) % pages * PAGE, gpa = off;

		/* RAM offsets to addresses: past the first region, the second's. */
		if (t->mem->nr_regions > 1 && off >= t->mem->regions[0].size)
			gpa = t->mem->regions[1].gpa + off - t->mem->regions[0].size;
		if (memcmp(gpa_ptr(t->mem, gpa, PAGE), gpa_ptr(t->want, gpa, PAGE), PAGE))
			t->bad++;
	}
	return NULL;
}

int tsnap_read_all(const char *path, const struct snap_key *key, const struct guest_mem *into,
                   char *err, size_t errlen)
{
	struct snap_section_info info;
	struct snap_reader *r;
	int ret = snap_reader_open_key(path, key, &r, err, errlen);

	if (ret)
		return ret;
	for (unsigned i = 0; !ret && i < snap_reader_nr_sections(r); i++) {
		void *data;
		size_t len;

		if (snap_reader_section(r, i, &info) || info.type == SNAP_MEMORY)
			continue;
		ret = snap_reader_get(r, info.type, info.id, info.name, &data, &len, err, errlen);
		if (!ret)
			free(data);
	}
	if (!ret && into)
		ret = snap_reader_load_memory(r, into, 2, err, errlen);
	snap_reader_close(r);
	return ret;
}
