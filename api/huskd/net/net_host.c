// SPDX-License-Identifier: MIT
/* huskd's nftables table (libnftables) and the sandboxes' veth slots. */
#include "net_host.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#include "net_dns.h"
#include "net_policy.h"

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
};

/*
 * One transaction: the table is made if missing, deleted, and made anew.
 * "reject" answers at once (a TCP reset, or ICMP administratively
 * prohibited), so a blocked connection fails in the guest instead of
 * hanging. Traffic to the host's own addresses arrives on the input hook;
 * everything else a sandbox sends is forwarded, and checked there.
 */
/* %1$u: the DNS forwarder's port (net_dns.c): every UDP query a sandbox sends, to any address, goes
 * there. */
static const char ruleset[] =
	"table inet husk\n"
	"delete table inet husk\n"
	"table inet husk {\n"
	"  set blocked4 {\n"
	"    type ipv4_addr; flags interval;\n"
	"    elements = { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16,\n"
	"                 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15,\n"
	"                 224.0.0.0/4, 240.0.0.0/4 }\n"
	"  }\n"
	"  chain prerouting {\n"
	"    type nat hook prerouting priority dstnat; policy accept;\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" udp dport 53 redirect to :%1$u\n"
	"  }\n"
	"  chain input {\n"
	"    type filter hook input priority filter; policy accept;\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" udp dport %1$u accept\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" jump refuse\n"
	"  }\n"
	"  chain forward {\n"
	"    type filter hook forward priority filter; policy accept;\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" jump egress\n"
	"    oifname \"" JAIL_IF_PREFIX "*\" ct state established,related accept\n"
	"    oifname \"" JAIL_IF_PREFIX "*\" jump refuse\n"
	"  }\n"
	"  map slots {\n"
	"    type ifname : verdict;\n"
	"  }\n"
	"  chain egress {\n"
	"    oifname \"" JAIL_IF_PREFIX "*\" jump refuse\n"
	"    meta nfproto ipv6 jump refuse\n"
	"    ip daddr @blocked4 jump refuse\n"
	"    iifname vmap @slots\n"
	"    meta l4proto { tcp, udp } th dport 53 jump refuse\n"
	"  }\n"
	"  chain refuse {\n"
	"    meta l4proto tcp reject with tcp reset\n"
	"    reject with icmpx admin-prohibited\n"
	"  }\n"
	"  map egress_bytes {\n"
	"    type ifname : counter;\n"
	"  }\n"
	/* After every verdict above: only what was let out is counted. */
	"  chain account {\n"
	"    type filter hook forward priority filter + 10; policy accept;\n"
	"    counter name iifname map @egress_bytes\n"
	"  }\n"
	"  chain postrouting {\n"
	"    type nat hook postrouting priority srcnat; policy accept;\n"
	"    ip saddr " JAIL_NET_PREFIX " oifname != \"" JAIL_IF_PREFIX "*\" masquerade\n"
	"  }\n"
	"}\n";

/* Runs nftables commands; 0, or -EINVAL with nft's first line of complaint in why. */
static int nft_run(struct net_host *n, const char *cmds, char *why, size_t len)
{
	const char *e;
	size_t l;

	/* Reading the buffer empties it: one command's complaint never shows as another's. */
	if (nft_run_cmd_from_buffer(n->nft, cmds) == 0) {
		(void)nft_ctx_get_error_buffer(n->nft);
		return 0;
	}
	e = nft_ctx_get_error_buffer(n->nft);
	l = e ? strcspn(e, "\n") : 0;
	if (why)
		snprintf(why, len, "nftables refused the sandbox's rules: %.*s",
		         (int)(l > 200 ? 200 : l), e ? e : "");
	return -EINVAL;
}

