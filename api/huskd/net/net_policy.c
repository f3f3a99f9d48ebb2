// SPDX-License-Identifier: MIT
#include "net_policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail.h"

/* An IPv4 or IPv6 address or CIDR, normalised into out; its family in *v6. */
static int cidr_parse(const char *s, char out[50], bool *v6)
{
	char addr[INET6_ADDRSTRLEN], *end;
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned char a[16];
	unsigned long bits;
	int af;

	if (alen == 0 || alen >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	*v6 = strchr(addr, ':') != NULL;
	af = *v6 ? AF_INET6 : AF_INET;
	bits = *v6 ? 128 : 32;
	if (inet_pton(af, addr, a) != 1)
		return -EINVAL;
	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		bits = strtoul(slash + 1, &end, 10);
		if (*end || bits > (*v6 ? 128u : 32u))
			return -EINVAL;
	}
	/* nftables wants the host bits clear: 203.0.113.7/24 means 203.0.113.0/24. */
	for (unsigned i = 0; i < (*v6 ? 16u : 4u); i++) {
		unsigned keep = bits >= 8 * (i + 1) ? 8
		                : bits > 8 * i      ? (unsigned)(bits - 8 * i)
		                                    : 0;

		a[i] &= (unsigned char)(0xff00u >> keep);
	}
	inet_ntop(af, a, addr, sizeof(addr));
	snprintf(out, 50, "%s/%lu", addr, bits);
	return 0;
}

