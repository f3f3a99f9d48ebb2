// SPDX-License-Identifier: MIT
#include "evloop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define EVLOOP_MAX_FDS 1024 /* fits the 16-bit slot index below */

struct watch {
	evloop_fn fn;
	void *ctx;
	int fd;       /* -1: free slot */
	uint64_t gen; /* bumped on reuse: a stale event in a batch never hits a new watch */
};

/* epoll data: slot index in the low 16 bits, generation above. */
#define EV_DATA(l, w) ((uint64_t)((w) - (l)->watches) | ((w)->gen << 16))

struct evloop {
	int epfd;
	int stop;
	struct watch watches[EVLOOP_MAX_FDS];
};

struct evloop *evloop_create(void)
{
	struct evloop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	for (int i = 0; i < EVLOOP_MAX_FDS; i++)
		l->watches[i].fd = -1;
	return l;
}

void evloop_destroy(struct evloop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l);
}

static struct watch *find(struct evloop *l, int fd)
{
	for (int i = 0; i < EVLOOP_MAX_FDS; i++)
		if (l->watches[i].fd == fd)
			return &l->watches[i];
	return NULL;
}

int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn fn, void *ctx)
{
	struct watch *w = find(l, -1);
	struct epoll_event ev = {.events = events};

	if (fd < 0)
		return -EBADF;
	if (!w)
		return -ENOSPC;
	w->gen++;
	ev.data.u64 = EV_DATA(l, w);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	w->fn = fn;
	w->ctx = ctx;
	w->fd = fd;
	return 0;
}

int evloop_mod(struct evloop *l, int fd, uint32_t events)
{
	struct watch *w = find(l, fd);
	struct epoll_event ev = {.events = events};

	if (!w)
		return -ENOENT;
	ev.data.u64 = EV_DATA(l, w);
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void evloop_del(struct evloop *l, int fd)
{
	struct watch *w = find(l, fd);

	if (!w)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	/* An event for it may still be in this round's batch: fd -1 skips it. */
	w->fd = -1;
}

int evloop_run_once(struct evloop *l, int timeout_ms)
{
	struct epoll_event evs[64];
	int n = epoll_wait(l->epfd, evs, 64, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n && !l->stop; i++) {
		struct watch *w = &l->watches[evs[i].data.u64 & 0xffff];

		if (w->fd >= 0 && w->gen == evs[i].data.u64 >> 16)
			w->fn(w->ctx, evs[i].events);
	}
	return n;
}

int evloop_run(struct evloop *l)
{
	l->stop = 0;
	while (!l->stop) {
		int n = evloop_run_once(l, -1);

		if (n < 0)
			return n;
	}
	return 0;
}

void evloop_stop(struct evloop *l)
{
	l->stop = 1;
}
