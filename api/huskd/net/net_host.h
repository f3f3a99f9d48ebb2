/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NET_HOST_H
#define HUSK_NET_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/*
 * The host's side of sandbox networking. A sandbox with network runs its
 * VMM under husk-jail, in a namespace whose only way out is the veth pair
 * of its slot (api/jail/jail.h). What may leave through those pairs is
 * decided here, by the kernel: one nftables table of huskd's ("inet husk")
 * that masquerades the sandboxes' traffic to the public internet and
 * rejects, at once, everything to the host itself, loopback, private and
 * shared ranges (RFC 1918, 100.64/10), link-local (metadata services
 * included), multicast and reserved space, IPv6's private, local and
 * IPv4-embedding ranges (all IPv6 on a host without it), and every other sandbox.
 * The rules name no sandbox, so nothing is left behind when a VMM dies.
 */
struct net_host;

/*
 * Starts the sandboxes' DNS forwarder on dns_port (net_dns.h), installs the
 * table (replacing huskd's earlier one in one transaction, so running
 * sandboxes are never unguarded) and turns on IPv4 forwarding (and IPv6's,
 * where the host has IPv6).
 * Returns 0, or -errno with why in why (no root, no nf_tables): huskd then
 * runs sandboxes without network only.
 */
int net_host_open(uv_loop_t *loop, uint16_t dns_port, const char *dns_upstream,
                  struct net_host **out, char *why, size_t len) __attribute__((warn_unused_result));
void net_host_close(struct net_host *n);
/* Whether IPv6 is forwarded too (the host has it): sandboxes reach the IPv6 internet. */
bool net_host_ipv6(const struct net_host *n);

struct net_policy;
struct in_addr;

/*
 * Gives slot's sandbox its allow and deny lists (net_policy.h) before its
 * VMM starts, replacing any; a policy with nothing in it needs no rules.
 * 0, or -errno with why.
 */
int net_host_policy_set(struct net_host *n, unsigned slot, const struct net_policy *p, char *why,
                        size_t len) __attribute__((warn_unused_result));
/* Takes slot's lists away (its VMM ended). */
void net_host_policy_clear(struct net_host *n, unsigned slot);

/*
 * Egress accounting: what the kernel let out of slot's pair, counted from
 * count_start (before its VMM runs) to count_stop (after it ended). An
 * adopted slot's count (a VMM that outlived a huskd) includes what the
 * earlier huskd counted.
 */
int net_host_count_start(struct net_host *n, unsigned slot, bool adopted, char *why, size_t len)
	__attribute__((warn_unused_result));
uint64_t net_host_count(struct net_host *n, unsigned slot);
/* Every slot's count at once (out: JAIL_NET_SLOTS entries), one dump of the table: 0 or -errno. */
int net_host_counts(struct net_host *n, uint64_t *out);
void net_host_count_stop(struct net_host *n, unsigned slot);

/* The DNS forwarder's questions (net_dns.h's hooks); ctx is the net_host. */
bool net_host_dns_refuse(void *ctx, struct in_addr client, const char *qname);
void net_host_dns_answer(void *ctx, struct in_addr client, const char *qname, int family,
                         const uint8_t *ip, uint32_t ttl);

/* A free slot (its veth pair does not exist), marked taken; -ENOSPC when all are. */
int net_host_slot_take(struct net_host *n, unsigned *slot) __attribute__((warn_unused_result));
/* Marks slot taken: an adopted VMM holds it. */
void net_host_slot_hold(struct net_host *n, unsigned slot);
void net_host_slot_put(struct net_host *n, unsigned slot);

#endif
