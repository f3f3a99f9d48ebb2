// SPDX-License-Identifier: MIT
/* What huskd's DNS forwarder reads of a message: the question, and the A answers. */
#include <arpa/nameser.h>
#include <errno.h>
#include <resolv.h>
#include <string.h>
#include <sys/socket.h>

#include "dns_msg.h"
#include "unit.h"

struct seen {
	int n, family;
	char name[DNS_NAME_MAX];
	uint8_t addr[16];
	uint32_t ttl;
};

static void on_a(void *ctx, const char *name, int family, const uint8_t *addr, uint32_t ttl)
{
	struct seen *s = ctx;

	s->n++;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->family = family;
	memcpy(s->addr, addr, family == AF_INET6 ? 16 : 4);
	s->ttl = ttl;
}

UNIT_TEST(dns_msg_reads_a_query)
{
	uint8_t q[512];
	struct dns_question dq;
	int len = res_mkquery(ns_o_query, "Web.Standin.TEST.", ns_c_in, ns_t_a, NULL, 0, NULL, q,
	                      sizeof(q));

	CHECK(len > 12);
	CHECK(dns_msg_question(q, (size_t)len, &dq) == 0);
	CHECK(strcmp(dq.name, "web.standin.test") == 0);
	CHECK(dq.type == ns_t_a && dq.cls == ns_c_in);
	dns_msg_set_id(q, (size_t)len, 0xbeef);
	CHECK(dns_msg_question(q, (size_t)len, &dq) == 0 && dq.id == 0xbeef);
	/* Cut short, or no question at all, or too long to be one we carry. */
	CHECK(dns_msg_question(q, (size_t)len - 3, &dq) == -EINVAL);
	CHECK(dns_msg_question(q, 11, &dq) == -EINVAL);
	q[5] = 0; /* QDCOUNT 0 */
	CHECK(dns_msg_question(q, 12, &dq) == -EINVAL);
	CHECK(dns_msg_question(q, DNS_MSG_MAX + 1, &dq) == -EINVAL);
}

UNIT_TEST(dns_msg_reads_a_answers)
{
	/* A reply for a.test: one CNAME (skipped) and one A record, name compressed. */
	static const uint8_t msg[] = {
		0x12, 0x34, 0x81, 0x80, 0,   1,   0,   2, 0, 0,  0, 0, /* header */
		1,    'a',  4,    't',  'e', 's', 't', 0, 0, 1,  0, 1, /* question a.test A IN */
		0xc0, 12,   0,    5,    0,   1,   0,   0, 0, 60, 0, 2, 0xc0, 12, /* CNAME a.test */
		0xc0, 12,   0,    1,    0,   1,   0,   0, 1, 44, 0, 4, 203,  0,
		113,  10, /* A, TTL 300 */
	};
	struct seen s = {0};

	CHECK(dns_msg_answers(msg, sizeof(msg), on_a, &s) == 1);
	CHECK(s.n == 1 && strcmp(s.name, "a.test") == 0 && s.ttl == 300);
	CHECK(s.family == AF_INET && s.addr[0] == 203 && s.addr[3] == 10);
	/* An answer count past what the message holds is malformed, not a short list. */
	uint8_t bad[sizeof(msg)];
	memcpy(bad, msg, sizeof(msg));
	bad[7] = 3;
	CHECK(dns_msg_answers(bad, sizeof(bad), on_a, &s) == -EINVAL);
	/* A pointer that loops. */
	memcpy(bad, msg, sizeof(msg));
	bad[24] = 0xc0;
	bad[25] = 24;
	CHECK(dns_msg_answers(bad, sizeof(bad), on_a, &s) == -EINVAL);
}

UNIT_TEST(dns_msg_reads_aaaa_answers)
{
	/* b.test AAAA 2001:db8::10 (TTL 60), and an AAAA record of the wrong length (skipped). */
	static const uint8_t msg[] = {
		0x12, 0x34, 0x81, 0x80, 0,   1,   0,   2, 0, 0,  0, 0, /* header */
		1,    'b',  4,    't',  'e', 's', 't', 0, 0, 28, 0, 1, /* question b.test AAAA IN */
		0xc0, 12,   0,    28,   0,   1,   0,   0, 0, 60, 0, 16, 0x20, 0x01,
		0x0d, 0xb8, 0,    0,    0,   0,   0,   0, 0, 0,  0, 0,  0,    0x10, /* AAAA */
		0xc0, 12,   0,    28,   0,   1,   0,   0, 0, 60, 0, 4,  1,    2,
		3,    4, /* AAAA of 4 bytes */
	};
	struct seen s = {0};

	CHECK(dns_msg_answers(msg, sizeof(msg), on_a, &s) == 1);
	CHECK(s.n == 1 && s.family == AF_INET6 && s.ttl == 60 && !strcmp(s.name, "b.test"));
	CHECK(s.addr[0] == 0x20 && s.addr[3] == 0xb8 && s.addr[15] == 0x10);
}
