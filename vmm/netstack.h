/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NETSTACK_H
#define HUSK_NETSTACK_H

#include <stdint.h>

struct net_spec;
struct virtio_net;

/*
 * The guest's network: libslirp on a thread of its own, between a
 * virtio-net device and the host's sockets. It gives the guest DHCP
 * (10.0.2.15/24, gateway 10.0.2.2), a DNS forwarder at 10.0.2.3 and NAT
 * through ordinary sockets, so the VMM needs no network privilege; what
 * those sockets may reach is decided outside it (the network namespace it
 * runs in). The host's loopback is never reachable through 10.0.2.2.
 */
struct netstack;

/*
 * A stack for spec's frames (spec->mtu bytes of payload), the guest's
 * sending held to spec->rate; NULL and logged on failure.
 */
struct netstack *netstack_create(const struct net_spec *spec);

/*
 * Connections to the Unix socket path (made here; a stale one is replaced)
 * reach the guest's TCP port: how the host opens an exposed port without
 * any network of its own. Before netstack_start, or after it from one other
 * thread (the control socket's), which waits for the network thread to add
 * it. A port already exposed is left as it is. 0 or -errno (-ENOSPC past
 * 64 ports, -ETIMEDOUT if the network thread does not answer).
 */
int netstack_expose(struct netstack *ns, unsigned port, const char *path)
	__attribute__((warn_unused_result));

/* What a virtio-net device's queue notification calls: wakes the thread. ctx is the stack. */
void netstack_kick(void *ctx);

/* Starts the thread moving frames between dev and the stack; 0 or -errno. */
int netstack_start(struct netstack *ns, struct virtio_net *dev) __attribute__((warn_unused_result));

/* Bytes the guest sent out through the stack so far (IP packets, headers included). */
uint64_t netstack_tx_bytes(const struct netstack *ns);

/* Stops the thread, closes every connection, frees the stack. */
void netstack_destroy(struct netstack *ns);

#endif
