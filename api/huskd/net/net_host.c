// SPDX-License-Identifier: MIT
/* huskd's nftables table (libnftables) and the sandboxes' veth slots. */
#include "net_host.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#include "net_dns.h"

struct net_host {
	struct net_dns *dns;
	uint8_t taken[JAIL_NET_SLOTS / 8];
	unsigned next;
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
	"  chain egress {\n"
	"    oifname \"" JAIL_IF_PREFIX "*\" jump refuse\n"
	"    meta nfproto ipv6 jump refuse\n"
	"    ip daddr @blocked4 jump refuse\n"
	"    meta l4proto { tcp, udp } th dport 53 jump refuse\n"
	"  }\n"
	"  chain refuse {\n"
	"    meta l4proto tcp reject with tcp reset\n"
	"    reject with icmpx admin-prohibited\n"
	"  }\n"
	"  chain postrouting {\n"
	"    type nat hook postrouting priority srcnat; policy accept;\n"
	"    ip saddr " JAIL_NET_PREFIX " oifname != \"" JAIL_IF_PREFIX "*\" masquerade\n"
	"  }\n"
	"}\n";

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

int net_host_open(uv_loop_t *loop, uint16_t dns_port, const char *dns_upstream,
                  struct net_host **out, char *why, size_t len)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	struct net_host *n = calloc(1, sizeof(*n));
	char rules[sizeof(ruleset) + 64];
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
	rc = net_dns_open(loop, dns_port, dns_upstream, &n->dns, why, len);
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
	rc = nft_run_cmd_from_buffer(nft, rules);
	if (rc) {
		const char *e = nft_ctx_get_error_buffer(nft);
		size_t l = e ? strcspn(e, "\n") : 0;

		snprintf(why, len,
		         "cannot install huskd's nftables table (%.*s); huskd must run as root on "
		         "a kernel with nf_tables",
		         (int)(l > 200 ? 200 : l), e ? e : "");
		nft_ctx_free(nft);
		net_host_close(n);
		return -EPERM;
	}
	nft_ctx_free(nft);
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
		return 0;
	}
	return -ENOSPC;
}
