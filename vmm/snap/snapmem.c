// SPDX-License-Identifier: MIT
/*
 * Guest RAM in a snapshot: a layout section, then one section per chunk
 * that holds a non-zero page: a bitmap of its present pages followed by
 * those pages (FORMAT.md, "Guest RAM"). Chunks are compressed and
 * decompressed on several threads; every guest byte goes through gpa_ptr().
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_priv.h"
#include "snapfile.h"

/* Bytes of the present-page bitmap at the start of a chunk's content. */
static size_t bitmap_bytes(uint32_t chunk_size)
{
	return chunk_size / SNAP_PAGE / 8;
}

static uint64_t chunk_gpa(const struct snap_ram *ram, uint32_t index)
{
	uint64_t off = (uint64_t)index * ram->chunk_size;
	uint32_t i = 0;

	/* Regions are whole chunks (checked at open), so a chunk is in one. */
	while (i + 1 < ram->nr_regions && off >= ram->regions[i].size)
		off -= ram->regions[i++].size;
	return ram->regions[i].gpa + off;
}

static int threads_clamp(int threads, uint32_t jobs)
{
	if (threads < 1)
		threads = 1;
	if (threads > SNAP_MAX_THREADS)
		threads = SNAP_MAX_THREADS;
	return (uint32_t)threads > jobs ? (jobs ? (int)jobs : 1) : threads;
}

/*
 * Runs fn on `threads` threads, the caller's among them, and waits for all.
 * A thread that cannot be started just leaves its share to the others.
 */
static void run_threads(void *(*fn)(void *), void *arg, int threads)
{
	pthread_t tid[SNAP_MAX_THREADS];
	int started = 0;

	for (int i = 1; i < threads; i++)
		if (pthread_create(&tid[started], NULL, fn, arg) == 0)
			started++;
	fn(arg);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
}

/* --- writing --- */

struct mem_writer {
	struct snap_writer *w;
	const struct guest_mem *mem;
	struct snap_ram ram;
	atomic_uint next_claim; /* next chunk to compress */
	pthread_mutex_t lock;
	pthread_cond_t turn;
	uint32_t next_write; /* next chunk whose turn it is to be written */
	atomic_int err;
};

static int page_is_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)p;

	/* Eight words at a time, so that the compiler can vectorise. */
	for (size_t i = 0; i < SNAP_PAGE / 8; i += 8) {
		uint64_t acc = 0;

		for (size_t j = 0; j < 8; j++)
			acc |= q[i + j];
		if (acc)
			return 0;
	}
	return 1;
}

/* Gathers the non-zero pages of a chunk behind its bitmap; returns the content size. */
static size_t chunk_gather(const uint8_t *host, uint32_t chunk_size, uint8_t *out)
{
	size_t bm = bitmap_bytes(chunk_size), at = bm;

	memset(out, 0, bm);
	for (uint32_t pg = 0; pg < chunk_size / SNAP_PAGE; pg++) {
		const uint8_t *p = host + (size_t)pg * SNAP_PAGE;

		if (page_is_zero(p))
			continue;
		out[pg / 8] |= (uint8_t)(1U << (pg % 8));
		memcpy(out + at, p, SNAP_PAGE);
		at += SNAP_PAGE;
	}
	return at == bm ? 0 : at;
}

static void *mem_write_worker(void *arg)
{
	struct mem_writer *mw = arg;
	uint32_t cs = mw->ram.chunk_size;
	size_t cap = snap_frame_bound(bitmap_bytes(cs) + cs), raw, stored = 0;
	uint8_t *in = malloc(bitmap_bytes(cs) + cs), *out = malloc(cap);
	LZ4F_cctx *cctx = NULL;
	uint32_t csum = 0;

	if (!in || !out || LZ4F_isError(LZ4F_createCompressionContext(&cctx, LZ4F_VERSION)))
		mw->err = -ENOMEM;
	while (!mw->err) {
		uint32_t idx = atomic_fetch_add(&mw->next_claim, 1);
		const uint8_t *host;
		int ret = 0;

		if (idx >= mw->ram.nr_chunks)
			break;
		host = gpa_ptr(mw->mem, chunk_gpa(&mw->ram, idx), cs);
		raw = host ? chunk_gather(host, cs, in) : 0;
		if (!host)
			ret = -EFAULT;
		else if (raw)
			ret = snap_frame_compress(cctx, out, cap, in, raw, &stored, &csum);
		/* Chunks are written in guest order, whichever thread finished first. */
		pthread_mutex_lock(&mw->lock);
		while (mw->next_write != idx && !mw->err)
			pthread_cond_wait(&mw->turn, &mw->lock);
		pthread_mutex_unlock(&mw->lock);
		if (!ret && raw && !mw->err)
			ret = snap_writer_put(mw->w, SNAP_MEMORY, idx, NULL, out, stored, raw,
			                      csum);
		pthread_mutex_lock(&mw->lock);
		if (ret && !mw->err)
			mw->err = ret;
		mw->next_write++;
		pthread_cond_broadcast(&mw->turn);
		pthread_mutex_unlock(&mw->lock);
	}
	LZ4F_freeCompressionContext(cctx);
	free(in);
	free(out);
	return NULL;
}

