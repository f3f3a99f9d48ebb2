// SPDX-License-Identifier: MIT
/*
 * Lazy restore of guest RAM through userfaultfd (lazy_mem.h).
 *
 * Each stored chunk is in one of three states: to do, busy (one thread is
 * decompressing it and placing its pages) or done. Whichever thread moves a
 * chunk from "to do" to "busy" fills it; the other leaves it alone, since
 * the kernel wakes every thread waiting on a page when UFFDIO_COPY or
 * UFFDIO_ZEROPAGE fills it, and a fault that comes after the page is there
 * does not wait at all. Only the handler thread unregisters, and only once
 * it leaves: then every fault still waiting (after a failure or a stop)
 * resolves to a zero page, so that nothing hangs while the VM stops.
 *
 * A diff over a memory file (base_fd) holds only the pages that differ
 * from the file's. Its dense chunks (bulk data the guest wrote) are made
 * anonymous and registered; filling one places the diff's pages and maps
 * the file back over the few others, so they stay one copy in the page
 * cache. Its sparse chunks (the kernel's scattered writes, what a resumed
 * guest touches first) are written over the file's mapping before the
 * guest runs, as an eager restore would: few pages each, and mapping the
 * file back around them while the guest runs costs more (nested: 20-50 ms
 * a chunk, against 1-10 ms for its pages). Every page of the diff is
 * marked as written (the next pause's diff must hold it). A pause waits
 * for the last chunk (lazy_mem_wait): a chunk not yet in has pages nobody
 * marked.
 */
#include "lazy_mem.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "lazy_diff.h"
#include "log.h"
#include "uffd.h"
#include "vm.h"

#define PAGE 4096UL
/* Fault messages read at once by the handler. */
#define MSG_BATCH 16
/* The background filler's nice value (see filler_thread). */
#define FILLER_NICE 10

enum { CHUNK_ZERO, CHUNK_TODO, CHUNK_BUSY, CHUNK_DONE };

struct range {
	uint8_t *start;
	size_t len;
	uint32_t first; /* its first chunk */
};

struct lazy_mem {
	struct vm *vm;
	struct snap_reader *r;
	int uffd;
	int wake_fd; /* eventfd: the handler looks at todo, stop and failed again */
	int base_fd; /* a diff's memory file, or -1 */
	uint32_t chunk_size;
	uint32_t nr_chunks;
	uint32_t nr_stored;     /* chunks registered */
	_Atomic uint8_t *state; /* per chunk */
	atomic_uint todo;       /* stored chunks not yet done */
	atomic_int stop;        /* lazy_mem_destroy() was called */
	atomic_int failed;
	unsigned on_demand;   /* chunks the handler filled (its own counter) */
	struct range *ranges; /* what is registered */
	unsigned nr_ranges;
	pthread_t handler, filler;
	int handler_started, filler_started;
	struct timespec t0;
	pthread_mutex_t lock; /* for the two fields below, and with ended */
	unsigned running;     /* threads that have not finished */
	int held;             /* the filler waits for lazy_mem_go() */
	int reader_released;
	pthread_cond_t ended; /* todo reached 0, or the load failed or stopped */
};

static void broadcast_end(struct lazy_mem *l)
{
	pthread_mutex_lock(&l->lock);
	pthread_cond_broadcast(&l->ended);
	pthread_mutex_unlock(&l->lock);
}

static void wake_handler(struct lazy_mem *l)
{
	uint64_t one = 1;

	/* The counter only saturates after 2^64 - 2 writes: this cannot fail usefully. */
	if (write(l->wake_fd, &one, sizeof(one)) < 0)
		return;
}

static void lazy_fail(struct lazy_mem *l, const char *msg)
{
	if (!atomic_exchange(&l->failed, 1))
		vm_stop(l->vm, VM_EXIT_ERROR, "lazy restore of guest memory failed: %s", msg);
	wake_handler(l);
	broadcast_end(l);
}

/* The host address of chunk index (chunks count through the regions in order). */
static uint8_t *chunk_host(const struct guest_mem *mem, uint32_t chunk_size, uint32_t index)
{
	uint64_t off = (uint64_t)index * chunk_size;

	for (int i = 0; i < mem->nr_regions; i++) {
		if (off < mem->regions[i].size)
			return gpa_ptr(mem, mem->regions[i].gpa + off, chunk_size);
		off -= mem->regions[i].size;
	}
	return NULL;
}

