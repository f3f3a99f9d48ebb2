/* SPDX-License-Identifier: MIT */
#ifndef HUSK_JAIL_H
#define HUSK_JAIL_H

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

#endif
