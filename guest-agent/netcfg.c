// SPDX-License-Identifier: MIT
/*
 * The guest's network after a restore. A restored guest meets a new VMM and
 * a new network stack: the host gives it its MAC and address (children of
 * one snapshot each get their own) in the `resumed` request, and the agent
 * resets the link, takes them, and ends the TCP connections the old stack
 * carried - the new one knows none of them, and a peer's reset could not
 * even reach an address the guest no longer has. Programs see
 * ECONNABORTED at once instead of a hang.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netcfg.h"

/* The kernel's state of a half-open request sock (include/net/tcp_states.h). */
#define TCP_NEW_SYN_RECV 12

int netcfg_parse(json_t *net, struct netcfg *out, char *why, size_t len)
{
	const char *mac = json_string_value(json_object_get(net, "mac"));
	const char *addr = json_string_value(json_object_get(net, "address"));
	const char *gw = json_string_value(json_object_get(net, "gateway"));
	char ip[INET_ADDRSTRLEN], end;
	unsigned m[6], prefix;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(net) || !mac || !addr || !gw) {
		snprintf(why, len, "net needs mac, address (a.b.c.d/N) and gateway");
		return -EINVAL;
	}
	if (strlen(mac) != 17 ||
	    sscanf(mac, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
	           &end) != 6 ||
	    (m[0] & 1)) {
		snprintf(why, len, "net.mac must be a unicast MAC such as 02:00:00:00:00:01");
		return -EINVAL;
	}
	for (int i = 0; i < 6; i++)
		out->mac[i] = (uint8_t)m[i];
	if (strlen(addr) >= sizeof(ip) + 3 ||
	    sscanf(addr, "%15[0-9.]/%u%c", ip, &prefix, &end) != 2 || prefix < 8 || prefix > 30 ||
	    inet_pton(AF_INET, ip, &out->addr) != 1) {
		snprintf(why, len,
		         "net.address must be an IPv4 address and prefix such as 10.0.2.15/24");
		return -EINVAL;
	}
	out->mask.s_addr = htonl(~0u << (32 - prefix));
	if (inet_pton(AF_INET, gw, &out->gateway) != 1 ||
	    (out->gateway.s_addr & out->mask.s_addr) != (out->addr.s_addr & out->mask.s_addr) ||
	    out->gateway.s_addr == out->addr.s_addr) {
		snprintf(why, len,
		         "net.gateway must be another IPv4 address in net.address's network");
		return -EINVAL;
	}
	return 0;
}

/* The first Ethernet interface (the sandbox's NIC; lo is not one). */
static int find_nic(int fd, struct ifreq *ifr)
{
	struct if_nameindex *ifs = if_nameindex(), *i;
	int rc = -ENODEV;

	if (!ifs)
		return -errno;
	for (i = ifs; i->if_index && rc; i++) {
		memset(ifr, 0, sizeof(*ifr));
		snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", i->if_name);
		if (ioctl(fd, SIOCGIFHWADDR, ifr) == 0 && ifr->ifr_hwaddr.sa_family == ARPHRD_ETHER)
			rc = 0;
	}
	if_freenameindex(ifs);
	return rc;
}

static int set_flags(int fd, struct ifreq *ifr, bool up)
{
	if (ioctl(fd, SIOCGIFFLAGS, ifr) < 0)
		return -errno;
	if (up)
		ifr->ifr_flags |= IFF_UP | IFF_RUNNING;
	else
		ifr->ifr_flags &= ~IFF_UP;
	return ioctl(fd, SIOCSIFFLAGS, ifr) < 0 ? -errno : 0;
}

static int set_inet(int fd, struct ifreq *ifr, unsigned long req, struct in_addr a)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr->ifr_addr;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr = a;
	return ioctl(fd, req, ifr) < 0 ? -errno : 0;
}

static int add_default_route(int fd, struct in_addr gw)
{
	struct rtentry rt = {0};
	struct sockaddr_in *dst = (struct sockaddr_in *)&rt.rt_dst;
	struct sockaddr_in *mask = (struct sockaddr_in *)&rt.rt_genmask;
	struct sockaddr_in *via = (struct sockaddr_in *)&rt.rt_gateway;

	dst->sin_family = mask->sin_family = via->sin_family = AF_INET;
	via->sin_addr = gw;
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Asks the kernel to abort one socket the dump named (SOCK_DESTROY): 0 or -errno. */
static int destroy_one(int nl, int family, const struct inet_diag_msg *d)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 req;
	} msg = {
		.nh = {.nlmsg_len = sizeof(msg),
	               .nlmsg_type = SOCK_DESTROY,
	               .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK},
		.req = {.sdiag_family = (uint8_t)family,
	                .sdiag_protocol = IPPROTO_TCP,
	                .idiag_states = ~0u,
	                .id = d->id},
	};
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
	} ack;
	ssize_t got;

	if (send(nl, &msg, sizeof(msg), 0) < 0)
		return -errno;
	got = recv(nl, &ack, sizeof(ack), 0);
	if (got < 0)
		return -errno;
	if ((size_t)got < sizeof(ack) || ack.nh.nlmsg_type != NLMSG_ERROR)
		return -EIO;
	return ack.err.error;
}

