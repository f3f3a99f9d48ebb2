// SPDX-License-Identifier: MIT
/*
 * Guest RAM in a snapshot: a layout section, then one section per chunk
 * that holds a non-zero page: a bitmap of its present pages followed by
 * those pages (FORMAT.md, "Guest RAM"). Chunks are compressed and
 * decompressed on several threads; every guest byte goes through gpa_ptr().
 * This file reads; snapmem_write.c writes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confine.h"
#include "snap_priv.h"
#include "snapfile.h"

size_t snap_bitmap_bytes(uint32_t chunk_size)
{
	return chunk_size / SNAP_PAGE / 8;
}

uint64_t snap_chunk_gpa(const struct snap_ram *ram, uint32_t index)
{
	uint64_t off = (uint64_t)index * ram->chunk_size;
	uint32_t i = 0;

	/* Regions are whole chunks (checked at open), so a chunk is in one. */
	while (i + 1 < ram->nr_regions && off >= ram->regions[i].size)
		off -= ram->regions[i++].size;
	return ram->regions[i].gpa + off;
}

int snap_threads_clamp(int threads, uint32_t jobs)
{
	if (threads < 1)
		threads = 1;
	if (threads > SNAP_MAX_THREADS)
		threads = SNAP_MAX_THREADS;
	return (uint32_t)threads > jobs ? (jobs ? (int)jobs : 1) : threads;
}

struct snap_worker {
	void *(*fn)(void *);
	void *arg;
};

/* A helper thread: its own seccomp role first; the caller's thread does the work alone if not. */
static void *snap_worker(void *arg)
{
	const struct snap_worker *w = arg;

	pthread_setname_np(pthread_self(), "snap-worker");
	if (confine_enter(ROLE_WORKER))
		return NULL;
	return w->fn(w->arg);
}

void snap_run_threads(void *(*fn)(void *), void *arg, int threads)
{
	struct snap_worker w = {fn, arg};
	pthread_t tid[SNAP_MAX_THREADS];
	int started = 0;

	for (int i = 1; i < threads; i++)
		if (pthread_create(&tid[started], NULL, snap_worker, &w) == 0)
			started++;
	fn(arg);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
}

static int ram_decode(struct snap_reader *r, uint32_t sec, char *err, size_t errlen)
{
	uint8_t buf[SNAP_RAM_FIXED + SNAP_MAX_REGIONS * SNAP_RAM_REGION];
	const struct snap_entry *e = &r->ents[sec];
	struct snap_ram *ram = &r->ram;
	uint64_t sum = 0, end = 0;
	int ret;

	if (e->id || e->name[0] || e->raw < SNAP_RAM_FIXED + SNAP_RAM_REGION ||
	    e->raw > sizeof(buf) || (e->raw - SNAP_RAM_FIXED) % SNAP_RAM_REGION)
		goto bad;
	ret = snap_section_read(r, sec, NULL, NULL, buf, err, errlen);
	if (ret)
		return ret;
	ram->ram_size = snap_get64(buf);
	ram->chunk_size = snap_get32(buf + 8);
	ram->nr_regions = snap_get32(buf + 16);
	if (snap_get32(buf + 12) != SNAP_PAGE || snap_get32(buf + 20) ||
	    ram->nr_regions != (e->raw - SNAP_RAM_FIXED) / SNAP_RAM_REGION ||
	    ram->chunk_size < SNAP_MIN_CHUNK || ram->chunk_size > SNAP_MAX_CHUNK ||
	    (ram->chunk_size & (ram->chunk_size - 1)) || !ram->ram_size ||
	    ram->ram_size > SNAP_MAX_RAM || ram->ram_size % ram->chunk_size)
		goto bad;
	for (uint32_t i = 0; i < ram->nr_regions; i++) {
		uint64_t gpa = snap_get64(buf + SNAP_RAM_FIXED + i * SNAP_RAM_REGION);
		uint64_t size = snap_get64(buf + SNAP_RAM_FIXED + i * SNAP_RAM_REGION + 8);

		/* Ascending, disjoint, whole chunks, no sum past 2^64 or ram_size. */
		if (!size || size > ram->ram_size - sum || gpa < end || gpa > UINT64_MAX - size ||
		    gpa % ram->chunk_size || size % ram->chunk_size)
			goto bad;
		ram->regions[i].gpa = gpa;
		ram->regions[i].size = size;
		sum += size;
		end = gpa + size;
	}
	if (sum != ram->ram_size)
		goto bad;
	ram->nr_chunks = (uint32_t)(ram->ram_size / ram->chunk_size);
	r->has_ram = 1;
	return 0;
bad:
	snap_fail(err, errlen, r->path, "guest RAM layout (section %u) is malformed", sec);
	return -EINVAL;
}

