// SPDX-License-Identifier: MIT
/*
 * The jail's network namespace (jail.h). Its only way out is a veth pair:
 * the host end addressed and up, the inside end as eth0 with the default
 * route through it, and lo. The kernel then decides what the program's
 * sockets reach (huskd's nftables table); the program itself holds no
 * network privilege. When it exits, for any reason, the namespace and both
 * ends go with it. Without a slot the namespace has lo alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"

static int fail(const char *what, int nlerr)
{
	fprintf(stderr, "husk-jail: %s: %s\n", what, nl_geterror(nlerr));
	return -1;
}

static int link_up(struct nl_sock *sk, const char *name, int *ifindex)
{
	struct rtnl_link *link = NULL, *change;
	int err = rtnl_link_get_kernel(sk, 0, name, &link);

	if (err < 0)
		return fail(name, err);
	*ifindex = rtnl_link_get_ifindex(link);
	change = rtnl_link_alloc();
	if (!change) {
		rtnl_link_put(link);
		return fail(name, -NLE_NOMEM);
	}
	rtnl_link_set_flags(change, IFF_UP);
	err = rtnl_link_change(sk, link, change, 0);
	rtnl_link_put(change);
	rtnl_link_put(link);
	return err < 0 ? fail(name, err) : 0;
}

static int addr_add(struct nl_sock *sk, int ifindex, const char *cidr, int family)
{
	struct rtnl_addr *addr = rtnl_addr_alloc();
	struct nl_addr *local = NULL;
	int err = addr ? nl_addr_parse(cidr, family, &local) : -NLE_NOMEM;

	if (!err) {
		rtnl_addr_set_ifindex(addr, ifindex);
		err = rtnl_addr_set_local(addr, local);
		/* Both ends are ours: no duplicate to detect, and no wait for one. */
		if (family == AF_INET6)
			rtnl_addr_set_flags(addr, IFA_F_NODAD);
	}
	if (!err)
		err = rtnl_addr_add(sk, addr, 0);
	nl_addr_put(local);
	rtnl_addr_put(addr);
	return err < 0 ? fail(cidr, err) : 0;
}

static int route_default(struct nl_sock *sk, int ifindex, const char *gateway, int family)
{
	struct rtnl_route *route = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *dst = NULL, *gw = NULL;
	int err = route && nh ? 0 : -NLE_NOMEM;

	if (!err)
		err = nl_addr_parse(family == AF_INET6 ? "::/0" : "0.0.0.0/0", family, &dst);
	if (!err)
		err = nl_addr_parse(gateway, family, &gw);
	if (!err) {
		rtnl_route_set_family(route, (uint8_t)family);
		rtnl_route_set_dst(route, dst);
		rtnl_route_nh_set_ifindex(nh, ifindex);
		rtnl_route_nh_set_gateway(nh, gw);
		rtnl_route_add_nexthop(route, nh);
		nh = NULL; /* the route owns it now */
		err = rtnl_route_add(sk, route, NLM_F_CREATE);
	}
	nl_addr_put(dst);
	nl_addr_put(gw);
	if (nh)
		rtnl_route_nh_free(nh);
	rtnl_route_put(route);
	return err < 0 ? fail("the default route", err) : 0;
}

/*
 * Whether the host end may have an IPv6 address: a host booted without IPv6,
 * or with it turned off for new interfaces, gives its sandboxes IPv4 alone.
 */
static bool ipv6_usable(const char *host_if)
{
	char path[96], v = '1';
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", host_if);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (read(fd, &v, 1) != 1)
		v = '1';
	close(fd);
	return v == '0';
}

static struct nl_sock *route_socket(void)
{
	struct nl_sock *sk = nl_socket_alloc();

	if (sk && nl_connect(sk, NETLINK_ROUTE) == 0)
		return sk;
	fprintf(stderr, "husk-jail: cannot open a netlink socket\n");
	nl_socket_free(sk);
	return NULL;
}