static bool v4_leaves(uint32_t src, uint32_t dst, struct in_addr from)
{
	return src == from.s_addr && dst != from.s_addr && (ntohl(dst) >> 24) != 127;
}

/*
 * A connection the old stack carried: IPv4 from `from` to another host (not
 * loopback, not the guest itself), IPv4 in an IPv6 socket likewise, or IPv6
 * from an address of the network (not loopback or link-local) to another.
 */
static bool leaves_guest(int family, const struct inet_diag_msg *d, struct in_addr from)
{
	const struct in6_addr *s6 = (const struct in6_addr *)d->id.idiag_src;
	const struct in6_addr *t6 = (const struct in6_addr *)d->id.idiag_dst;

	if (family == AF_INET)
		return v4_leaves(d->id.idiag_src[0], d->id.idiag_dst[0], from);
	if (IN6_IS_ADDR_V4MAPPED(s6))
		return v4_leaves(d->id.idiag_src[3], d->id.idiag_dst[3], from);
	return !IN6_IS_ADDR_LOOPBACK(s6) && !IN6_IS_ADDR_LINKLOCAL(s6) &&
	       !IN6_ARE_ADDR_EQUAL(s6, t6);
}

/*
 * Aborts every TCP connection of one family the old stack carried
 * (leaves_guest). Listening sockets and connections within the guest live
 * on. The count aborted, or -errno if the kernel could not list them (one
 * that went meanwhile is not counted).
 */
static int end_connections(int family, struct in_addr from)
{
	static char buf[32768];
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 req;
	} dump = {
		.nh = {.nlmsg_len = sizeof(dump),
	               .nlmsg_type = SOCK_DIAG_BY_FAMILY,
	               .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		.req = {.sdiag_family = (uint8_t)family,
	                .sdiag_protocol = IPPROTO_TCP,
	                /* Full sockets only: time-wait and request socks cannot be aborted. */
	                .idiag_states = ~((1u << TCP_LISTEN) | (1u << TCP_TIME_WAIT) |
	                                  (1u << TCP_NEW_SYN_RECV) | (1u << TCP_CLOSE))},
	};
	/* Destroys go on a socket of their own: the dump's is still answering. */
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	int kill = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	int n = 0, rc = 0;
	bool done = false;

	if (nl < 0 || kill < 0)
		rc = -errno;
	else if (send(nl, &dump, sizeof(dump), 0) < 0)
		rc = -errno;
	while (!rc && !done) {
		ssize_t got = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (got < 0) {
			rc = -errno;
			break;
		}
		for (; !done && NLMSG_OK(h, (size_t)got); h = NLMSG_NEXT(h, got)) {
			const struct inet_diag_msg *d = NLMSG_DATA(h);

			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
			} else if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				rc = e->error ? e->error : -EIO;
			} else if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(*d)) &&
			           leaves_guest(family, d, from) &&
			           destroy_one(kill, family, d) == 0) {
				n++;
			}
		}
	}
	if (nl >= 0)
		close(nl);
	if (kill >= 0)
		close(kill);
	return rc ? rc : n;
}

int netcfg_apply(const struct netcfg *c, int *ended, char *why, size_t len)
{
	struct ifreq ifr;
	struct in_addr old = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;
	const char *step = "find the network interface";

	*ended = 0;
	if (fd < 0) {
		snprintf(why, len, "socket: %s", strerror(errno));
		return -errno;
	}
	rc = find_nic(fd, &ifr);
	if (!rc && ioctl(fd, SIOCGIFADDR, &ifr) == 0)
		old = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;
	/* Down and up again: the link resets and the neighbours it knew are forgotten. */
	if (!rc && (rc = set_flags(fd, &ifr, false)))
		step = "take the interface down";
	if (!rc) {
		ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
		memcpy(ifr.ifr_hwaddr.sa_data, c->mac, sizeof(c->mac));
		if (ioctl(fd, SIOCSIFHWADDR, &ifr) < 0)
			rc = -errno, step = "set the MAC";
	}
	if (!rc && (rc = set_inet(fd, &ifr, SIOCSIFADDR, c->addr)))
		step = "set the address";
	if (!rc && (rc = set_inet(fd, &ifr, SIOCSIFNETMASK, c->mask)))
		step = "set the netmask";
	if (!rc && (rc = set_flags(fd, &ifr, true)))
		step = "bring the interface up";
	if (!rc && (rc = add_default_route(fd, c->gateway)))
		step = "add the default route";
	close(fd);
	/* A kernel without SOCK_DESTROY still gets its network: *ended says so. */
	if (!rc && old.s_addr) {
		int v4 = end_connections(AF_INET, old), v6 = end_connections(AF_INET6, old);

		/* A guest without IPv6 has nothing to end there. */
		*ended = v4 < 0 ? v4 : v4 + (v6 > 0 ? v6 : 0);
	}
	if (rc)
		snprintf(why, len, "cannot %s: %s", step, strerror(-rc));
	return rc;
}