int snap_mem_check(struct snap_reader *r, char *err, size_t errlen)
{
	uint32_t nr_mem = 0, last = 0;
	char what[80];
	size_t bm;
	int ret;

	for (uint32_t i = 0; i < r->nr; i++) {
		if (r->ents[i].type == SNAP_RAM) {
			if (r->has_ram) {
				snap_fail(err, errlen, r->path, "has two guest RAM layouts");
				return -EINVAL;
			}
			ret = ram_decode(r, i, err, errlen);
			if (ret)
				return ret;
		}
		nr_mem += r->ents[i].type == SNAP_MEMORY;
	}
	if (!nr_mem)
		return 0;
	if (!r->has_ram) {
		snap_fail(err, errlen, r->path, "has memory chunks but no guest RAM layout");
		return -EINVAL;
	}
	if (!(r->mem_secs = malloc(nr_mem * sizeof(*r->mem_secs)))) {
		snap_fail(err, errlen, r->path, "out of memory");
		return -ENOMEM;
	}
	bm = snap_bitmap_bytes(r->ram.chunk_size);
	for (uint32_t i = 0; i < r->nr; i++) {
		const struct snap_entry *e = &r->ents[i];

		if (e->type != SNAP_MEMORY)
			continue;
		/* Chunks come in guest order, so that a lazy restore can bisect. */
		if (e->name[0] || e->id >= r->ram.nr_chunks || (r->nr_mem && e->id <= last) ||
		    e->raw < bm + SNAP_PAGE || e->raw > bm + r->ram.chunk_size ||
		    (e->raw - bm) % SNAP_PAGE) {
			snap_describe(r, i, what, sizeof(what));
			snap_fail(err, errlen, r->path, "%s is out of order or has a bad size",
			          what);
			return -EINVAL;
		}
		last = e->id;
		r->mem_secs[r->nr_mem++] = i;
		if (e->stored > r->mem_max_stored)
			r->mem_max_stored = e->stored;
	}
	return 0;
}

int snap_reader_memory_info(const struct snap_reader *r, struct snap_mem_info *info)
{
	if (!r->has_ram)
		return -ENOENT;
	*info = (struct snap_mem_info){.ram_size = r->ram.ram_size,
	                               .chunk_size = r->ram.chunk_size,
	                               .nr_chunks = r->ram.nr_chunks};
	return 0;
}

/* The pages chunk section k of mem_secs holds, as its size says (checked at open: at least one). */
static uint32_t sec_pages(const struct snap_reader *r, uint32_t k)
{
	return (uint32_t)((r->ents[r->mem_secs[k]].raw - snap_bitmap_bytes(r->ram.chunk_size)) /
	                  SNAP_PAGE);
}