/* A host name as DNS spells it (RFC 1123 labels), optionally under "*.". */
static int domain_parse(const char *s, char *out, size_t cap)
{
	const char *p = s;
	size_t n = 0, label = 0;

	if (!strncmp(p, "*.", 2))
		p += 2;
	if (!*p || strlen(s) >= cap || strlen(p) > 253)
		return -EINVAL;
	for (; *p; p++) {
		char ch = (char)tolower((unsigned char)*p);

		if (ch == '.') {
			if (label == 0 || p[-1] == '-')
				return -EINVAL;
			label = 0;
		} else if (isalnum((unsigned char)ch) || (ch == '-' && label > 0) || ch == '_') {
			if (++label > 63)
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	if (label == 0)
		return -EINVAL; /* a final dot, or nothing after "*." */
	for (p = s; *p; p++)
		out[n++] = (char)tolower((unsigned char)*p);
	out[n] = '\0';
	return 0;
}

int net_policy_add(struct net_list *list, const char *entry, char *why, size_t len)
{
	if (!entry || !*entry || strlen(entry) >= NET_POLICY_ENTRY) {
		snprintf(why, len, "an entry must be an IP address, a CIDR or a domain name");
		return -EINVAL;
	}
	if (list->n_cidr + list->n_domain >= NET_POLICY_MAX) {
		snprintf(why, len, "at most %d entries per list", NET_POLICY_MAX);
		return -EINVAL;
	}
	if (isdigit((unsigned char)entry[strlen(entry) - 1]) || strchr(entry, '/') ||
	    strchr(entry, ':')) {
		if (cidr_parse(entry, list->cidr[list->n_cidr], &list->cidr6[list->n_cidr]) == 0) {
			list->n_cidr++;
			return 0;
		}
		if (strchr(entry, '/') || strchr(entry, ':') ||
		    strspn(entry, "0123456789.") == strlen(entry)) {
			snprintf(why, len,
			         "'%s' is not an IP address or CIDR (e.g. 203.0.113.0/24, "
			         "2001:db8::/32)",
			         entry);
			return -EINVAL;
		}
	}
	if (domain_parse(entry, list->domain[list->n_domain], NET_POLICY_ENTRY)) {
		snprintf(why, len,
		         "'%s' is not an address, a CIDR or a domain name (example.com, "
		         "*.example.com)",
		         entry);
		return -EINVAL;
	}
	list->n_domain++;
	return 0;
}

bool net_policy_names(const struct net_list *list, const char *name)
{
	size_t n = strlen(name);

	for (unsigned i = 0; i < list->n_domain; i++) {
		const char *d = list->domain[i];

		if (!strncmp(d, "*.", 2)) {
			size_t l = strlen(d + 1); /* ".example.com" */

			if (n > l && !strcmp(name + n - l, d + 1))
				return true;
		} else if (!strcmp(name, d)) {
			return true;
		}
	}
	return false;
}

bool net_policy_any(const struct net_policy *p)
{
	return p->allow.n_cidr + p->allow.n_domain + p->deny.n_cidr + p->deny.n_domain > 0;
}

struct out {
	char *buf;
	size_t len, used;
	int err;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->used)
		o->err = -ENOSPC;
	else
		o->used += (size_t)n;
}

static void put_elements(struct out *o, const char *set, unsigned slot, const struct net_list *l,
                         bool v6)
{
	unsigned n = 0;

	for (unsigned i = 0; i < l->n_cidr; i++) {
		if (l->cidr6[i] != v6)
			continue;
		if (n++ == 0)
			put(o, "add element inet husk %s%u { ", set, slot);
		else
			put(o, ", ");
		put(o, "%s", l->cidr[i]);
	}
	if (n)
		put(o, " }\n");
}

/* The sets of one family: a (allow), ad (allowed by DNS), d (deny), dd (denied by DNS). */
static const char *const sets4[] = {"a", "ad", "d", "dd"};
static const char *const sets6[] = {"a6_", "ad6_", "d6_", "dd6_"};

int net_policy_rules(const struct net_policy *p, unsigned slot, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};
	bool allowlist = p->allow.n_cidr + p->allow.n_domain > 0;

	buf[0] = '\0';
	for (int f = 0; f < 2; f++) {
		const char *const *n = f ? sets6 : sets4, *type = f ? "ipv6_addr" : "ipv4_addr";

		put(&o, "add set inet husk %s%u { type %s; flags interval; }\n", n[0], slot, type);
		put(&o, "add set inet husk %s%u { type %s; flags timeout; }\n", n[1], slot, type);
		put(&o, "add set inet husk %s%u { type %s; flags interval; }\n", n[2], slot, type);
		put(&o, "add set inet husk %s%u { type %s; flags timeout; }\n", n[3], slot, type);
		put_elements(&o, n[0], slot, &p->allow, f);
		put_elements(&o, n[2], slot, &p->deny, f);
	}
	put(&o, "add chain inet husk p%u\n", slot);
	for (int f = 0; f < 2; f++) {
		const char *const *n = f ? sets6 : sets4, *ip = f ? "ip6" : "ip";

		put(&o, "add rule inet husk p%u %s daddr @%s%u jump refuse\n", slot, ip, n[2],
		    slot);
		put(&o, "add rule inet husk p%u %s daddr @%s%u jump refuse\n", slot, ip, n[3],
		    slot);
	}
	if (allowlist) {
		for (int f = 0; f < 2; f++) {
			const char *const *n = f ? sets6 : sets4, *ip = f ? "ip6" : "ip";

			put(&o, "add rule inet husk p%u %s daddr @%s%u return\n", slot, ip, n[0],
			    slot);
			put(&o, "add rule inet husk p%u %s daddr @%s%u return\n", slot, ip, n[1],
			    slot);
		}
		put(&o, "add rule inet husk p%u jump refuse\n", slot);
	}
	put(&o, "add element inet husk slots { \"" JAIL_IF_PREFIX "%u\" : jump p%u }\n", slot,
	    slot);
	return o.err;
}

int net_policy_unrules(unsigned slot, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};

	buf[0] = '\0';
	put(&o, "delete element inet husk slots { \"" JAIL_IF_PREFIX "%u\" }\n", slot);
	put(&o, "flush chain inet husk p%u\n", slot);
	put(&o, "delete chain inet husk p%u\n", slot);
	for (int i = 0; i < 4; i++)
		put(&o, "delete set inet husk %s%u\ndelete set inet husk %s%u\n", sets4[i], slot,
		    sets6[i], slot);
	return o.err;
}