/* The counters of huskd's table as nft lists them in JSON ({"nftables": [...]}); NULL if none. */
static json_t *counters_list(struct net_host *n, const char *cmd)
{
	json_t *j = NULL;

	nft_ctx_output_set_flags(n->nft, NFT_CTX_OUTPUT_JSON);
	if (nft_ctx_buffer_output(n->nft) == 0 && nft_run(n, cmd, NULL, 0) == 0)
		j = json_loads(nft_ctx_get_output_buffer(n->nft), 0, NULL);
	nft_ctx_unbuffer_output(n->nft);
	nft_ctx_output_set_flags(n->nft, 0);
	return j;
}

/*
 * For each counter "c<SLOT>" in j: out[slot] = its bytes, or with only >= 0
 * out[0] = slot only's.
 */
static void counters_bytes(json_t *j, uint64_t *out, int only)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(j, "nftables"), i, v)
	{
		json_t *c = json_object_get(v, "counter");
		const char *name = json_string_value(json_object_get(c, "name"));
		unsigned slot;
		char end;

		if (!name || sscanf(name, "c%u%c", &slot, &end) != 1 || slot >= JAIL_NET_SLOTS ||
		    (only >= 0 && slot != (unsigned)only))
			continue;
		out[only >= 0 ? 0 : slot] =
			(uint64_t)json_integer_value(json_object_get(c, "bytes"));
	}
}

/*
 * From a dump of the old table (NULL is fine): each DNS-learned set ("ad<slot>",
 * "dd<slot>") with its elements' addresses and the seconds they have left,
 * as {"ad3": [["203.0.113.10", 287], ...]}.
 */
