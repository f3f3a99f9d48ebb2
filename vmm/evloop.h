/* SPDX-License-Identifier: MIT */
#ifndef HUSK_EVLOOP_H
#define HUSK_EVLOOP_H

#include <stdint.h>

/*
 * The VMM's device thread: one epoll loop that runs device work (queue
 * notifications from ioeventfds, host sockets) off the vCPU threads. All
 * callbacks run on the thread that called evloop_run().
 */
struct evloop;

/* events is a mask of EPOLLIN/EPOLLOUT/...; the callback gets what fired. */
typedef void (*evloop_fn)(void *ctx, uint32_t events);

struct evloop *evloop_create(void);
void evloop_destroy(struct evloop *l);

/* Watches fd; returns 0 or -errno. A watched fd must be removed before it is closed. */
int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn fn, void *ctx)
	__attribute__((warn_unused_result));
int evloop_mod(struct evloop *l, int fd, uint32_t events) __attribute__((warn_unused_result));
void evloop_del(struct evloop *l, int fd);

/* Runs callbacks until evloop_stop() (from a callback) ; returns 0 or -errno. */
int evloop_run(struct evloop *l);
void evloop_stop(struct evloop *l);

/* Runs the callbacks of one wait of at most timeout_ms; returns how many ran, or -errno. */
int evloop_run_once(struct evloop *l, int timeout_ms);

#endif