/* Reads and verifies chunk section k of mem_secs into content; 0, -EIO, -ENOMEM. */
static int chunk_read(struct snap_reader *r, uint32_t k, LZ4F_dctx *dctx, void *src,
                      uint8_t *content, unsigned *present, char *err, size_t errlen)
{
	uint32_t sec = r->mem_secs[k];
	size_t bm = snap_bitmap_bytes(r->ram.chunk_size);
	unsigned n = 0;
	char what[80];
	int ret;

	ret = snap_section_read(r, sec, dctx, src, content, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; i < bm; i++)
		n += (unsigned)__builtin_popcount(content[i]);
	if ((uint64_t)n * SNAP_PAGE != r->ents[sec].raw - bm) {
		snap_describe(r, sec, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s: its bitmap does not match its pages", what);
		return -EIO;
	}
	*present = n;
	return 0;
}

struct mem_reader {
	struct snap_reader *r;
	const struct guest_mem *mem;
	uint32_t below; /* only chunks of fewer pages than this */
	atomic_uint next;
	atomic_int err;
	pthread_mutex_t lock; /* for msg */
	char *msg;
	size_t msglen;
};

/* Copies a verified chunk's present pages to guest memory, run by run. */
static int chunk_scatter(const struct guest_mem *mem, uint64_t gpa, const uint8_t *content,
                         uint32_t chunk_size)
{
	const uint8_t *src = content + snap_bitmap_bytes(chunk_size);
	uint32_t pages = chunk_size / SNAP_PAGE;

	for (uint32_t pg = 0; pg < pages;) {
		uint32_t end = pg;
		uint8_t *dst;

		while (end < pages && (content[end / 8] >> (end % 8) & 1))
			end++;
		if (end == pg) {
			pg++;
			continue;
		}
		dst = gpa_ptr(mem, gpa + (uint64_t)pg * SNAP_PAGE,
		              (uint64_t)(end - pg) * SNAP_PAGE);
		if (!dst)
			return -EFAULT;
		guest_mem_mark(mem, gpa + (uint64_t)pg * SNAP_PAGE,
		               (uint64_t)(end - pg) * SNAP_PAGE);
		memcpy(dst, src, (size_t)(end - pg) * SNAP_PAGE);
		src += (size_t)(end - pg) * SNAP_PAGE;
		pg = end;
	}
	return 0;
}

static void *mem_read_worker(void *arg)
{
	struct mem_reader *mr = arg;
	struct snap_reader *r = mr->r;
	uint8_t *src = malloc(r->mem_max_stored), *content;
	LZ4F_dctx *dctx = NULL;
	char msg[256] = "";
	unsigned present;
	int ret = 0;

	content = malloc(snap_bitmap_bytes(r->ram.chunk_size) + r->ram.chunk_size);
	if (!src || !content || LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		ret = -ENOMEM;
	while (!ret && !mr->err) {
		uint32_t k = atomic_fetch_add(&mr->next, 1);

		if (k >= r->nr_mem)
			break;
		if (sec_pages(r, k) >= mr->below)
			continue;
		ret = chunk_read(r, k, dctx, src, content, &present, msg, sizeof(msg));
		if (!ret &&
		    chunk_scatter(mr->mem, snap_chunk_gpa(&r->ram, r->ents[r->mem_secs[k]].id),
		                  content, r->ram.chunk_size))
			ret = -EFAULT;
	}
	if (ret) {
		pthread_mutex_lock(&mr->lock);
		if (!mr->err) {
			mr->err = ret;
			if (!msg[0])
				snap_fail(msg, sizeof(msg), r->path, "cannot load guest RAM: %s",
				          strerror(-ret));
			if (mr->msg && mr->msglen)
				snprintf(mr->msg, mr->msglen, "%s", msg);
		}
		pthread_mutex_unlock(&mr->lock);
	}
	LZ4F_freeDecompressionContext(dctx);
	free(src);
	free(content);
	return NULL;
}

int snap_reader_memory_fits(const struct snap_reader *r, const struct guest_mem *mem, char *err,
                            size_t errlen)
{
	int same = r->has_ram && (uint32_t)mem->nr_regions == r->ram.nr_regions;

	if (!r->has_ram) {
		snap_fail(err, errlen, r->path, "holds no guest RAM");
		return -ENOENT;
	}
	for (int i = 0; same && i < mem->nr_regions; i++)
		same = mem->regions[i].gpa == r->ram.regions[i].gpa &&
		       mem->regions[i].size == r->ram.regions[i].size;
	if (!same) {
		snap_fail(err, errlen, r->path,
		          "guest RAM is %llu MiB in the snapshot but %llu MiB here (or laid out "
		          "differently)",
		          (unsigned long long)(r->ram.ram_size >> 20),
		          (unsigned long long)(mem->ram_size >> 20));
		return -EINVAL;
	}
	return 0;
}

int snap_reader_load_memory(struct snap_reader *r, const struct guest_mem *mem, int threads,
                            char *err, size_t errlen)
{
	return snap_reader_load_memory_below(r, mem, threads, UINT32_MAX, err, errlen);
}

int snap_reader_load_memory_below(struct snap_reader *r, const struct guest_mem *mem, int threads,
                                  uint32_t below, char *err, size_t errlen)
{
	struct mem_reader mr = {.r = r,
	                        .mem = mem,
	                        .below = below,
	                        .lock = PTHREAD_MUTEX_INITIALIZER,
	                        .msg = err,
	                        .msglen = errlen};
	int ret = snap_reader_memory_fits(r, mem, err, errlen);

	if (ret)
		return ret;
	if (!r->nr_mem)
		return 0; /* all zero: fresh guest RAM is that already */
	snap_run_threads(mem_read_worker, &mr, snap_threads_clamp(threads, r->nr_mem));
	return mr.err;
}

/* The position in mem_secs of chunk index's section, or nr_mem when it has none. */
static uint32_t chunk_find(const struct snap_reader *r, uint32_t index)
{
	uint32_t lo = 0, hi = r->nr_mem;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r->ents[r->mem_secs[mid]].id < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nr_mem && r->ents[r->mem_secs[lo]].id == index ? lo : r->nr_mem;
}

int snap_reader_memory_stored(const struct snap_reader *r, uint32_t index)
{
	if (!r->has_ram || index >= r->ram.nr_chunks)
		return -ERANGE;
	return chunk_find(r, index) < r->nr_mem;
}

uint32_t snap_reader_memory_pages(const struct snap_reader *r, uint32_t index)
{
	uint32_t k = r->has_ram && index < r->ram.nr_chunks ? chunk_find(r, index) : r->nr_mem;

	/* The reader checks at the chunk's read that the bitmap agrees. */
	return k < r->nr_mem ? sec_pages(r, k) : 0;
}

int snap_reader_memory_chunk(struct snap_reader *r, uint32_t index, void *buf, size_t len,
                             uint64_t *gpa, unsigned *present, char *err, size_t errlen)
{
	struct snap_chunk_reader *cr;
	struct snap_chunk c;
	int ret;

	if (!r->has_ram || index >= r->ram.nr_chunks)
		return -ERANGE;
	if (len != r->ram.chunk_size)
		return -EINVAL;
	ret = snap_chunk_reader_new(r, &cr);
	if (ret)
		return ret;
	ret = snap_chunk_read(cr, index, &c, err, errlen);
	if (!ret) {
		const uint8_t *src = c.pages;

		for (uint32_t pg = 0; pg < len / SNAP_PAGE; pg++) {
			uint8_t *dst = (uint8_t *)buf + (size_t)pg * SNAP_PAGE;

			if (c.bitmap[pg / 8] >> (pg % 8) & 1) {
				memcpy(dst, src, SNAP_PAGE);
				src += SNAP_PAGE;
			} else {
				memset(dst, 0, SNAP_PAGE);
			}
		}
		*gpa = c.gpa;
		*present = c.nr_pages;
	}
	snap_chunk_reader_free(cr);
	return ret;
}

struct snap_chunk_reader {
	struct snap_reader *r;
	LZ4F_dctx *dctx;
	uint8_t *src;     /* mem_max_stored bytes: a chunk's frame */
	uint8_t *content; /* bitmap and stored pages of the last chunk read */
};

int snap_chunk_reader_new(struct snap_reader *r, struct snap_chunk_reader **out)
{
	struct snap_chunk_reader *cr;

	if (!r->has_ram)
		return -ENOENT;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	cr->r = r;
	cr->src = malloc(r->mem_max_stored ? r->mem_max_stored : 1);
	cr->content = malloc(snap_bitmap_bytes(r->ram.chunk_size) + r->ram.chunk_size);
	if (!cr->src || !cr->content ||
	    LZ4F_isError(LZ4F_createDecompressionContext(&cr->dctx, LZ4F_VERSION))) {
		snap_chunk_reader_free(cr);
		return -ENOMEM;
	}
	*out = cr;
	return 0;
}

void snap_chunk_reader_free(struct snap_chunk_reader *cr)
{
	if (!cr)
		return;
	LZ4F_freeDecompressionContext(cr->dctx);
	free(cr->src);
	free(cr->content);
	free(cr);
}

int snap_chunk_read(struct snap_chunk_reader *cr, uint32_t index, struct snap_chunk *c, char *err,
                    size_t errlen)
{
	struct snap_reader *r = cr->r;
	size_t bm = snap_bitmap_bytes(r->ram.chunk_size);
	unsigned present = 0;
	uint32_t k;
	int ret = 0;

	if (index >= r->ram.nr_chunks)
		return -ERANGE;
	k = chunk_find(r, index);
	if (k == r->nr_mem)
		memset(cr->content, 0, bm);
	else
		ret = chunk_read(r, k, cr->dctx, cr->src, cr->content, &present, err, errlen);
	if (ret)
		return ret;
	*c = (struct snap_chunk){.gpa = snap_chunk_gpa(&r->ram, index),
	                         .bitmap = cr->content,
	                         .pages = cr->content + bm,
	                         .nr_pages = present};
	return 0;
}
