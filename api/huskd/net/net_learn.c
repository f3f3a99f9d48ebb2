// SPDX-License-Identifier: MIT
/*
 * What the sandboxes' DNS answers teach their lists: the addresses of an
 * allowed (or denied) name go into the sandbox's sets for the answer's
 * lifetime, and outlive a huskd restart in the new table.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "net_host_priv.h"
#include "net_policy.h"

/* The DNS-learned sets: IPv4's, then IPv6's (net_policy.c names them). */
static const char *const kinds[] = {"ad", "dd", "ad6_", "dd6_"};

/* The family of a DNS-learned set's name ("ad<slot>", "dd6_<slot>"...), or 0. */
static int learned_set(const char *name)
{
	for (int k = 3; name && k >= 0; k--) {
		size_t l = strlen(kinds[k]);
		unsigned slot;
		char end;

		if (!strncmp(name, kinds[k], l) && name[l] >= '0' && name[l] <= '9' &&
		    sscanf(name + l, "%u%c", &slot, &end) == 1 && slot < JAIL_NET_SLOTS)
			return k < 2 ? AF_INET : AF_INET6;
	}
	return 0;
}

/*
 * From a dump of the old table (NULL is fine): each DNS-learned set with its
 * elements' addresses and the seconds they have left, as
 * {"ad3": [["203.0.113.10", 287], ...], "ad6_3": [["2001:db8::10", 287]]}.
 */
json_t *net_learned_take(json_t *j)
{
	json_t *out = json_object(), *v, *e;
	size_t i, k;

	json_array_foreach(json_object_get(j, "nftables"), i, v)
	{
		json_t *set = json_object_get(v, "set");
		const char *name = json_string_value(json_object_get(set, "name"));
		json_t *list = json_array();
		int family = learned_set(name);

		if (!family) {
			json_decref(list);
			continue;
		}
		json_array_foreach(json_object_get(set, "elem"), k, e)
		{
			json_t *el = json_object_get(e, "elem");
			const char *addr = json_string_value(json_object_get(el, "val"));
			json_int_t left = json_integer_value(json_object_get(el, "expires"));
			uint8_t a[16];

			if (addr && inet_pton(family, addr, a) == 1 && left > 0 && left <= 86400)
				json_array_append_new(list, json_pack("[sI]", addr, left));
		}
		if (json_array_size(list))
			json_object_set_new(out, name, list);
		else
			json_decref(list);
	}
	json_decref(j);
	return out;
}

void net_learned_forget(struct net_host *n, unsigned slot)
{
	char name[16];

	for (int k = 0; k < 4; k++) {
		snprintf(name, sizeof(name), "%s%u", kinds[k], slot);
		json_object_del(n->learned, name);
	}
}

/* A sandbox's lists made again after a restart: what DNS had taught them goes back in. */
void net_learned_give(struct net_host *n, unsigned slot)
{
	char name[16], cmd[200];
	json_t *list, *e;
	size_t i;

	for (int k = 0; k < 4 && n->learned; k++) {
		snprintf(name, sizeof(name), "%s%u", kinds[k], slot);
		list = json_object_get(n->learned, name);
		json_array_foreach(list, i, e)
		{
			snprintf(cmd, sizeof(cmd),
			         "add element inet husk %s { %s timeout %llus }\n", name,
			         json_string_value(json_array_get(e, 0)),
			         (unsigned long long)json_integer_value(json_array_get(e, 1)));
			(void)net_host_nft(n, cmd, NULL, 0);
		}
	}
	net_learned_forget(n, slot);
}

/* The slot whose namespace end (.2 of its /30) addr is, or -1. */
static int slot_of(struct in_addr addr)
{
	uint32_t a = ntohl(addr.s_addr);

	if ((a >> 16) != ((10u << 8) | 233u) || (a & 3) != 2)
		return -1;
	return (int)((a >> 2) & (JAIL_NET_SLOTS - 1));
}

bool net_host_dns_refuse(void *ctx, struct in_addr client, const char *qname)
{
	struct net_host *n = ctx;
	int s = slot_of(client);

	return s >= 0 && n->policy[s] && net_policy_names(&n->policy[s]->deny, qname);
}

void net_host_dns_answer(void *ctx, struct in_addr client, const char *qname, int family,
                         const uint8_t *ip, uint32_t ttl)
{
	struct net_host *n = ctx;
	int s = slot_of(client);
	const char *set;
	char cmd[200], addr[INET6_ADDRSTRLEN];

	if (s < 0 || !n->policy[s] || (family != AF_INET && family != AF_INET6) ||
	    !inet_ntop(family, ip, addr, sizeof(addr)))
		return;
	if (net_policy_names(&n->policy[s]->allow, qname))
		set = family == AF_INET ? "ad" : "ad6_";
	else if (net_policy_names(&n->policy[s]->deny, qname))
		set = family == AF_INET ? "dd" : "dd6_";
	else
		return;
	/* For the answer's lifetime, within bounds: a TTL of 0 still lets the connect follow. */
	ttl = ttl < 30 ? 30 : ttl > 86400 ? 86400 : ttl;
	snprintf(cmd, sizeof(cmd), "add element inet husk %s%d { %s timeout %us }\n", set, s, addr,
	         ttl);
	(void)net_host_nft(n, cmd, NULL, 0);
}
