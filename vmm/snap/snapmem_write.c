// SPDX-License-Identifier: MIT
/*
 * Writing guest RAM into a snapshot (FORMAT.md, "Guest RAM"): the layout,
 * then every chunk with a non-zero page, compressed on several threads and
 * written in guest order. A diff stores instead the pages that differ from
 * its base's, read from the base's memory file.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "snap_priv.h"
#include "snapfile.h"

struct mem_writer {
	struct snap_writer *w;
	const struct guest_mem *mem;
	const struct snap_base_view *base; /* a diff's base RAM, or NULL */
	struct snap_ram ram;
	atomic_uint next_claim; /* next chunk to compress */
	pthread_mutex_t lock;
	pthread_cond_t turn;
	uint32_t next_write; /* next chunk whose turn it is to be written */
	atomic_int err;
	atomic_ullong missed; /* pages a diff found changed that nobody recorded writing */
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
	size_t bm = snap_bitmap_bytes(chunk_size), at = bm;

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

/* Whether a diff reads only the pages recorded as written (no need to map them all first). */
static bool snap_tracked(const struct guest_mem *mem, const struct snap_base_view *base)
{
	return base && guest_mem_tracked(mem) && !mem->dirty_verify;
}

/*
 * Gathers the pages of chunk idx that may differ from the base's; returns
 * the content size. Where writes are tracked, a page nobody wrote is not
 * read at all and a written one is stored as it is: comparing it with the
 * base's first read as many bytes again for the few pages written back
 * unchanged (12 of 16,400 after 64 MiB of random bytes; the diff's write
 * 736 ms nested without the comparison, 868 with, medians of 8). Untracked,
 * a page is stored when it differs from the base's (the base's page itself,
 * through its mapping, when the guest never wrote it). With dirty_verify
 * every page is compared, and one that differs though nobody is known to
 * have written it is counted in *missed (and stored).
 */