/* The chunk holding host address addr: 0 and *index, or -ERANGE outside guest RAM. */
static int chunk_of(const struct lazy_mem *l, uint64_t addr, uint32_t *index)
{
	const struct guest_mem *mem = &l->vm->mem;
	uint64_t before = 0;

	for (int i = 0; i < mem->nr_regions; i++) {
		uint64_t host = (uintptr_t)mem->regions[i].host, size = mem->regions[i].size;

		if (addr >= host && addr - host < size) {
			uint64_t idx = (before + (addr - host)) / l->chunk_size;

			if (idx >= l->nr_chunks)
				return -ERANGE;
			*index = (uint32_t)idx;
			return 0;
		}
		before += size;
	}
	return -ERANGE;
}

/*
 * Reads chunk idx and places it: runs of stored pages copied, runs of the
 * others zero (or, for a diff, the memory file's).
 */
static int chunk_fill(struct lazy_mem *l, uint32_t idx, struct snap_chunk_reader *cr)
{
	const struct guest_mem *mem = &l->vm->mem;
	uint8_t *host = chunk_host(mem, l->chunk_size, idx);
	uint32_t nr = l->chunk_size / PAGE;
	char err[320] = "", msg[400];
	const uint8_t *src;
	struct snap_chunk c;
	int ret;

	ret = snap_chunk_read(cr, idx, &c, err, sizeof(err));
	if (!ret && (!host || gpa_ptr(mem, c.gpa, l->chunk_size) != host)) {
		snprintf(err, sizeof(err), "chunk %u is not where guest RAM expects it", idx);
		ret = -EFAULT;
	}
	/* The reader checked that the bitmap counts exactly the pages there are. */
	src = c.pages;
	for (uint32_t pg = 0, end; !ret && pg < nr; pg = end) {
		int stored = c.bitmap[pg / 8] >> (pg % 8) & 1;
		size_t at = (size_t)pg * PAGE, len;

		for (end = pg + 1; end < nr && (c.bitmap[end / 8] >> (end % 8) & 1) == stored;)
			end++;
		len = (size_t)(end - pg) * PAGE;
		if (stored && l->base_fd >= 0)
			guest_mem_mark(mem, c.gpa + at, len);
		if (!stored && l->base_fd >= 0)
			ret = lazy_diff_place(l->uffd, l->base_fd, host + at, len,
			                      (uint64_t)idx * l->chunk_size + at);
		else
			ret = uffd_place(l->uffd, host + at, stored ? src : NULL, len);
		if (stored)
			src += len;
		if (ret)
			snprintf(err, sizeof(err), "cannot place chunk %u: %s", idx,
			         strerror(-ret));
	}
	if (!ret && l->base_fd >= 0)
		lazy_diff_unregister(l->uffd, host, c.bitmap, nr);
	/*
	 * Being destroyed, the handler unregisters guest RAM while the filler
	 * may still place a chunk: that placement fails, and is no failure.
	 */
	if (ret && !atomic_load(&l->stop)) {
		snprintf(msg, sizeof(msg), "%s", err[0] ? err : strerror(-ret));
		lazy_fail(l, msg);
	}
	return ret;
}

static int chunk_claim(struct lazy_mem *l, uint32_t idx)
{
	uint8_t want = CHUNK_TODO;

	return atomic_compare_exchange_strong(&l->state[idx], &want, CHUNK_BUSY);
}

static void chunk_done(struct lazy_mem *l, uint32_t idx)
{
	atomic_store(&l->state[idx], CHUNK_DONE);
	if (atomic_fetch_sub(&l->todo, 1) == 1) {
		wake_handler(l);
		broadcast_end(l);
	}
}

/* A thread's end: the last one out closes a released reader. */
static void thread_exit(struct lazy_mem *l)
{
	pthread_mutex_lock(&l->lock);
	if (--l->running == 0 && l->reader_released && l->r) {
		snap_reader_close(l->r);
		l->r = NULL;
	}
	pthread_mutex_unlock(&l->lock);
}

