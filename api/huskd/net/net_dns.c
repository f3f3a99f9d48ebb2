// SPDX-License-Identifier: MIT
/*
 * The sandboxes' DNS. Every UDP packet a sandbox's namespace sends to port
 * 53, whatever the address, is redirected by huskd's nftables table to
 * this forwarder, which asks the host's own resolver (the first IPv4
 * nameserver of huskd's /etc/resolv.conf, reachable though it may be a
 * private or loopback address the sandboxes may not reach themselves) and
 * answers under the guest's id. Queries are renumbered with random ids,
 * and answers taken only from that resolver with a pending id.
 */
#include "net_dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dns_msg.h"
#include "jail.h"

#define DNS_PENDING 1024 /* a power of two: the low bits of a forwarded id pick the slot */
#define DNS_TIMEOUT_MS 5000

struct pending {
	bool used;
	uint16_t client_id, our_id;
	struct sockaddr_in client;
	uint64_t t0;
};

struct net_dns {
	uv_loop_t *loop;
	uv_udp_t listen, up;
	uv_timer_t sweep;
	int open_handles;
	struct sockaddr_in upstream;
	const struct net_dns_hooks *hooks;
	void *ctx;
	unsigned npending;
	struct pending p[DNS_PENDING];
	uint8_t buf[DNS_MSG_MAX];
	uint64_t forwarded, dropped, malformed;
};

static void dns_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct net_dns *d = h->data;

	(void)suggested;
	*buf = uv_buf_init((char *)d->buf, sizeof(d->buf));
}

/* Only the sandboxes' namespaces (JAIL_NET_PREFIX, 10.233/16) are served. */
static bool from_sandbox(const struct sockaddr *a)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)a;

	return a && a->sa_family == AF_INET &&
	       (ntohl(in->sin_addr.s_addr) >> 16) == ((10u << 8) | 233u);
}

static void on_query(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                     unsigned flags)
{
	struct net_dns *d = h->data;
	struct dns_question q;
	struct pending *p = NULL;
	uint16_t rnd = 0;
	uv_buf_t out;

	if (n <= 0 || (flags & UV_UDP_PARTIAL) || !from_sandbox(from) ||
	    dns_msg_question((const uint8_t *)buf->base, (size_t)n, &q)) {
		if (n > 0)
			d->dropped++;
		return;
	}
	if (d->hooks && d->hooks->refuse &&
	    d->hooks->refuse(d->ctx, ((const struct sockaddr_in *)from)->sin_addr, q.name)) {
		/* A denied name: the answer comes from here, REFUSED, and nothing is asked. */
		buf->base[2] = (char)(buf->base[2] | 0x80);
		buf->base[3] = (char)((buf->base[3] & 0xf0) | 5);
		out = uv_buf_init(buf->base, (unsigned)n);
		(void)uv_udp_try_send(&d->listen, &out, 1, from);
		return;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint16_t)(d->forwarded * 40503u);
	for (unsigned i = 0; i < DNS_PENDING && !p; i++) {
		unsigned s = (rnd + i) % DNS_PENDING;

		if (!d->p[s].used)
			p = &d->p[s];
	}
	if (!p) {
		d->dropped++; /* the guest's resolver asks again */
		return;
	}
	*p = (struct pending){.used = true,
	                      .client_id = q.id,
	                      .our_id =
	                              (uint16_t)((rnd & ~(DNS_PENDING - 1)) | (unsigned)(p - d->p)),
	                      .client = *(const struct sockaddr_in *)from,
	                      .t0 = uv_now(d->loop)};
	dns_msg_set_id((uint8_t *)buf->base, (size_t)n, p->our_id);
	out = uv_buf_init(buf->base, (unsigned)n);
	if (uv_udp_try_send(&d->up, &out, 1, (const struct sockaddr *)&d->upstream) != n) {
		p->used = false;
		d->dropped++;
		return;
	}
	d->npending++;
	d->forwarded++;
	if (!uv_is_active((uv_handle_t *)&d->sweep))
		uv_timer_again(&d->sweep);
}

struct seen {
	struct net_dns *d;
	struct in_addr client;
	struct dns_question q;
};

static void on_a(void *ctx, const char *name, int family, const uint8_t *addr, uint32_t ttl)
{
	struct seen *s = ctx;

	(void)name; /* the question's name decides: a CNAME's target is not what was allowed */
	s->d->hooks->answer(s->d->ctx, s->client, s->q.name, family, addr, ttl);
}

