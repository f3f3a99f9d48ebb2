// SPDX-License-Identifier: MIT
/* A sandbox's allow and deny lists: what is taken, what is refused and why, the rules made. */
#include <errno.h>
#include <string.h>

#include "net_policy.h"
#include "unit.h"

UNIT_TEST(net_policy_takes_addresses_cidrs_and_names)
{
	struct net_list l = {0};
	char why[256];

	CHECK(net_policy_add(&l, "203.0.113.7", why, sizeof(why)) == 0);
	CHECK(net_policy_add(&l, "198.51.100.77/24", why, sizeof(why)) == 0);
	CHECK(l.n_cidr == 2 && !strcmp(l.cidr[0], "203.0.113.7/32") &&
	      !strcmp(l.cidr[1], "198.51.100.0/24")); /* host bits cleared for nftables */
	CHECK(net_policy_add(&l, "Example.COM", why, sizeof(why)) == 0);
	CHECK(net_policy_add(&l, "*.pypi.org", why, sizeof(why)) == 0);
	CHECK(l.n_domain == 2 && !strcmp(l.domain[0], "example.com"));
	CHECK(net_policy_names(&l, "example.com"));
	CHECK(!net_policy_names(&l, "www.example.com")); /* exact means exact */
	CHECK(net_policy_names(&l, "files.pypi.org") && net_policy_names(&l, "a.b.pypi.org"));
	CHECK(!net_policy_names(&l, "pypi.org") && !net_policy_names(&l, "evilpypi.org"));
}

UNIT_TEST(net_policy_takes_ipv6)
{
	struct net_policy p = {0};
	char why[256], buf[8192];

	CHECK(net_policy_add(&p.deny, "2001:DB8:0:0:0:0:0:1", why, sizeof(why)) == 0);
	CHECK(net_policy_add(&p.deny, "2001:db8:1:ffff::77/49", why, sizeof(why)) == 0);
	CHECK(net_policy_add(&p.deny, "203.0.113.9", why, sizeof(why)) == 0);
	CHECK(p.deny.n_cidr == 3 && p.deny.cidr6[0] && p.deny.cidr6[1] && !p.deny.cidr6[2]);
	CHECK(!strcmp(p.deny.cidr[0], "2001:db8::1/128"));
	CHECK(!strcmp(p.deny.cidr[1], "2001:db8:1:8000::/49")); /* host bits cleared */
	CHECK(net_policy_rules(&p, 7, buf, sizeof(buf)) == 0);
	/* Each family into its own set, and both checked. */
	CHECK(strstr(buf, "add element inet husk d7 { 203.0.113.9/32 }"));
	CHECK(strstr(buf, "add element inet husk d6_7 { 2001:db8::1/128, 2001:db8:1:8000::/49 }"));
	CHECK(strstr(buf, "p7 ip6 daddr @d6_7 jump refuse") &&
	      strstr(buf, "p7 ip daddr @d7 jump refuse"));
	CHECK(!strstr(buf, "p7 jump refuse"));
	/* An IPv4 allow list closes IPv6 too. */
	CHECK(net_policy_add(&p.allow, "203.0.113.0/24", why, sizeof(why)) == 0);
	CHECK(net_policy_rules(&p, 7, buf, sizeof(buf)) == 0);
	CHECK(!strstr(buf, "add element inet husk a6_7") &&
	      strstr(buf, "add rule inet husk p7 jump refuse"));
	CHECK(net_policy_unrules(7, buf, sizeof(buf)) == 0 &&
	      strstr(buf, "delete set inet husk dd6_7"));
}

UNIT_TEST(net_policy_refuses_what_it_cannot_hold)
{
	struct net_list l = {0};
	char why[256];

	CHECK(net_policy_add(&l, "2001:db8::g", why, sizeof(why)) == -EINVAL &&
	      strstr(why, "2001:db8::/32"));
	CHECK(net_policy_add(&l, "2001:db8::/129", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "2001:db8::/", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "2001:db8::/-1", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "203.0.113.0/33", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "203.0.113.256", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "exa mple.com", why, sizeof(why)) == -EINVAL &&
	      strstr(why, "domain"));
	CHECK(net_policy_add(&l, "-bad.com", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "a..b", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "*.", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "x.*.com", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "a.com\"; flush ruleset", why, sizeof(why)) == -EINVAL);
	CHECK(net_policy_add(&l, "", why, sizeof(why)) == -EINVAL);
	CHECK(l.n_cidr == 0 && l.n_domain == 0);
	for (int i = 0; i < NET_POLICY_MAX; i++)
		CHECK(net_policy_add(&l, "example.com", why, sizeof(why)) == 0);
	CHECK(net_policy_add(&l, "example.org", why, sizeof(why)) == -EINVAL &&
	      strstr(why, "at most"));
}

UNIT_TEST(net_policy_rules_name_the_slot)
{
	struct net_policy p = {0};
	char why[256], buf[4096];

	CHECK(net_policy_add(&p.deny, "203.0.113.9", why, sizeof(why)) == 0);
	CHECK(net_policy_rules(&p, 7, buf, sizeof(buf)) == 0);
	CHECK(strstr(buf, "add element inet husk d7 { 203.0.113.9/32 }"));
	CHECK(strstr(buf, "\"hv7\" : jump p7"));
	CHECK(!strstr(buf, "p7 jump refuse")); /* a deny list alone leaves the rest open */
	CHECK(net_policy_add(&p.allow, "example.com", why, sizeof(why)) == 0);
	CHECK(net_policy_rules(&p, 7, buf, sizeof(buf)) == 0);
	CHECK(strstr(buf, "add rule inet husk p7 jump refuse")); /* an allow list closes it */
	CHECK(net_policy_rules(&p, 7, buf, 64) == -ENOSPC);
	CHECK(net_policy_unrules(7, buf, sizeof(buf)) == 0 &&
	      strstr(buf, "delete chain inet husk p7"));
}
