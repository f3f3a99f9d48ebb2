/* SPDX-License-Identifier: MIT */
#ifndef HUSK_JAIL_H
#define HUSK_JAIL_H

#include <sys/types.h>

/*
 * What husk-jail and huskd agree on. A sandbox with network runs its VMM
 * in a network namespace of its own whose only way out is a veth pair:
 * "hv<SLOT>" on the host, "eth0" inside, a /30 of JAIL_NET_PREFIX per slot
 * (host end .1, namespace end .2). The namespace and the pair die with the
 * VMM, whatever kills it.
 */
#define JAIL_NET_PREFIX "10.233.0.0/16"
#define JAIL_NET_SLOTS 16384 /* /30s in the /16 */
#define JAIL_IF_PREFIX "hv"

/* The host end (.1) or the namespace end (.2) of slot's /30, as a dotted quad. */
#define JAIL_SLOT_ADDR(buf, slot, end)                                      \
	snprintf((buf), sizeof(buf), "10.233.%u.%u", (unsigned)(slot) >> 6, \
	         (((unsigned)(slot)&63u) << 2) | (unsigned)(end))

/*
 * IPv6 beside it: a /112 of JAIL_NET6_PREFIX per slot, host end ::<slot>:1,
 * namespace end ::<slot>:2 (slot in hex). Masqueraded like the IPv4 pair.
 */
#define JAIL_NET6_PREFIX "fd68:7573:6b00::/96"
#define JAIL_SLOT_ADDR6(buf, slot, end) \
	snprintf((buf), sizeof(buf), "fd68:7573:6b00::%x:%x", (unsigned)(slot), (unsigned)(end))

/*
 * The uids (and as many gids, the same numbers) jailed programs run as: one
 * per running sandbox, above the ranges distributions hand to users,
 * services and containers (systemd: up to 0x6FFFFFFF).
 */
#define JAIL_UID_BASE 0x70000000u
#define JAIL_UIDS 65536u

#define JAIL_MAX_PATHS 32

/*
 * The root a jailed program sees: a tmpfs mounted on dir (an empty folder)
 * in a mount namespace of its own, holding the system's library folders,
 * the ro paths read-only and the rw paths read-write at their host paths,
 * device nodes for uid alone, and resolv (if any) as /etc/resolv.conf.
 */
struct jail_root {
	const char *dir;
	const char *ro[JAIL_MAX_PATHS], *rw[JAIL_MAX_PATHS], *dev[8];
	unsigned nro, nrw, ndev;
	const char *resolv;
	uid_t uid;
	gid_t gid;
};

/* Builds that root and makes it /; 0 or -1 (said why on stderr). In a new mount namespace. */
int jail_root_enter(const struct jail_root *r);

/* A network namespace of its own: with slot's veth pair, or (slot -1) lo alone. 0 or -1. */
int jail_net_enter(long slot);

#endif