static size_t chunk_gather_diff(const struct guest_mem *mem, const uint8_t *host,
                                const struct snap_base_view *base, uint64_t off,
                                uint32_t chunk_size, uint8_t *out, atomic_ullong *missed)
{
	size_t bm = snap_bitmap_bytes(chunk_size), at = bm;

	memset(out, 0, bm);
	for (uint32_t pg = 0; pg < chunk_size / SNAP_PAGE; pg++) {
		uint64_t pos = off + (uint64_t)pg * SNAP_PAGE;
		bool dirty = guest_mem_page_dirty(mem, pos);
		bool written_as_is = dirty && snap_tracked(mem, base);
		const uint8_t *p = host + (size_t)pg * SNAP_PAGE, *b;

		if (!dirty && !mem->dirty_verify)
			continue;
		b = snap_base_page(base, pos);
		/* A hole in the base is zero: a zero page over one is never stored. */
		if (b ? !written_as_is && !memcmp(p, b, SNAP_PAGE) : page_is_zero(p))
			continue;
		if (!dirty && atomic_fetch_add(missed, 1) == 0)
			log_err("snapshot: the page at RAM offset %#llx differs from the memory "
			        "file, and no write to it was recorded",
			        (unsigned long long)pos);
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
	size_t cap = snap_frame_bound(snap_bitmap_bytes(cs) + cs), raw, stored = 0;
	uint8_t *in = malloc(snap_bitmap_bytes(cs) + cs), *out = malloc(cap + SNAP_TAG_LEN);
	LZ4F_cctx *cctx = NULL;
	struct snap_slot slot;
	uint32_t csum = 0;

	if (!in || !out || LZ4F_isError(LZ4F_createCompressionContext(&cctx, LZ4F_VERSION)))
		mw->err = -ENOMEM;
	while (!mw->err) {
		uint32_t idx = atomic_fetch_add(&mw->next_claim, 1);
		const uint8_t *host;
		int ret;

		if (idx >= mw->ram.nr_chunks)
			break;
		host = gpa_ptr(mw->mem, snap_chunk_gpa(&mw->ram, idx), cs);
		/* Chunks are in region order, and a memory file holds the regions back to back. */
		raw = !host      ? 0
		      : mw->base ? chunk_gather_diff(mw->mem, host, mw->base, (uint64_t)idx * cs,
		                                     cs, in, &mw->missed)
		                 : chunk_gather(host, cs, in);
		ret = host ? 0 : -EFAULT;
		if (!ret && raw)
			ret = snap_frame_compress(cctx, out, cap, in, raw, &stored, &csum);
		/*
		 * Chunks take their places in guest order, whichever thread finished
		 * first; sealing and writing them then run side by side (a sealed
		 * pause's AES is most of its time under emulation).
		 */
		pthread_mutex_lock(&mw->lock);
		while (mw->next_write != idx && !mw->err)
			pthread_cond_wait(&mw->turn, &mw->lock);
		if (!ret && raw && !mw->err)
			ret = snap_writer_claim(mw->w, SNAP_MEMORY, idx, stored, raw, csum, &slot);
		if (ret && !mw->err)
			mw->err = ret;
		mw->next_write++;
		pthread_cond_broadcast(&mw->turn);
		pthread_mutex_unlock(&mw->lock);
		if (!ret && raw && !mw->err)
			ret = snap_writer_fill(mw->w, &slot, out, cap + SNAP_TAG_LEN);
		if (ret)
			atomic_compare_exchange_strong(&mw->err, &(int){0}, ret);
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

static uint64_t dirty_pages(const struct guest_mem *mem)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < mem->ram_size / SNAP_PAGE / 64; i++)
		n += (uint64_t)__builtin_popcountll(
			__atomic_load_n(&mem->dirty[i], __ATOMIC_RELAXED));
	return n;
}

static int add_memory(struct snap_writer *w, const struct guest_mem *mem,
                      const struct snap_base_view *base, int threads)
{
	struct mem_writer mw = {.w = w,
	                        .mem = mem,
	                        .base = base,
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
	if (base && guest_mem_tracked(mem))
		log_info("snapshot: a diff over %llu MiB of guest memory, %llu MiB of it recorded "
		         "as written",
		         (unsigned long long)(mem->ram_size >> 20),
		         (unsigned long long)(dirty_pages(mem) * SNAP_PAGE >> 20));
	/*
	 * Unless writes are tracked, every page is read below; one never touched
	 * since the VM started or was restored would fault on its first read,
	 * one trap each (costly where traps are: 65536 of them for 256 MiB under
	 * emulation). One call maps them all, reading only: nothing is
	 * allocated, nothing copied (older kernels refuse it and the reads fault
	 * as before).
	 */
	for (int i = 0; i < mem->nr_regions && !snap_tracked(mem, base); i++)
		madvise(mem->regions[i].host, mem->regions[i].size, MADV_POPULATE_READ);
	snap_run_threads(mem_write_worker, &mw, snap_threads_clamp(threads, mw.ram.nr_chunks));
	if (!mw.err && mw.missed) {
		log_err("snapshot: dirty-page tracking missed %llu pages: this diff is refused",
		        (unsigned long long)mw.missed);
		mw.err = -EIO;
	}
	if (mw.err && !w->err)
		w->err = mw.err;
	return mw.err;
}

int snap_writer_add_memory(struct snap_writer *w, const struct guest_mem *mem, int threads)
{
	/* A diff's pages alone would restore as zeros where the base has data. */
	if (!w->err && w->flags & SNAP_FLAG_DIFF)
		return -EINVAL;
	return add_memory(w, mem, NULL, threads);
}

int snap_writer_add_memory_diff(struct snap_writer *w, const struct guest_mem *mem, int base_fd,
                                int threads)
{
	struct snap_base_view base;
	int ret;

	if (!w->err && (!(w->flags & SNAP_FLAG_DIFF) || base_fd < 0))
		return -EINVAL;
	if (w->err)
		return w->err;
	ret = snap_base_view_open(&base, base_fd, mem->ram_size,
	                          !guest_mem_tracked(mem) || mem->dirty_verify);
	if (ret)
		return ret;
	ret = add_memory(w, mem, &base, threads);
	snap_base_view_close(&base);
	return ret;
}