static json_t *learned_take(json_t *j)
{
	json_t *out = json_object(), *v, *e;
	size_t i, k;

	json_array_foreach(json_object_get(j, "nftables"), i, v)
	{
		json_t *set = json_object_get(v, "set");
		const char *name = json_string_value(json_object_get(set, "name"));
		json_t *list = json_array();
		unsigned slot;
		char kind[3], end;

		if (!name || sscanf(name, "%2[ad]%u%c", kind, &slot, &end) != 2 ||
		    (strcmp(kind, "ad") && strcmp(kind, "dd")) || slot >= JAIL_NET_SLOTS) {
			json_decref(list);
			continue;
		}
		json_array_foreach(json_object_get(set, "elem"), k, e)
		{
			json_t *el = json_object_get(e, "elem");
			const char *addr = json_string_value(json_object_get(el, "val"));
			json_int_t left = json_integer_value(json_object_get(el, "expires"));
			struct in_addr a;

			if (addr && inet_pton(AF_INET, addr, &a) == 1 && left > 0 && left <= 86400)
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

static void learned_forget(struct net_host *n, unsigned slot)
{
	char name[16];

	snprintf(name, sizeof(name), "ad%u", slot);
	json_object_del(n->learned, name);
	snprintf(name, sizeof(name), "dd%u", slot);
	json_object_del(n->learned, name);
}

/* A sandbox's lists made again after a restart: what DNS had taught them goes back in. */
static void learned_give(struct net_host *n, unsigned slot)
{
	static const char *const kinds[] = {"ad", "dd"};
	char name[16], cmd[160];
	json_t *list, *e;
	size_t i;

	for (int k = 0; k < 2 && n->learned; k++) {
		snprintf(name, sizeof(name), "%s%u", kinds[k], slot);
		list = json_object_get(n->learned, name);
		json_array_foreach(list, i, e)
		{
			snprintf(cmd, sizeof(cmd),
			         "add element inet husk %s { %s timeout %llus }\n", name,
			         json_string_value(json_array_get(e, 0)),
			         (unsigned long long)json_integer_value(json_array_get(e, 1)));
			(void)nft_run(n, cmd, NULL, 0);
		}
	}
	learned_forget(n, slot);
}

static int forwarding_on(char *why, size_t len)
{
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "1", 1) != 1) {
		int e = errno;

		snprintf(why, len, "cannot turn on IPv4 forwarding: %s", strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

static const struct net_dns_hooks hooks = {
	.refuse = net_host_dns_refuse,
	.answer = net_host_dns_answer,
};

int net_host_open(uv_loop_t *loop, uint16_t dns_port, const char *dns_upstream,
                  struct net_host **out, char *why, size_t len)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	struct net_host *n = calloc(1, sizeof(*n));
	char rules[sizeof(ruleset) + 64];
	json_t *j;
	int rc;

	*out = NULL;
	if (!nft || !n) {
		snprintf(why, len, "out of memory");
		if (nft)
			nft_ctx_free(nft);
		free(n);
		return -ENOMEM;
	}
	/* The forwarder first: a table redirecting DNS to nothing would break it. */
	rc = net_dns_open(loop, dns_port, dns_upstream, &hooks, n, &n->dns, why, len);
	if (rc) {
		nft_ctx_free(nft);
		free(n);
		return rc;
	}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(rules, sizeof(rules), ruleset, (unsigned)dns_port);
#pragma GCC diagnostic pop
	nft_ctx_buffer_error(nft);
	n->nft = nft;
	/* Sandboxes running on from an earlier huskd keep what they were counted. */
	j = counters_list(n, "list counters table inet husk");
	counters_bytes(j, n->carried, -1);
	json_decref(j);
	/* And what their DNS answers taught their lists, until those answers expire. */
	n->learned = learned_take(counters_list(n, "list table inet husk"));
	rc = nft_run(n, rules, why, len);
	if (rc) {
		snprintf(why + strlen(why), len - strlen(why),
		         "; huskd must run as root on a kernel with nf_tables (and its nft_objref, "
		         "nft_masq, nft_redir, nft_reject modules)");
		net_host_close(n);
		return -EPERM;
	}
	rc = forwarding_on(why, len);
	if (rc) {
		net_host_close(n);
		return rc;
	}
	*out = n;
	return 0;
}

void net_host_close(struct net_host *n)
{
	/* The table stays: sandboxes outlive huskd, and must stay guarded. */
	if (!n)
		return;
	net_dns_close(n->dns);
	json_decref(n->learned);
	if (n->nft)
		nft_ctx_free(n->nft);
	for (unsigned i = 0; i < JAIL_NET_SLOTS; i++)
		free(n->policy[i]);
	free(n);
}

static int slot_taken(const struct net_host *n, unsigned s)
{
	return n->taken[s / 8] & (1u << (s % 8));
}

void net_host_slot_hold(struct net_host *n, unsigned slot)
{
	if (n && slot < JAIL_NET_SLOTS)
		n->taken[slot / 8] |= (uint8_t)(1u << (slot % 8));
}

void net_host_slot_put(struct net_host *n, unsigned slot)
{
	if (n && slot < JAIL_NET_SLOTS)
		n->taken[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
}

int net_host_slot_take(struct net_host *n, unsigned *slot)
{
	char name[IFNAMSIZ];

	/* Round the ring: a pair just freed may still be going away in the kernel. */
	for (unsigned i = 0; i < JAIL_NET_SLOTS; i++) {
		unsigned s = (n->next + i) % JAIL_NET_SLOTS;

		if (slot_taken(n, s))
			continue;
		snprintf(name, sizeof(name), JAIL_IF_PREFIX "%u", s);
		if (if_nametoindex(name))
			continue;
		net_host_slot_hold(n, s);
		n->next = (s + 1) % JAIL_NET_SLOTS;
		*slot = s;
		/* A new sandbox learns nothing from the one that had its slot before a restart. */
		learned_forget(n, s);
		return 0;
	}
	return -ENOSPC;
}

int net_host_policy_set(struct net_host *n, unsigned slot, const struct net_policy *p, char *why,
                        size_t len)
{
	char *cmds;
	int rc;

	if (slot >= JAIL_NET_SLOTS)
		return -EINVAL;
	net_host_policy_clear(n, slot);
	if (!p || !net_policy_any(p))
		return 0;
	n->policy[slot] = malloc(sizeof(*p));
	cmds = malloc(64 * 1024);
	if (!n->policy[slot] || !cmds) {
		free(cmds);
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	*n->policy[slot] = *p;
	rc = net_policy_rules(p, slot, cmds, 64 * 1024);
	if (!rc)
		rc = nft_run(n, cmds, why, len);
	else
		snprintf(why, len, "the sandbox's lists are too long for one rule set");
	free(cmds);
	if (!rc)
		learned_give(n, slot);
	if (rc)
		net_host_policy_clear(n, slot);
	return rc;
}

void net_host_policy_clear(struct net_host *n, unsigned slot)
{
	char cmds[1024];

	if (!n || slot >= JAIL_NET_SLOTS || !n->policy[slot])
		return;
	free(n->policy[slot]);
	n->policy[slot] = NULL;
	if (net_policy_unrules(slot, cmds, sizeof(cmds)) == 0)
		(void)nft_run(n, cmds, NULL, 0); /* gone with a restart's new table: fine */
}

int net_host_count_start(struct net_host *n, unsigned slot, bool adopted, char *why, size_t len)
{
	char cmds[256];

	if (slot >= JAIL_NET_SLOTS)
		return -EINVAL;
	if (!adopted) {
		/* A slot reused after a huskd that died counting it starts from zero. */
		n->carried[slot] = 0;
		net_host_count_stop(n, slot);
	}
	snprintf(cmds, sizeof(cmds),
	         "add counter inet husk c%1$u\n"
	         "add element inet husk egress_bytes { \"" JAIL_IF_PREFIX "%1$u\" : \"c%1$u\" }\n",
	         slot);
	return nft_run(n, cmds, why, len);
}

uint64_t net_host_count(struct net_host *n, unsigned slot)
{
	uint64_t bytes[1] = {0};
	char cmd[64];
	json_t *j;

	if (!n || slot >= JAIL_NET_SLOTS)
		return 0;
	snprintf(cmd, sizeof(cmd), "list counter inet husk c%u", slot);
	j = counters_list(n, cmd);
	counters_bytes(j, bytes, (int)slot);
	json_decref(j);
	return bytes[0] + n->carried[slot];
}

int net_host_counts(struct net_host *n, uint64_t *out)
{
	json_t *j;

	if (!n)
		return -ENOENT;
	memset(out, 0, JAIL_NET_SLOTS * sizeof(*out));
	j = counters_list(n, "list counters table inet husk");
	if (!j)
		return -EIO;
	counters_bytes(j, out, -1);
	json_decref(j);
	for (unsigned s = 0; s < JAIL_NET_SLOTS; s++)
		out[s] += n->carried[s];
	return 0;
}

void net_host_count_stop(struct net_host *n, unsigned slot)
{
	char cmds[160];

	if (!n || slot >= JAIL_NET_SLOTS)
		return;
	n->carried[slot] = 0;
	/* Each may be missing (a restart's new table): one at a time. */
	snprintf(cmds, sizeof(cmds),
	         "delete element inet husk egress_bytes { \"" JAIL_IF_PREFIX "%u\" }\n", slot);
	(void)nft_run(n, cmds, NULL, 0);
	snprintf(cmds, sizeof(cmds), "delete counter inet husk c%u\n", slot);
	(void)nft_run(n, cmds, NULL, 0);
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

void net_host_dns_answer(void *ctx, struct in_addr client, const char *qname, const uint8_t ip[4],
                         uint32_t ttl)
{
	struct net_host *n = ctx;
	int s = slot_of(client);
	const char *set;
	char cmd[160];

	if (s < 0 || !n->policy[s])
		return;
	if (net_policy_names(&n->policy[s]->allow, qname))
		set = "ad";
	else if (net_policy_names(&n->policy[s]->deny, qname))
		set = "dd";
	else
		return;
	/* For the answer's lifetime, within bounds: a TTL of 0 still lets the connect follow. */
	ttl = ttl < 30 ? 30 : ttl > 86400 ? 86400 : ttl;
	snprintf(cmd, sizeof(cmd), "add element inet husk %s%d { %u.%u.%u.%u timeout %us }\n", set,
	         s, ip[0], ip[1], ip[2], ip[3], ttl);
	(void)nft_run(n, cmd, NULL, 0);
}