/* In the host's namespace: the pair, its inside end moved into netns_fd, the host end up. */
static int host_side(unsigned slot, int netns_fd, char *host_if, size_t len, bool *v6)
{
	struct nl_sock *sk = route_socket();
	struct rtnl_link *veth, *peer;
	char cidr[64], addr[24], addr6[48];
	int err, ifindex;

	if (!sk)
		return -1;
	snprintf(host_if, len, JAIL_IF_PREFIX "%u", slot);
	veth = rtnl_link_veth_alloc();
	if (!veth) {
		nl_socket_free(sk);
		return fail("veth", -NLE_NOMEM);
	}
	peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(veth, host_if);
	rtnl_link_set_name(peer, "eth0");
	rtnl_link_set_ns_fd(peer, netns_fd);
	err = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_put(peer);
	rtnl_link_veth_release(veth);
	if (err < 0) {
		nl_socket_free(sk);
		return fail(host_if, err);
	}
	JAIL_SLOT_ADDR(addr, slot, 1);
	snprintf(cidr, sizeof(cidr), "%s/30", addr);
	/* On failure nothing is owed: the pair dies with the namespace when we exit. */
	err = link_up(sk, host_if, &ifindex) || addr_add(sk, ifindex, cidr, AF_INET);
	*v6 = false;
	if (!err && ipv6_usable(host_if)) {
		JAIL_SLOT_ADDR6(addr6, slot, 1);
		snprintf(cidr, sizeof(cidr), "%s/112", addr6);
		*v6 = addr_add(sk, ifindex, cidr, AF_INET6) == 0;
	}
	nl_socket_free(sk);
	return err ? -1 : 0;
}

/* A namespace of lo alone: the VMM's sockets reach nothing but the VMM itself. */
static int sealed(void)
{
	struct nl_sock *sk;
	int lo, ret;

	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr,
		        "husk-jail: cannot make a network namespace: %s (huskd must run as root)\n",
		        strerror(errno));
		return -1;
	}
	sk = route_socket();
	if (!sk)
		return -1;
	ret = link_up(sk, "lo", &lo);
	nl_socket_free(sk);
	return ret ? -1 : 0;
}

/*
 * In the new namespace: lo, eth0 with its address, the default route through
 * the host end; the same for IPv6 when the host end has it.
 */
static int inside(unsigned slot, bool v6)
{
	struct nl_sock *sk = route_socket();
	char cidr[64], addr[48], gw[48];
	int lo, eth0, ret;

	if (!sk)
		return -1;
	JAIL_SLOT_ADDR(addr, slot, 2);
	JAIL_SLOT_ADDR(gw, slot, 1);
	snprintf(cidr, sizeof(cidr), "%s/30", addr);
	ret = link_up(sk, "lo", &lo) || link_up(sk, "eth0", &eth0) ||
	      addr_add(sk, eth0, cidr, AF_INET) || route_default(sk, eth0, gw, AF_INET);
	if (!ret && v6) {
		JAIL_SLOT_ADDR6(addr, slot, 2);
		JAIL_SLOT_ADDR6(gw, slot, 1);
		snprintf(cidr, sizeof(cidr), "%s/112", addr);
		ret = addr_add(sk, eth0, cidr, AF_INET6) || route_default(sk, eth0, gw, AF_INET6);
	}
	nl_socket_free(sk);
	return ret ? -1 : 0;
}

int jail_net_enter(long slot)
{
	char host_if[IFNAMSIZ];
	int host_ns, new_ns;
	bool v6;

	if (slot < 0)
		return sealed();
	host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host_ns < 0 || unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr,
		        "husk-jail: cannot make a network namespace: %s (huskd must run as root)\n",
		        strerror(errno));
		return -1;
	}
	new_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (new_ns < 0 || setns(host_ns, CLONE_NEWNET) < 0) {
		fprintf(stderr, "husk-jail: cannot return to the host's namespace: %s\n",
		        strerror(errno));
		return -1;
	}
	if (host_side((unsigned)slot, new_ns, host_if, sizeof(host_if), &v6))
		return -1;
	if (setns(new_ns, CLONE_NEWNET) < 0) {
		fprintf(stderr, "husk-jail: cannot enter the sandbox's namespace: %s\n",
		        strerror(errno));
		return -1;
	}
	close(host_ns);
	close(new_ns);
	return inside((unsigned)slot, v6);
}
