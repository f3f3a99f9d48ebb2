// SPDX-License-Identifier: MIT
#include "dns_msg.h"

#include <arpa/nameser.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

static void lower_name(char *dst, const char *src, size_t cap)
{
	size_t n = strnlen(src, cap - 1);

	for (size_t i = 0; i < n; i++)
		dst[i] = (char)tolower((unsigned char)src[i]);
	/* The root and fully qualified names alike, without the final dot. */
	while (n > 0 && dst[n - 1] == '.')
		n--;
	dst[n] = '\0';
}

static int open_msg(const uint8_t *msg, size_t len, ns_msg *h)
{
	if (!msg || len < NS_HFIXEDSZ || len > DNS_MSG_MAX)
		return -EINVAL;
	return ns_initparse(msg, (int)len, h) < 0 ? -EINVAL : 0;
}

int dns_msg_question(const uint8_t *msg, size_t len, struct dns_question *q)
{
	ns_msg h;
	ns_rr rr;

	if (open_msg(msg, len, &h) || ns_msg_count(h, ns_s_qd) < 1 ||
	    ns_parserr(&h, ns_s_qd, 0, &rr) < 0)
		return -EINVAL;
	q->id = ns_msg_id(h);
	q->type = ns_rr_type(rr);
	q->cls = ns_rr_class(rr);
	lower_name(q->name, ns_rr_name(rr), sizeof(q->name));
	return 0;
}

int dns_msg_answers(const uint8_t *msg, size_t len, dns_a_fn fn, void *ctx)
{
	char name[DNS_NAME_MAX];
	int count = 0;
	ns_msg h;
	ns_rr rr;

	if (open_msg(msg, len, &h))
		return -EINVAL;
	for (int i = 0; i < ns_msg_count(h, ns_s_an); i++) {
		if (ns_parserr(&h, ns_s_an, i, &rr) < 0)
			return -EINVAL;
		if (ns_rr_class(rr) != ns_c_in ||
		    !((ns_rr_type(rr) == ns_t_a && ns_rr_rdlen(rr) == 4) ||
		      (ns_rr_type(rr) == ns_t_aaaa && ns_rr_rdlen(rr) == 16)))
			continue;
		lower_name(name, ns_rr_name(rr), sizeof(name));
		fn(ctx, name, ns_rr_type(rr) == ns_t_a ? AF_INET : AF_INET6, ns_rr_rdata(rr),
		   ns_rr_ttl(rr));
		count++;
	}
	return count;
}

void dns_msg_set_id(uint8_t *msg, size_t len, uint16_t id)
{
	if (len >= 2) {
		msg[0] = (uint8_t)(id >> 8);
		msg[1] = (uint8_t)id;
	}
}