static void on_answer(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                      unsigned flags)
{
	struct net_dns *d = h->data;
	const struct sockaddr_in *in = (const struct sockaddr_in *)from;
	const uint8_t *m = (const uint8_t *)buf->base;
	struct pending *p;
	uint16_t id;
	uv_buf_t out;

	if (n < 12 || (flags & UV_UDP_PARTIAL) || !from || from->sa_family != AF_INET ||
	    in->sin_addr.s_addr != d->upstream.sin_addr.s_addr ||
	    in->sin_port != d->upstream.sin_port)
		return;
	id = (uint16_t)(m[0] << 8 | m[1]);
	p = &d->p[id % DNS_PENDING];
	if (!p->used || p->our_id != id)
		return;
	dns_msg_set_id((uint8_t *)buf->base, (size_t)n, p->client_id);
	/* Before the guest has the answer: its connect must find the addresses let through. */
	if (d->hooks && d->hooks->answer) {
		struct seen s = {.d = d, .client = p->client.sin_addr};

		if (dns_msg_question(m, (size_t)n, &s.q) == 0 &&
		    dns_msg_answers(m, (size_t)n, on_a, &s) < 0)
			d->malformed++;
	}
	out = uv_buf_init(buf->base, (unsigned)n);
	if (uv_udp_try_send(&d->listen, &out, 1, (const struct sockaddr *)&p->client) != n)
		d->dropped++;
	p->used = false;
	d->npending--;
}

/* Forgets queries the resolver never answered (the guest's resolver times out and retries). */
static void on_sweep(uv_timer_t *t)
{
	struct net_dns *d = t->data;
	uint64_t now = uv_now(d->loop);

	for (unsigned i = 0; i < DNS_PENDING && d->npending; i++) {
		if (d->p[i].used && now - d->p[i].t0 >= DNS_TIMEOUT_MS) {
			d->p[i].used = false;
			d->npending--;
		}
	}
	if (!d->npending)
		uv_timer_stop(t);
}

static int upstream_from_resolv_conf(struct sockaddr_in *up, char *why, size_t len)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], addr[64];

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, " nameserver %63s", addr) == 1 &&
		    inet_pton(AF_INET, addr, &up->sin_addr) == 1) {
			fclose(f);
			up->sin_family = AF_INET;
			up->sin_port = htons(53);
			return 0;
		}
	}
	if (f)
		fclose(f);
	snprintf(why, len, "/etc/resolv.conf names no IPv4 nameserver for the sandboxes' DNS");
	return -ENOENT;
}

static void on_closed(uv_handle_t *h)
{
	struct net_dns *d = h->data;

	if (--d->open_handles == 0)
		free(d);
}

void net_dns_close(struct net_dns *d)
{
	if (!d)
		return;
	uv_close((uv_handle_t *)&d->listen, on_closed);
	uv_close((uv_handle_t *)&d->up, on_closed);
	uv_close((uv_handle_t *)&d->sweep, on_closed);
}

int net_dns_open(uv_loop_t *loop, uint16_t port, const char *upstream,
                 const struct net_dns_hooks *hooks, void *ctx, struct net_dns **out, char *why,
                 size_t len)
{
	struct net_dns *d = calloc(1, sizeof(*d));
	struct sockaddr_in any = {.sin_family = AF_INET};
	int rc;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	if (upstream && inet_pton(AF_INET, upstream, &d->upstream.sin_addr) == 1) {
		d->upstream.sin_family = AF_INET;
		d->upstream.sin_port = htons(53);
		rc = 0;
	} else {
		rc = upstream_from_resolv_conf(&d->upstream, why, len);
	}
	if (rc) {
		free(d);
		return rc;
	}
	d->loop = loop;
	d->hooks = hooks;
	d->ctx = ctx;
	uv_udp_init(loop, &d->listen);
	uv_udp_init(loop, &d->up);
	uv_timer_init(loop, &d->sweep);
	d->listen.data = d->up.data = d->sweep.data = d;
	d->open_handles = 3;
	uv_timer_start(&d->sweep, on_sweep, 1000, 1000);
	uv_timer_stop(&d->sweep);
	any.sin_port = htons(port);
	rc = uv_udp_bind(&d->listen, (const struct sockaddr *)&any, 0);
	if (!rc) {
		any.sin_port = 0;
		rc = uv_udp_bind(&d->up, (const struct sockaddr *)&any, 0);
	}
	if (!rc)
		rc = uv_udp_recv_start(&d->listen, dns_alloc, on_query);
	if (!rc)
		rc = uv_udp_recv_start(&d->up, dns_alloc, on_answer);
	if (rc) {
		snprintf(why, len, "cannot listen for the sandboxes' DNS on UDP port %u: %s", port,
		         uv_strerror(rc));
		net_dns_close(d);
		return rc;
	}
	*out = d;
	return 0;
}
