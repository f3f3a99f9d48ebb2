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

static int cidr_parse(const char *s, char out[20])
{
	char addr[16], *end;
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits = 32;
	struct in_addr a;
	uint32_t mask;

	if (alen == 0 || alen >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, &a) != 1)
		return -EINVAL;
	if (slash) {
		bits = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || bits > 32)
			return -EINVAL;
	}
	/* nftables wants the host bits clear: 203.0.113.7/24 means 203.0.113.0/24. */
	mask = bits ? htonl(~0u << (32 - bits)) : 0;
	a.s_addr &= mask;
	inet_ntop(AF_INET, &a, addr, sizeof(addr));
	snprintf(out, 20, "%s/%lu", addr, bits);
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
		snprintf(why, len, "an entry must be an IPv4 address, a CIDR or a domain name");
		return -EINVAL;
	}
	if (list->n_cidr + list->n_domain >= NET_POLICY_MAX) {
		snprintf(why, len, "at most %d entries per list", NET_POLICY_MAX);
		return -EINVAL;
	}
	if (strchr(entry, ':')) {
		snprintf(why, len, "'%s': sandboxes have no IPv6 yet; give IPv4 addresses or names",
		         entry);
		return -EINVAL;
	}
	if (isdigit((unsigned char)entry[strlen(entry) - 1]) || strchr(entry, '/')) {
		if (cidr_parse(entry, list->cidr[list->n_cidr]) == 0) {
			list->n_cidr++;
			return 0;
		}
		if (strchr(entry, '/') || strspn(entry, "0123456789.") == strlen(entry)) {
			snprintf(why, len,
			         "'%s' is not an IPv4 address or CIDR (e.g. 203.0.113.0/24)",
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

static void put_elements(struct out *o, const char *set, unsigned slot, const struct net_list *l)
{
	if (!l->n_cidr)
		return;
	put(o, "add element inet husk %s%u { ", set, slot);
	for (unsigned i = 0; i < l->n_cidr; i++)
		put(o, "%s%s", i ? ", " : "", l->cidr[i]);
	put(o, " }\n");
}

int net_policy_rules(const struct net_policy *p, unsigned slot, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};
	bool allowlist = p->allow.n_cidr + p->allow.n_domain > 0;

	buf[0] = '\0';
	put(&o, "add set inet husk a%u { type ipv4_addr; flags interval; }\n", slot);
	put(&o, "add set inet husk ad%u { type ipv4_addr; flags timeout; }\n", slot);
	put(&o, "add set inet husk d%u { type ipv4_addr; flags interval; }\n", slot);
	put(&o, "add set inet husk dd%u { type ipv4_addr; flags timeout; }\n", slot);
	put_elements(&o, "a", slot, &p->allow);
	put_elements(&o, "d", slot, &p->deny);
	put(&o, "add chain inet husk p%u\n", slot);
	put(&o, "add rule inet husk p%u ip daddr @d%u jump refuse\n", slot, slot);
	put(&o, "add rule inet husk p%u ip daddr @dd%u jump refuse\n", slot, slot);
	if (allowlist) {
		put(&o, "add rule inet husk p%u ip daddr @a%u return\n", slot, slot);
		put(&o, "add rule inet husk p%u ip daddr @ad%u return\n", slot, slot);
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
	for (const char *const *s = (const char *const[]){"a", "ad", "d", "dd", NULL}; *s; s++)
		put(&o, "delete set inet husk %s%u\n", *s, slot);
	return o.err;
}
