// SPDX-License-Identifier: MIT
/*
 * Fuzzes a sandbox's allow and deny list entries (network.allow / deny,
 * from API clients): each line of the input is one entry. Whatever is
 * taken must come out in the nftables commands as an address, a CIDR or
 * nothing: no byte of an entry may reach the rules unchecked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct net_policy p;
	static char buf[64 * 1024];
	char entry[NET_POLICY_ENTRY + 8], why[300];
	size_t start = 0;

	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i <= size; i++) {
		size_t n = i - start;

		if (i < size && data[i] != '\n')
			continue;
		if (n < sizeof(entry)) {
			memcpy(entry, data + start, n);
			entry[n] = '\0';
			/* Odd lines deny, even ones allow: both lists filled. */
			(void)net_policy_add((start & 1) ? &p.deny : &p.allow, entry, why,
			                     sizeof(why));
		}
		start = i + 1;
	}
	for (int l = 0; l < 2; l++) {
		const struct net_list *list = l ? &p.deny : &p.allow;

		for (unsigned i = 0; i < list->n_cidr; i++)
			if (strspn(list->cidr[i], "0123456789abcdef.:/") != strlen(list->cidr[i]))
				abort();
		for (unsigned i = 0; i < list->n_domain; i++)
			if (strspn(list->domain[i], "abcdefghijklmnopqrstuvwxyz0123456789-_.*") !=
			    strlen(list->domain[i]))
				abort();
	}
	/* Full lists of the longest entries still fit, or say they do not. */
	(void)net_policy_rules(&p, 7, buf, sizeof(buf));
	return 0;
}
