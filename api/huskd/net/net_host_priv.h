/* SPDX-License-Identifier: MIT */
#ifndef HUSK_NET_HOST_PRIV_H
#define HUSK_NET_HOST_PRIV_H

/* Shared by net_host.c (the table, slots, counts) and net_learn.c (what DNS answers teach). */
#include <jansson.h>
#include <nftables/libnftables.h>
#include <stdbool.h>

#include "jail.h"
#include "net_host.h"

struct net_host {
	struct net_dns *dns;
	struct nft_ctx *nft;
	struct net_policy *policy[JAIL_NET_SLOTS]; /* a running sandbox's lists, by slot */
	uint8_t taken[JAIL_NET_SLOTS / 8];
	unsigned next;
	uint64_t carried[JAIL_NET_SLOTS]; /* bytes counted by the table this one replaced */
	/* Addresses DNS answers let in or kept out, from the table this one replaced: set -> elems.
	 */
	json_t *learned;
	bool v6; /* IPv6 forwarded: the sandboxes reach the IPv6 internet too */
};

/* Runs nftables commands; 0, or -EINVAL with nft's first line of complaint in why. */
int net_host_nft(struct net_host *n, const char *cmds, char *why, size_t len);

/*
 * DNS-learned set elements carried over a restart: taken from a dump of
 * the old table (consumes j), forgotten for a slot a new sandbox takes,
 * given back to a slot's new sets.
 */
json_t *net_learned_take(json_t *j);
void net_learned_forget(struct net_host *n, unsigned slot);
void net_learned_give(struct net_host *n, unsigned slot);

#endif
