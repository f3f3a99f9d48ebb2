/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NET_DNS_H
#define HUSK_NET_DNS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* huskd's DNS forwarder for sandboxes (net_dns.c says how it is reached). */
struct net_dns;
struct in_addr;

/* What the forwarder asks of the sandboxes' lists; ctx is given at open. */
struct net_dns_hooks {
	/* Whether client (a sandbox's address) may not ask for qname: answered REFUSED. */
	bool (*refuse)(void *ctx, struct in_addr client, const char *qname);
	/* Each address of an answer (AF_INET: 4 bytes, AF_INET6: 16) relayed to client for qname,
	 * with its TTL. */
	void (*answer)(void *ctx, struct in_addr client, const char *qname, int family,
	               const uint8_t *ip, uint32_t ttl);
};

/*
 * Listens on UDP port (all addresses; only the sandboxes' 10.233/16 are
 * answered) and forwards to upstream (an IPv4 address; NULL: the host's
 * resolver from /etc/resolv.conf). 0, or -errno with why.
 */
int net_dns_open(uv_loop_t *loop, uint16_t port, const char *upstream,
                 const struct net_dns_hooks *hooks, void *ctx, struct net_dns **out, char *why,
                 size_t len) __attribute__((warn_unused_result));
/* Closes it on the loop; freed once libuv lets go. */
void net_dns_close(struct net_dns *d);

#endif
