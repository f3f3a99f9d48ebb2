// SPDX-License-Identifier: MIT
/* huskd's nftables table (libnftables) and the sandboxes' veth slots. */
#include "net_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#include "net_dns.h"
#include "net_host_priv.h"
#include "net_policy.h"

/*
 * One transaction: the table is made if missing, deleted, and made anew.
 * "reject" answers at once (a TCP reset, or ICMP administratively
 * prohibited), so a blocked connection fails in the guest instead of
 * hanging. Traffic to the host's own addresses arrives on the input hook;
 * everything else a sandbox sends is forwarded, and checked there.
 */
/*
 * %1$u: the DNS forwarder's port (net_dns.c): every UDP query a sandbox sends,
 * to any address, goes there. %2$s: IPv6's rule - the blocked ranges, or all
 * of it where the host has no IPv6 to forward.
 */
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
	/* Unspecified, loopback, v4-mapped and NAT64 (IPv4 by another way), discard, IETF
         * protocol space (Teredo), 6to4, ULA, link-local, site-local, multicast. */
	"  set blocked6 {\n"
	"    type ipv6_addr; flags interval;\n"
	"    elements = { ::/127, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 100::/64,\n"
	"                 2001::/23, 2002::/16, fc00::/7, fe80::/10, fec0::/10, ff00::/8 }\n"
	"  }\n"
	"  chain prerouting {\n"
	"    type nat hook prerouting priority dstnat; policy accept;\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" udp dport 53 redirect to :%1$u\n"
	"  }\n"
	"  chain input {\n"
	"    type filter hook input priority filter; policy accept;\n"
	"    iifname \"" JAIL_IF_PREFIX "*\" udp dport %1$u accept\n"
	/* Neighbour discovery: without it the namespace cannot find its IPv6 gateway. */
	"    iifname \"" JAIL_IF_PREFIX "*\" icmpv6 type { nd-neighbor-solicit, "
	"nd-neighbor-advert } accept\n"
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
	"    %2$s\n"
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
	"    ip6 saddr " JAIL_NET6_PREFIX " oifname != \"" JAIL_IF_PREFIX "*\" masquerade\n"
	"  }\n"
	"}\n";

int net_host_nft(struct net_host *n, const char *cmds, char *why, size_t len)
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
	if (nft_ctx_buffer_output(n->nft) == 0 && net_host_nft(n, cmd, NULL, 0) == 0)
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

static int sysctl_read(const char *path, char *v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, v, 1) : -1;

	if (fd >= 0)
		close(fd);
	return n == 1 ? 0 : -1;
}

static int sysctl_write(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
		rc = -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/*
 * IPv6 forwarding, where the host has IPv6. Once it is on, Linux ignores
 * router advertisements on interfaces whose accept_ra is 1, and a host whose
 * routes come from them would lose them: those get 2 (take them anyway)
 * first. False: it could not be turned on.
 */
static bool forwarding6_on(void)
{
	const char *conf = "/proc/sys/net/ipv6/conf";
	char path[PATH_MAX], v;
	struct dirent *e;
	DIR *d;

	if (sysctl_read("/proc/sys/net/ipv6/conf/all/forwarding", &v))
		return false;
	if (v == '1')
		return true;
	d = opendir(conf);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, "all"))
			continue;
		snprintf(path, sizeof(path), "%s/%s/accept_ra", conf, e->d_name);
		if (sysctl_read(path, &v) == 0 && v == '1')
			(void)sysctl_write(path, "2");
	}
	if (d)
		closedir(d);
	return sysctl_write("/proc/sys/net/ipv6/conf/all/forwarding", "1") == 0;
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
	char rules[sizeof(ruleset) + 128];
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
	/* IPv6 where the host has it; the rules first, then the forwarding, as for IPv4. */
	n->v6 = access("/proc/sys/net/ipv6/conf/all/forwarding", W_OK) == 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(rules, sizeof(rules), ruleset, (unsigned)dns_port,
	         n->v6 ? "ip6 daddr @blocked6 jump refuse" : "meta nfproto ipv6 jump refuse");
#pragma GCC diagnostic pop
	nft_ctx_buffer_error(nft);
	n->nft = nft;
	/* Sandboxes running on from an earlier huskd keep what they were counted. */
	j = counters_list(n, "list counters table inet husk");
	counters_bytes(j, n->carried, -1);
	json_decref(j);
	/* And what their DNS answers taught their lists, until those answers expire. */
	n->learned = net_learned_take(counters_list(n, "list table inet husk"));
	rc = net_host_nft(n, rules, why, len);
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
	if (n->v6 && !forwarding6_on()) {
		n->v6 = false;
		if (net_host_nft(n, "insert rule inet husk egress meta nfproto ipv6 jump refuse\n",
		                 why, len)) {
			net_host_close(n);
			return -EPERM;
		}
	}
	*out = n;
	return 0;
}

bool net_host_ipv6(const struct net_host *n)
{
	return n && n->v6;
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
		net_learned_forget(n, s);
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
		rc = net_host_nft(n, cmds, why, len);
	else
		snprintf(why, len, "the sandbox's lists are too long for one rule set");
	free(cmds);
	if (!rc)
		net_learned_give(n, slot);
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
		(void)net_host_nft(n, cmds, NULL, 0); /* gone with a restart's new table: fine */
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
	return net_host_nft(n, cmds, why, len);
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
	(void)net_host_nft(n, cmds, NULL, 0);
	snprintf(cmds, sizeof(cmds), "delete counter inet husk c%u\n", slot);
	(void)net_host_nft(n, cmds, NULL, 0);
}
