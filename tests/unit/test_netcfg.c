// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "netcfg.h"
#include "unit.h"

static int parse(const char *text, struct netcfg *c)
{
	json_t *j = json_loads(text, 0, NULL);
	char why[160];
	int rc = netcfg_parse(j, c, why, sizeof(why));

	json_decref(j);
	if (rc && !strstr(why, "net"))
		return -1; /* a refusal must say which field */
	return rc;
}

UNIT_TEST(agent_netcfg_reads_mac_address_gateway)
{
	struct netcfg c;

	CHECK(parse("{\"mac\":\"02:1a:2b:3c:4d:5e\",\"address\":\"10.0.2.77/24\","
	            "\"gateway\":\"10.0.2.2\"}",
	            &c) == 0);
	CHECK(c.mac[0] == 0x02 && c.mac[5] == 0x5e);
	CHECK(c.addr.s_addr == inet_addr("10.0.2.77") &&
	      c.mask.s_addr == inet_addr("255.255.255.0"));
	CHECK(c.gateway.s_addr == inet_addr("10.0.2.2"));
}

UNIT_TEST(agent_netcfg_refuses_bad_fields)
{
	struct netcfg c;

	for (const char *const *bad =
	             (const char *const[]){
			     "[]", "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7/24\"}",
			     "{\"mac\":\"01:00:00:00:00:01\",\"address\":\"10.0.2.7/"
			     "24\",\"gateway\":"
			     "\"10.0.2.2\"}",
			     "{\"mac\":\"02:00:00:00:00\",\"address\":\"10.0.2.7/24\",\"gateway\":"
			     "\"10.0.2.2\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7\",\"gateway\":"
			     "\"10.0.2.2\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7/"
			     "33\",\"gateway\":"
			     "\"10.0.2.2\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.999/24\","
			     "\"gateway\":\"10.0.2.2\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7/"
			     "24\",\"gateway\":"
			     "\"10.0.3.2\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7/"
			     "24\",\"gateway\":"
			     "\"10.0.2.7\"}",
			     "{\"mac\":\"02:00:00:00:00:01\",\"address\":\"10.0.2.7/"
			     "24x\",\"gateway\":"
			     "\"10.0.2.2\"}",
			     NULL};
	     *bad; bad++)
		CHECK(parse(*bad, &c) == -EINVAL);
}