/* A chunk reader for one thread; NULL (and the restore failed) when there is no memory. */
static struct snap_chunk_reader *thread_reader(struct lazy_mem *l)
{
	struct snap_chunk_reader *cr;

	if (snap_chunk_reader_new(l->r, &cr)) {
		lazy_fail(l, "out of memory");
		return NULL;
	}
	return cr;
}

static void handle_fault(struct lazy_mem *l, const struct uffd_msg *m, struct snap_chunk_reader *cr)
{
	uint64_t addr = m->arg.pagefault.address;
	char msg[80];
	uint32_t idx;

	if (m->event != UFFD_EVENT_PAGEFAULT)
		return; /* only with features this file does not ask for */
	if (chunk_of(l, addr, &idx)) {
		snprintf(msg, sizeof(msg), "a fault at %#llx, outside guest RAM",
		         (unsigned long long)addr);
		lazy_fail(l, msg);
		return;
	}
	if (chunk_claim(l, idx)) {
		if (chunk_fill(l, idx, cr) == 0) {
			l->on_demand++;
			chunk_done(l, idx);
		}
		return;
	}
	/* Busy: the filler's copy wakes the faulting thread. Done: it is awake or soon is. */
	if (atomic_load(&l->state[idx]) == CHUNK_DONE)
		uffd_wake(l->uffd, addr & ~(PAGE - 1), PAGE);
}

static void unregister_all(struct lazy_mem *l)
{
	/* A diff's chunks in are unregistered already; one half placed is left to close(). */
	for (uint32_t i = 0; l->base_fd >= 0 && i < l->nr_chunks; i++)
		if (atomic_load(&l->state[i]) == CHUNK_TODO &&
		    uffd_unregister(l->uffd, chunk_host(&l->vm->mem, l->chunk_size, i),
		                    l->chunk_size))
			log_warn("lazy restore: UFFDIO_UNREGISTER: %s", strerror(errno));
	for (unsigned i = 0; l->base_fd < 0 && i < l->nr_ranges; i++)
		if (uffd_unregister(l->uffd, l->ranges[i].start, l->ranges[i].len))
			log_warn("lazy restore: UFFDIO_UNREGISTER: %s", strerror(errno));
	l->nr_ranges = 0;
}

static void *handler_thread(void *arg)
{
	struct lazy_mem *l = arg;
	struct pollfd p[2] = {{.fd = l->uffd, .events = POLLIN},
	                      {.fd = l->wake_fd, .events = POLLIN}};
	struct uffd_msg msgs[MSG_BATCH];
	struct snap_chunk_reader *cr = thread_reader(l);
	struct timespec t1;
	ssize_t n;

	pthread_setname_np(pthread_self(), "lazy-mem");
	if (confine_enter(ROLE_LAZY)) {
		lazy_fail(l, "cannot load the seccomp filter");
		return NULL;
	}
	while (!atomic_load(&l->stop) && !atomic_load(&l->failed) && atomic_load(&l->todo)) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			lazy_fail(l, "poll on the userfaultfd failed");
			break;
		}
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(l->wake_fd, &v, sizeof(v)) < 0)
				v = 0;
		}
		n = read(l->uffd, msgs, sizeof(msgs));
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			lazy_fail(l, "cannot read from the userfaultfd");
			break;
		}
		for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(msgs[0]); i++)
			handle_fault(l, &msgs[i], cr);
	}
	unregister_all(l);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!atomic_load(&l->todo))
		log_info("lazy restore: all guest memory in after %lld ms (%u of %u stored chunks "
		         "on demand)",
		         (long long)((t1.tv_sec - l->t0.tv_sec) * 1000 +
		                     (t1.tv_nsec - l->t0.tv_nsec) / 1000000),
		         l->on_demand, l->nr_stored);
	else /* the guest stopped first: what it touched came on demand, the rest never had to */
		log_info("lazy restore: stopped after %lld ms with %u of %u stored chunks left (%u "
		         "on demand)",
		         (long long)((t1.tv_sec - l->t0.tv_sec) * 1000 +
		                     (t1.tv_nsec - l->t0.tv_nsec) / 1000000),
		         (unsigned)atomic_load(&l->todo), l->nr_stored, l->on_demand);
	snap_chunk_reader_free(cr);
	thread_exit(l);
	return NULL;
}

