/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NET_DNS_H
#define HUSK_NET_DNS_H

#include <stdint.h>
#include <uv.h>

/* huskd's DNS forwarder for sandboxes (net_dns.c says how it is reached). */
struct net_dns;

/*
 * Listens on UDP port (all addresses; only the sandboxes' 10.233/16 are
 * answered) and forwards to upstream (an IPv4 address; NULL: the host's
 * resolver from /etc/resolv.conf). 0, or -errno with why.
 */
int net_dns_open(uv_loop_t *loop, uint16_t port, const char *upstream, struct net_dns **out,
                 char *why, size_t len) __attribute__((warn_unused_result));
/* Closes it on the loop; freed once libuv lets go. */
void net_dns_close(struct net_dns *d);

#endif
