/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NET_POLICY_H
#define HUSK_NET_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A sandbox's allow and deny lists (network.allow, network.deny). Entries
 * are IPv4 or IPv6 addresses or CIDRs ("203.0.113.5", "203.0.113.0/24",
 * "2001:db8::/32") and domain
 * names, exact ("example.com") or with every name below ("*.example.com").
 * Deny entries are refused on top of huskd's defaults; a non-empty allow
 * list makes everything else refused. Neither opens what huskd refuses to
 * every sandbox (private ranges, the host, other sandboxes). A domain holds
 * for every port: the addresses its DNS answers give are added to the
 * sandbox's rules for the answer's TTL.
 */
#define NET_POLICY_MAX 64    /* entries per list */
#define NET_POLICY_ENTRY 256 /* bytes per entry, NUL included */

struct net_list {
	unsigned n_cidr, n_domain;
	char cidr[NET_POLICY_MAX][50];                 /* a.b.c.d/len or IPv6/len, normalised */
	bool cidr6[NET_POLICY_MAX];                    /* cidr[i] is IPv6 */
	char domain[NET_POLICY_MAX][NET_POLICY_ENTRY]; /* lower case; "*." kept */
};

struct net_policy {
	struct net_list allow, deny;
};

/*
 * Adds one entry to list. 0, or -EINVAL with the reason and the fix in why
 * (not an address, a CIDR or a domain name; too many entries).
 */
int net_policy_add(struct net_list *list, const char *entry, char *why, size_t len)
	__attribute__((warn_unused_result));

/* Whether name (lower case, no final dot) is one of list's domains. */
bool net_policy_names(const struct net_list *list, const char *name);

/* Whether the policy has anything in it (a sandbox without one needs no rules of its own). */
bool net_policy_any(const struct net_policy *p);

/*
 * The nftables commands that give slot's sandbox its policy (in huskd's
 * table, chain egress jumps to p<SLOT> through the map "slots"), or take
 * it away. Into buf; -ENOSPC if it does not fit.
 */
int net_policy_rules(const struct net_policy *p, unsigned slot, char *buf, size_t len);
int net_policy_unrules(unsigned slot, char *buf, size_t len);

#endif