/* Fills, in guest order, each chunk no other thread has taken. */
static void fill_rest(struct lazy_mem *l, struct snap_chunk_reader *cr)
{
	for (uint32_t i = 0; cr && i < l->nr_chunks; i++) {
		if (atomic_load(&l->stop) || atomic_load(&l->failed))
			break;
		if (!chunk_claim(l, i))
			continue;
		if (chunk_fill(l, i, cr))
			break;
		chunk_done(l, i);
	}
}

/* Fills every chunk nobody has touched yet, in guest order. */
static void *filler_thread(void *arg)
{
	struct lazy_mem *l = arg;
	struct snap_chunk_reader *cr = thread_reader(l);

	pthread_setname_np(pthread_self(), "lazy-mem-fill");
	/*
	 * Below the vCPUs and the fault handler: what the guest touches comes
	 * first; the rest only has to be in before long (Linux's nice is per
	 * thread). A failure leaves it at the VMM's priority.
	 */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), FILLER_NICE) < 0)
		log_debug("lazy restore: cannot lower the filler's priority: %s", strerror(errno));
	if (confine_enter(ROLE_LAZY)) {
		lazy_fail(l, "cannot load the seccomp filter");
		return NULL;
	}
	/* A held guest may wait long: what it touches first comes in before the rest. */
	pthread_mutex_lock(&l->lock);
	while (l->held && !atomic_load(&l->stop))
		pthread_cond_wait(&l->ended, &l->lock);
	pthread_mutex_unlock(&l->lock);
	fill_rest(l, cr);
	snap_chunk_reader_free(cr);
	thread_exit(l);
	return NULL;
}

/* Registers the stored chunks, runs of neighbours as one range; counts them in todo. */
static int register_chunks(struct lazy_mem *l, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < l->nr_chunks; i++) {
		int stored = snap_reader_memory_stored(l->r, i);
		uint8_t *host = chunk_host(&l->vm->mem, l->chunk_size, i);
		struct range *last = l->nr_ranges ? &l->ranges[l->nr_ranges - 1] : NULL;

		if (stored < 0 || !host) {
			snprintf(err, errlen, "chunk %u is outside guest RAM", i);
			return -EINVAL;
		}
		if (!stored || (l->base_fd >= 0 && snap_reader_memory_pages(l->r, i) <
		                                           LAZY_DIFF_DENSE(l->chunk_size / PAGE)))
			continue;
		atomic_store(&l->state[i], CHUNK_TODO);
		atomic_fetch_add(&l->todo, 1);
		l->nr_stored++;
		if (last && last->start + last->len == host)
			last->len += l->chunk_size;
		else
			l->ranges[l->nr_ranges++] = (struct range){host, l->chunk_size, i};
	}
	for (unsigned i = 0; i < l->nr_ranges; i++) {
		struct range *g = &l->ranges[i];
		int ret = 0;

		/* A diff's chunks from the memory file: anonymous, so that a fault there is ours.
		 */
		if (l->base_fd >= 0 && mmap(g->start, g->len, PROT_READ | PROT_WRITE,
		                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		                            -1, 0) == MAP_FAILED)
			ret = -errno;
		if (!ret)
			ret = uffd_register(l->uffd, g->start, g->len);
		if (ret) {
			snprintf(err, errlen, "cannot register guest RAM with userfaultfd: %s",
			         strerror(-ret));
			for (unsigned k = 0; l->base_fd >= 0 && k <= i; k++)
				lazy_diff_unmap(l->vm, l->ranges[k].start, l->ranges[k].len,
				                l->base_fd,
				                (uint64_t)l->ranges[k].first * l->chunk_size);
			return ret; /* closing the fd unregisters the others */
		}
	}
	return 0;
}

int lazy_mem_start(struct vm *vm, struct snap_reader *r, int base_fd, bool background,
                   struct lazy_mem **out, char *err, size_t errlen)
{
	struct snap_mem_info mi;
	struct lazy_mem *l;
	int ret;