static int ram_section_put(struct snap_writer *w, const struct snap_ram *ram)
{
	uint8_t buf[SNAP_RAM_FIXED + SNAP_MAX_REGIONS * SNAP_RAM_REGION], frame[512];
	size_t len = SNAP_RAM_FIXED + ram->nr_regions * SNAP_RAM_REGION, stored;
	uint32_t csum;
	int ret;

	memset(buf, 0, sizeof(buf));
	snap_put64(buf, ram->ram_size);
	snap_put32(buf + 8, ram->chunk_size);
	snap_put32(buf + 12, SNAP_PAGE);
	snap_put32(buf + 16, ram->nr_regions);
	for (uint32_t i = 0; i < ram->nr_regions; i++) {
		snap_put64(buf + SNAP_RAM_FIXED + i * SNAP_RAM_REGION, ram->regions[i].gpa);
		snap_put64(buf + SNAP_RAM_FIXED + i * SNAP_RAM_REGION + 8, ram->regions[i].size);
	}
	ret = snap_frame_compress(NULL, frame, sizeof(frame), buf, len, &stored, &csum);
	return ret ? ret : snap_writer_put(w, SNAP_RAM, 0, NULL, frame, stored, len, csum);
}

int snap_writer_add_memory(struct snap_writer *w, const struct guest_mem *mem, int threads)
{
	struct mem_writer mw = {.w = w,
	                        .mem = mem,
	                        .lock = PTHREAD_MUTEX_INITIALIZER,
	                        .turn = PTHREAD_COND_INITIALIZER};
	int ret;

	if (w->err)
		return w->err;
	if (w->has_memory)
		return -EEXIST;
	/* Only what guest_mem_init() makes: a reader refuses anything else. */
	if (!mem->ram_size || mem->ram_size % SNAP_CHUNK || mem->nr_regions < 1 ||
	    mem->nr_regions > SNAP_MAX_REGIONS)
		return -EINVAL;
	w->has_memory = 1;
	mw.ram.ram_size = mem->ram_size;
	mw.ram.chunk_size = SNAP_CHUNK;
	mw.ram.nr_chunks = (uint32_t)(mem->ram_size / SNAP_CHUNK);
	mw.ram.nr_regions = (uint32_t)mem->nr_regions;
	for (int i = 0; i < mem->nr_regions; i++) {
		mw.ram.regions[i].gpa = mem->regions[i].gpa;
		mw.ram.regions[i].size = mem->regions[i].size;
	}
	ret = ram_section_put(w, &mw.ram);
	if (ret)
		return ret;
	run_threads(mem_write_worker, &mw, threads_clamp(threads, mw.ram.nr_chunks));
	if (mw.err && !w->err)
		w->err = mw.err;
	return mw.err;
}

/* --- reading --- */

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
	bm = bitmap_bytes(r->ram.chunk_size);
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

/* Reads and verifies chunk section k of mem_secs into content; 0, -EIO, -ENOMEM. */
static int chunk_read(struct snap_reader *r, uint32_t k, LZ4F_dctx *dctx, void *src,
                      uint8_t *content, unsigned *present, char *err, size_t errlen)
{
	uint32_t sec = r->mem_secs[k];
	size_t bm = bitmap_bytes(r->ram.chunk_size);
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
	const uint8_t *src = content + bitmap_bytes(chunk_size);
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

	content = malloc(bitmap_bytes(r->ram.chunk_size) + r->ram.chunk_size);
	if (!src || !content || LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		ret = -ENOMEM;
	while (!ret && !mr->err) {
		uint32_t k = atomic_fetch_add(&mr->next, 1);

		if (k >= r->nr_mem)
			break;
		ret = chunk_read(r, k, dctx, src, content, &present, msg, sizeof(msg));
		if (!ret && chunk_scatter(mr->mem, chunk_gpa(&r->ram, r->ents[r->mem_secs[k]].id),
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

int snap_reader_load_memory(struct snap_reader *r, const struct guest_mem *mem, int threads,
                            char *err, size_t errlen)
{
	struct mem_reader mr = {.r = r,
	                        .mem = mem,
	                        .lock = PTHREAD_MUTEX_INITIALIZER,
	                        .msg = err,
	                        .msglen = errlen};
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
	if (!r->nr_mem)
		return 0; /* all zero: fresh guest RAM is that already */
	run_threads(mem_read_worker, &mr, threads_clamp(threads, r->nr_mem));
	return mr.err;
}

int snap_reader_memory_chunk(struct snap_reader *r, uint32_t index, void *buf, size_t len,
                             uint64_t *gpa, unsigned *present, char *err, size_t errlen)
{
	uint32_t lo = 0, hi = r->nr_mem, cs = r->ram.chunk_size;
	size_t bm = bitmap_bytes(cs);
	uint8_t *content;
	int ret;

	if (!r->has_ram || index >= r->ram.nr_chunks)
		return -ERANGE;
	if (len != cs)
		return -EINVAL;
	*gpa = chunk_gpa(&r->ram, index);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r->ents[r->mem_secs[mid]].id < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->nr_mem || r->ents[r->mem_secs[lo]].id != index) {
		memset(buf, 0, len);
		*present = 0;
		return 0;
	}
	if (!(content = malloc(bm + cs)))
		return -ENOMEM;
	ret = chunk_read(r, lo, NULL, NULL, content, present, err, errlen);
	if (!ret) {
		const uint8_t *src = content + bm;

		for (uint32_t pg = 0; pg < cs / SNAP_PAGE; pg++) {
			uint8_t *dst = (uint8_t *)buf + (size_t)pg * SNAP_PAGE;

			if (content[pg / 8] >> (pg % 8) & 1) {
				memcpy(dst, src, SNAP_PAGE);
				src += SNAP_PAGE;
			} else {
				memset(dst, 0, SNAP_PAGE);
			}
		}
	}
	free(content);
	return ret;
}
