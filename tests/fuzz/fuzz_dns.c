// SPDX-License-Identifier: MIT
/* Fuzzes what huskd's DNS forwarder reads of guest queries and resolver answers. */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "dns_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_a(void *ctx, const char *name, int family, const uint8_t *addr, uint32_t ttl)
{
	size_t *total = ctx;

	/* Every byte the record's family promises is read. */
	for (int i = 0; i < (family == AF_INET6 ? 16 : 4); i++)
		*total += addr[i];
	*total += strlen(name) + (ttl & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_question q;
	size_t total = 0;

	if (dns_msg_question(data, size, &q) == 0)
		total += strlen(q.name);
	(void)dns_msg_answers(data, size, on_a, &total);
	return total == (size_t)-1;
}
