// SPDX-License-Identifier: MIT
/*
 * libslirp on its own thread. libslirp is not thread-safe, so every call
 * into it is made here: the thread polls slirp's sockets, its timers and
 * an eventfd that the virtio-net device's queue notifications write, takes
 * the guest's frames from the transmit queue into slirp_input(), and puts
 * what slirp sends into the receive queue - or holds it, bounded, until the
 * guest posts buffers again.
 */
#include "netstack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <slirp/libslirp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "log.h"
#include "netstack_priv.h"
#include "virtio/net.h"

static int64_t ns_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ns_clock_get_ns(void *opaque)
{
	(void)opaque;
	return ns_now_ns();
}

static void ns_pending_drop_front(struct netstack *ns)
{
	struct ns_frame *f = ns->pending[ns->pend_head];

	ns->pend_bytes -= f->len;
	free(f);
	ns->pend_head = (ns->pend_head + 1) % NS_PENDING_MAX;
	ns->pend_count--;
}

/* Gives the guest what it had no room for; stops at the first frame that still does not fit. */
static void ns_pending_flush(struct netstack *ns)
{
	while (ns->pend_count) {
		struct ns_frame *f = ns->pending[ns->pend_head];

		if (virtio_net_rx(ns->dev, f->data, f->len) == -EAGAIN)
			return;
		ns_pending_drop_front(ns);
	}
}

static void ns_pending_add(struct netstack *ns, const void *buf, size_t len)
{
	struct ns_frame *f;

	/* Dropped past the bound: TCP sends it again, as on a full link. */
	if (ns->pend_count == NS_PENDING_MAX || ns->pend_bytes + len > NS_PENDING_BYTES)
		return;
	f = malloc(sizeof(*f) + len);
	if (!f)
		return;
	f->len = len;
	memcpy(f->data, buf, len);
	ns->pending[(ns->pend_head + ns->pend_count) % NS_PENDING_MAX] = f;
	ns->pend_count++;
	ns->pend_bytes += len;
}

static ssize_t ns_send_packet(const void *buf, size_t len, void *opaque)
{
	struct netstack *ns = opaque;
	int ret = -EAGAIN;

	if (!ns->pend_count)
		ret = virtio_net_rx(ns->dev, buf, len);
	if (ret == -EAGAIN)
		ns_pending_add(ns, buf, len);
	return (ssize_t)len;
}

static void ns_guest_error(const char *msg, void *opaque)
{
	(void)opaque;
	log_guest(LOG_WARN, "net: %s", msg);
}

static void *ns_timer_new(SlirpTimerId id, void *cb_opaque, void *opaque)
{
	struct netstack *ns = opaque;
	struct ns_timer *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->id = id;
	t->cb_opaque = cb_opaque;
	t->expire_ms = -1;
	t->next = ns->timers;
	ns->timers = t;
	return t;
}

static void ns_timer_free(void *timer, void *opaque)
{
	struct netstack *ns = opaque;

	for (struct ns_timer **p = &ns->timers; *p; p = &(*p)->next) {
		if (*p == timer) {
			*p = ((struct ns_timer *)timer)->next;
			free(timer);
			return;
		}
	}
}

static void ns_timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
	(void)opaque;
	((struct ns_timer *)timer)->expire_ms = expire_ms;
}

static void ns_register_poll_fd(int fd, void *opaque)
{
	(void)fd;
	(void)opaque;
}

static void ns_unregister_poll_fd(int fd, void *opaque)
{
	(void)fd;
	(void)opaque;
}

