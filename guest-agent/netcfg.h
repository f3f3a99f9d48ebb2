/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_NETCFG_H
#define HUSK_AGENT_NETCFG_H

#include <jansson.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* The `resumed` request's "net": the NIC's MAC, address and gateway. */
struct netcfg {
	uint8_t mac[6];
	struct in_addr addr, mask, gateway;
};

/* Checks and reads {mac, address: "a.b.c.d/N", gateway}; -EINVAL with why. */
int netcfg_parse(json_t *net, struct netcfg *out, char *why, size_t len);

/*
 * Resets the guest's NIC (down, MAC, address, up, default route) and aborts
 * the TCP connections its old address held to other hosts; *ended says how
 * many, or is -errno if the kernel could not list them. 0, or -errno with
 * why naming the step that failed.
 */
int netcfg_apply(const struct netcfg *c, int *ended, char *why, size_t len);

#endif
