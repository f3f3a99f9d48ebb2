/* SPDX-License-Identifier: MIT */
#ifndef HUSK_DNS_MSG_H
#define HUSK_DNS_MSG_H

#include <stddef.h>
#include <stdint.h>

/*
 * What huskd reads of the DNS messages its forwarder carries for
 * sandboxes: the question a guest asks, and the IPv4 addresses an answer
 * gives with their TTLs (the answer's allowed names go into a sandbox's
 * rules). Parsing is glibc's (libresolv's ns_* functions); these only bound
 * the input and walk what it found. A message is never trusted: anything
 * malformed is -EINVAL.
 */
#define DNS_MSG_MAX 4096  /* an EDNS answer's usual ceiling; larger ones are refused */
#define DNS_NAME_MAX 1025 /* a name as text, escapes included, with its NUL */

struct dns_question {
	uint16_t id;
	uint16_t type, cls;
	char name[DNS_NAME_MAX]; /* lower case, no trailing dot */
};

/* The message's id and first question. 0, or -EINVAL (also for a message with no question). */
int dns_msg_question(const uint8_t *msg, size_t len, struct dns_question *q)
	__attribute__((warn_unused_result));

/*
 * Called for each A and AAAA record of the answer section: owner name (lower
 * case), AF_INET with 4 address bytes or AF_INET6 with 16, TTL.
 */
typedef void (*dns_a_fn)(void *ctx, const char *name, int family, const uint8_t *addr,
                         uint32_t ttl);

/* Walks the answer section; returns how many A and AAAA records it reported, or -EINVAL. */
int dns_msg_answers(const uint8_t *msg, size_t len, dns_a_fn fn, void *ctx)
	__attribute__((warn_unused_result));

/* Sets the message's id (the first two bytes), for a forwarder that renumbers. */
void dns_msg_set_id(uint8_t *msg, size_t len, uint16_t id);

#endif