void netstack_kick(void *ctx)
{
	struct netstack *ns = ctx;
	uint64_t one = 1;

	if (write(ns->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_guest(LOG_WARN, "net: cannot wake the network thread: %s", strerror(errno));
}

static void ns_slirp_notify(void *opaque)
{
	netstack_kick(opaque);
}

static const SlirpCb ns_callbacks = {
	.send_packet = ns_send_packet,
	.guest_error = ns_guest_error,
	.clock_get_ns = ns_clock_get_ns,
	.timer_free = ns_timer_free,
	.timer_mod = ns_timer_mod,
	.register_poll_fd = ns_register_poll_fd,
	.unregister_poll_fd = ns_unregister_poll_fd,
	.notify = ns_slirp_notify,
	.timer_new_opaque = ns_timer_new,
};

static int ns_add_poll(int fd, int events, void *opaque)
{
	struct netstack *ns = opaque;
	short ev = 0;

	if (ns->nfds == NS_POLL_MAX)
		return -1; /* slirp then skips this socket for this turn */
	if (events & SLIRP_POLL_IN)
		ev |= POLLIN;
	if (events & SLIRP_POLL_OUT)
		ev |= POLLOUT;
	if (events & SLIRP_POLL_PRI)
		ev |= POLLPRI;
	ns->fds[ns->nfds] = (struct pollfd){.fd = fd, .events = ev};
	return (int)ns->nfds++;
}

static int ns_get_revents(int idx, void *opaque)
{
	struct netstack *ns = opaque;
	short re;
	int ev = 0;

	if (idx < NS_FIXED_FDS || (unsigned)idx >= ns->nfds)
		return 0;
	re = ns->fds[idx].revents;
	if (re & POLLIN)
		ev |= SLIRP_POLL_IN;
	if (re & POLLOUT)
		ev |= SLIRP_POLL_OUT;
	if (re & POLLPRI)
		ev |= SLIRP_POLL_PRI;
	if (re & (POLLERR | POLLNVAL))
		ev |= SLIRP_POLL_ERR;
	if (re & POLLHUP)
		ev |= SLIRP_POLL_HUP;
	return ev;
}

/* Milliseconds until the next armed timer, capped at cap. */
static uint32_t ns_timers_wait(struct netstack *ns, uint32_t cap)
{
	int64_t now = ns_now_ns() / 1000000;

	for (struct ns_timer *t = ns->timers; t; t = t->next) {
		if (t->expire_ms < 0)
			continue;
		if (t->expire_ms <= now)
			return 0;
		if (t->expire_ms - now < cap)
			cap = (uint32_t)(t->expire_ms - now);
	}
	return cap;
}

static void ns_timers_run(struct netstack *ns)
{
	int64_t now = ns_now_ns() / 1000000;
	bool fired;

	/* A callback may add, re-arm or free timers: start over after each. */
	do {
		fired = false;
		for (struct ns_timer *t = ns->timers; t; t = t->next) {
			if (t->expire_ms >= 0 && t->expire_ms <= now) {
				t->expire_ms = -1;
				ns_lib.handle_timer(ns->slirp, t->id, t->cb_opaque);
				fired = true;
				break;
			}
		}
	} while (fired);
}

/* Adds the tokens earned since the last refill; true if a frame may go now. */
static bool ns_tokens(struct netstack *ns)
{
	int64_t now = ns_now_ns(), earned;

	if (!ns->rate)
		return true;
	earned = (int64_t)((__int128)(now - ns->refilled_ns) * ns->rate / 1000000000);
	if (earned > 0) {
		ns->tokens = ns->tokens + earned > ns->bucket ? ns->bucket : ns->tokens + earned;
		ns->refilled_ns = now;
	}
	return ns->tokens > 0;
}

/*
 * Milliseconds until a throttled guest may send again, capped at cap. A
 * frame may overdraw the bucket; the debt is paid before the next one.
 */
static uint32_t ns_tx_wait(struct netstack *ns, uint32_t cap)
{
	uint64_t ms;

	if (!ns->throttled)
		return cap;
	ms = (uint64_t)(1 - ns->tokens) * 1000 / ns->rate + 1;
	return ms < cap ? (uint32_t)ms : cap;
}

static void ns_tx_drain(struct netstack *ns)
{
	ns->throttled = false;
	for (int i = 0; i < NS_TX_BUDGET; i++) {
		ssize_t len;

		if (!ns_tokens(ns)) {
			/* The frames stay in the guest's queue: its TCP slows down. */
			ns->throttled = true;
			return;
		}
		len = virtio_net_tx(ns->dev, ns->txbuf, sizeof(ns->txbuf));
		if (len <= 0)
			return;
		if (len > 14)
			atomic_fetch_add(&ns->tx_bytes, (uint64_t)len - 14);
		if (ns->rate)
			ns->tokens -= len;
		ns_lib.input(ns->slirp, ns->txbuf, (int)len);
	}
	netstack_kick(ns); /* more may be waiting: the next turn takes it */
}

static void *ns_thread(void *arg)
{
	struct netstack *ns = arg;

	pthread_setname_np(pthread_self(), "net");
	if (confine_enter(ROLE_NET)) {
		log_err("net: the network thread cannot load its seccomp filter; it stops");
		return NULL;
	}
	while (!atomic_load(&ns->stop)) {
		uint32_t timeout = 1000;
		int ret;

		/* The guest's kicks straight from KVM's eventfds: no hop through the event loop. */
		ns->fds[0] = (struct pollfd){.fd = ns->kick_fd, .events = POLLIN};
		ns->fds[1] = (struct pollfd){.fd = virtio_net_notify_fd(ns->dev, false),
		                             .events = POLLIN};
		ns->fds[2] = (struct pollfd){.fd = virtio_net_notify_fd(ns->dev, true),
		                             .events = POLLIN};
		ns->nfds = NS_FIXED_FDS;
		ns_lib.pollfds_fill(ns->slirp, &timeout, ns_add_poll, ns);
		timeout = ns_tx_wait(ns, ns_timers_wait(ns, timeout));
		ret = poll(ns->fds, ns->nfds, (int)timeout);
		if (ret < 0 && errno != EINTR) {
			log_err("net: poll: %s", strerror(errno));
			break;
		}
		ns_lib.pollfds_poll(ns->slirp, ret < 0, ns_get_revents, ns);
		if (ret > 0 &&
		    ((ns->fds[0].revents | ns->fds[1].revents | ns->fds[2].revents) & POLLIN)) {
			uint64_t n;

			if ((ns->fds[0].revents & POLLIN) && read(ns->kick_fd, &n, sizeof(n)) < 0 &&
			    errno != EAGAIN)
				log_warn("net: eventfd: %s", strerror(errno));
			if (ns->fds[1].revents & POLLIN)
				virtio_net_notified(ns->dev, false);
			if (ns->fds[2].revents & POLLIN)
				virtio_net_notified(ns->dev, true);
			ns_expose_serve(ns);
			ns_pending_flush(ns);
			ns_tx_drain(ns);
		} else if (ns->throttled) {
			ns_tx_drain(ns);
		}
		ns_timers_run(ns);
		ns_pending_flush(ns);
		virtio_net_flush(ns->dev);
	}
	return NULL;
}

struct netstack *netstack_create(const struct net_spec *spec)
{
	struct netstack *ns = calloc(1, sizeof(*ns));
	SlirpConfig cfg = {
		.version = 4,
		.in_enabled = true,
		.vhostname = "sandbox",
		.if_mtu = spec->mtu,
		.if_mru = spec->mtu,
		/* 10.0.2.2 is the gateway only, never the host's 127.0.0.1. */
		.disable_host_loopback = true,
	};

	char err[240];
	int ret = netstack_lib_load(err, sizeof(err));

	if (ret) {
		log_err("net: %s", err);
		free(ns);
		return NULL;
	}
	if (!ns)
		return NULL;
	/* A tenth of a second of sending, and never less than two frames. */
	ns->rate = spec->rate;
	ns->guest_host = spec->host;
	ns->bucket = (int64_t)(spec->rate / 10 > 2 * NET_FRAME_MAX ? spec->rate / 10
	                                                           : 2 * NET_FRAME_MAX);
	ns->tokens = ns->bucket;
	ns->refilled_ns = ns_now_ns();
	inet_pton(AF_INET, "10.0.2.0", &cfg.vnetwork);
	inet_pton(AF_INET, "255.255.255.0", &cfg.vnetmask);
	inet_pton(AF_INET, "10.0.2.2", &cfg.vhost);
	cfg.vdhcp_start.s_addr = htonl(0x0a000200u | spec->host);
	inet_pton(AF_INET, "10.0.2.3", &cfg.vnameserver);
	/*
	 * IPv6 by router advertisement: a ULA /64, which RFC 6724 ranks below
	 * IPv4 for public names, so programs take IPv6 where only it answers.
	 */
	cfg.in6_enabled = true;
	inet_pton(AF_INET6, "fd68:7573:6b01::", &cfg.vprefix_addr6);
	cfg.vprefix_len = 64;
	inet_pton(AF_INET6, "fd68:7573:6b01::2", &cfg.vhost6);
	inet_pton(AF_INET6, "fd68:7573:6b01::3", &cfg.vnameserver6);
	pthread_mutex_init(&ns->lock, NULL);
	pthread_cond_init(&ns->done_cond, NULL);
	ns->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ns->kick_fd < 0) {
		log_err("net: eventfd: %s", strerror(errno));
		free(ns);
		return NULL;
	}
	ns->slirp = ns_lib.new(&cfg, &ns_callbacks, ns);
	if (!ns->slirp) {
		log_err("net: libslirp refused its configuration (MTU %u)", spec->mtu);
		close(ns->kick_fd);
		free(ns);
		return NULL;
	}
	return ns;
}

int netstack_start(struct netstack *ns, struct virtio_net *dev)
{
	int ret;

	ns->dev = dev;
	ret = -pthread_create(&ns->thread, NULL, ns_thread, ns);
	if (ret)
		log_err("net: cannot start the network thread: %s", strerror(-ret));
	ns->started = ret == 0;
	return ret;
}

uint64_t netstack_tx_bytes(const struct netstack *ns)
{
	return atomic_load(&((struct netstack *)ns)->tx_bytes);
}

void netstack_destroy(struct netstack *ns)
{
	if (!ns)
		return;
	if (ns->started) {
		atomic_store(&ns->stop, true);
		netstack_kick(ns);
		pthread_join(ns->thread, NULL);
	}
	ns_lib.cleanup(ns->slirp);
	while (ns->pend_count)
		ns_pending_drop_front(ns);
	while (ns->timers)
		ns_timer_free(ns->timers, ns);
	close(ns->kick_fd);
	pthread_cond_destroy(&ns->done_cond);
	pthread_mutex_destroy(&ns->lock);
	free(ns);
}