	if (snap_reader_memory_info(r, &mi) || mi.chunk_size % PAGE || !mi.nr_chunks) {
		snprintf(err, errlen, "the snapshot holds no usable guest memory layout");
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	clock_gettime(CLOCK_MONOTONIC, &l->t0);
	l->vm = vm;
	l->r = r;
	l->uffd = -1;
	l->base_fd = base_fd;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->ended, NULL);
	l->chunk_size = mi.chunk_size;
	l->nr_chunks = mi.nr_chunks;
	l->state = calloc(mi.nr_chunks, sizeof(*l->state));
	l->ranges = calloc(mi.nr_chunks, sizeof(*l->ranges));
	l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!l->state || !l->ranges || l->wake_fd < 0) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	l->uffd = ret = uffd_open(err, errlen);
	if (ret < 0)
		goto fail;
	err[0] = 0;
	/* A diff's sparse chunks: written already where the restore began early (vm.h). */
	ret = base_fd >= 0 && !vm->sparse_loaded
	              ? snap_reader_load_memory_below(
				r, &vm->mem, 2, LAZY_DIFF_DENSE(mi.chunk_size / PAGE), err, errlen)
	              : 0;
	if (!ret)
		ret = register_chunks(l, err, errlen);
	if (ret)
		goto fail;
	l->running = background ? 2 : 1;
	l->held = vm->held;
	if (!(l->handler_started = !pthread_create(&l->handler, NULL, handler_thread, l)))
		l->running--;
	if (background &&
	    !(l->filler_started = !pthread_create(&l->filler, NULL, filler_thread, l)))
		l->running--;
	if (!l->handler_started || (background && !l->filler_started)) {
		snprintf(err, errlen, "cannot start its threads");
		ret = -EAGAIN;
		goto fail;
	}
	*out = l;
	return 0;
fail:
	lazy_mem_destroy(l); /* the reader is not released: it stays the caller's */
	return ret;
}

void lazy_mem_release_reader(struct lazy_mem *l)
{
	pthread_mutex_lock(&l->lock);
	l->reader_released = 1;
	if (l->running == 0 && l->r) {
		snap_reader_close(l->r);
		l->r = NULL;
	}
	pthread_mutex_unlock(&l->lock);
}

int lazy_mem_wait(struct lazy_mem *l)
{
	struct snap_chunk_reader *cr = NULL;
	bool fill;

	/* The chunks nobody has taken yet are filled here, at this thread's priority. */
	pthread_mutex_lock(&l->lock);
	fill = atomic_load(&l->todo) && l->running && l->r;
	if (fill)
		l->running++;
	pthread_mutex_unlock(&l->lock);
	if (fill)
		cr = thread_reader(l);
	fill_rest(l, cr);
	if (fill) {
		snap_chunk_reader_free(cr);
		thread_exit(l);
	}
	/* The rest: chunks another thread is placing. */
	pthread_mutex_lock(&l->lock);
	while (atomic_load(&l->todo) && !atomic_load(&l->stop) && !atomic_load(&l->failed))
		pthread_cond_wait(&l->ended, &l->lock);
	pthread_mutex_unlock(&l->lock);
	return atomic_load(&l->todo) ? -EIO : 0;
}

void lazy_mem_go(struct lazy_mem *l)
{
	pthread_mutex_lock(&l->lock);
	l->held = 0;
	pthread_cond_broadcast(&l->ended);
	pthread_mutex_unlock(&l->lock);
}

bool lazy_mem_dump(struct lazy_mem *l)
{
	unsigned todo = atomic_load(&l->todo);

	log_warn("lazy restore: %u of %u chunks still to come%s", todo, l->nr_stored,
	         atomic_load(&l->failed) ? ", failed" : "");
	return todo != 0;
}

void lazy_mem_destroy(struct lazy_mem *l)
{
	if (!l)
		return;
	atomic_store(&l->stop, 1);
	broadcast_end(l);
	if (l->wake_fd >= 0)
		wake_handler(l);
	if (l->handler_started)
		pthread_join(l->handler, NULL);
	if (l->filler_started)
		pthread_join(l->filler, NULL);
	/* Closing unregisters whatever is left, waking any fault still waiting. */
	if (l->uffd >= 0)
		close(l->uffd);
	if (l->r && l->reader_released)
		snap_reader_close(l->r);
	if (l->wake_fd >= 0)
		close(l->wake_fd);
	pthread_cond_destroy(&l->ended);
	pthread_mutex_destroy(&l->lock);
	free(l->state);
	free(l->ranges);
	free(l);
}
