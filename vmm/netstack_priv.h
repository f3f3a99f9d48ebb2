/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NETSTACK_PRIV_H
#define HUSK_NETSTACK_PRIV_H

/* The stack's insides, for netstack.c and netstack_expose.c alone. */
#include <poll.h>
#include <pthread.h>
#include <slirp/libslirp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

#include "virtio/net.h"

/* Frames held for a guest with no receive buffers posted: enough for a TCP window burst. */
#define NS_PENDING_MAX 512
#define NS_PENDING_BYTES (8u << 20)
/* Frames taken from the guest per turn of the loop, so receiving is not starved. */
#define NS_TX_BUDGET 128
#define NS_POLL_MAX 4096
/* fds[0] our kick eventfd, [1] and [2] the receive and transmit queues' notifications. */
#define NS_FIXED_FDS 3
/* Guest ports served at host sockets: each is a listening socket of slirp's. */
#define NS_EXPOSED_MAX 64
/* How long the control socket waits for the network thread to take a request. */
#define NS_EXPOSE_WAIT_S 5

struct ns_timer {
	SlirpTimerId id;
	void *cb_opaque;
	int64_t expire_ms; /* -1: not armed */
	struct ns_timer *next;
};

struct ns_frame {
	size_t len;
	uint8_t data[];
};

struct netstack {
	Slirp *slirp;
	struct virtio_net *dev;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	int kick_fd;
	struct pollfd fds[NS_POLL_MAX];
	unsigned nfds;
	struct ns_timer *timers;
	struct ns_frame *pending[NS_PENDING_MAX];
	unsigned pend_head, pend_count;
	size_t pend_bytes;
	_Atomic uint64_t tx_bytes;
	/* The guest's sending rate: a token bucket in bytes, refilled at rate per second. */
	uint64_t rate;
	uint8_t guest_host; /* the guest is 10.0.2.<guest_host>: where forwarded ports go */
	int64_t tokens, bucket, refilled_ns;
	bool throttled; /* frames wait in the transmit queue for tokens */
	/* A port to expose, handed from the main loop to the thread (which alone calls slirp). */
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	struct {
		unsigned port;
		char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
		bool pending, done;
		int result;
	} req;
	uint16_t exposed[NS_EXPOSED_MAX];
	unsigned nr_exposed;
	uint8_t txbuf[NET_FRAME_MAX];
};

/* The libslirp calls the stack makes, from the library loaded at its first use (netstack_lib.c). */
struct netstack_lib {
	__typeof__(slirp_new) *new;
	__typeof__(slirp_cleanup) *cleanup;
	__typeof__(slirp_input) *input;
	__typeof__(slirp_pollfds_fill) *pollfds_fill;
	__typeof__(slirp_pollfds_poll) *pollfds_poll;
	__typeof__(slirp_handle_timer) *handle_timer;
	__typeof__(slirp_add_hostxfwd) *add_hostxfwd;
};
extern struct netstack_lib ns_lib;
/* Loads libslirp once, before the VMM confines itself: 0, or -errno with err. */
int netstack_lib_load(char *err, size_t errlen) __attribute__((warn_unused_result));

/* On the network thread, woken: adds a port the control socket asked for. */
void ns_expose_serve(struct netstack *ns);
void netstack_kick(void *ctx);

#endif
