// SPDX-License-Identifier: MIT
/*
 * virtio-net (virtio 1.x, 5.1): one receive and one transmit queue, the MAC,
 * link status and MTU in config space, mergeable receive buffers, checksums
 * both ways. The queues are worked by the backend thread (netstack.c) under
 * the device lock; the VM's event loop only wakes it.
 */
#include "virtio/net.h"

#include <endian.h>
#include <errno.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "virtio/virtio.h"
#include "vm.h"

#define NET_RXQ 0
#define NET_TXQ 1
#define NET_QUEUE_SIZE 256
#define NET_HDR_SIZE sizeof(struct virtio_net_hdr_v1)

struct virtio_net {
	struct virtio_mmio *t;
	struct vm *vm;
	struct net_spec spec;
	void (*kick)(void *ctx);
	void *ctx;
	struct virtq_chain first, chain; /* one frame's first receive chain, and any chain */
	uint16_t heads[NET_QUEUE_SIZE];
	uint32_t lens[NET_QUEUE_SIZE];
};

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	           &end) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	/* A multicast address would make every frame to it a broadcast. */
	return (mac[0] & 1) ? -EINVAL : 0;
}

/* "N[K|M|G]" bytes per second (powers of 1000, as rates are), 1K..100G. */
static int parse_rate(const char *s, uint64_t *out)
{
	unsigned long long n, mul = 1;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mul = 1000, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1000000, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1000000000, end++;
	if (*end || n > 100000000000ULL / mul || n * mul < 1000)
		return -EINVAL;
	*out = n * mul;
	return 0;
}

int net_spec_parse(const char *arg, struct net_spec *spec, char *err, size_t errlen)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	memset(spec, 0, sizeof(*spec));
	spec->mtu = NET_MTU_MAX;
	spec->host = 15;
	if (getrandom(spec->mac, sizeof(spec->mac), 0) != sizeof(spec->mac))
		spec->mac[5] = 1;
	spec->mac[0] = (uint8_t)((spec->mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
	tok = strtok_r(copy, ",", &save);
	if (!tok || strcmp(tok, "slirp") != 0) {
		snprintf(err, errlen,
		         "--net %s: the only network is \"slirp\" (--net "
		         "slirp[,mac=..][,mtu=N][,rate=N][,ip=10.0.2.N])",
		         arg);
		ret = -EINVAL;
	}
	while (!ret && (tok = strtok_r(NULL, ",", &save))) {
		char *end;

		if (!strncmp(tok, "mac=", 4)) {
			if (parse_mac(tok + 4, spec->mac)) {
				snprintf(err, errlen,
				         "--net: %s is not a unicast MAC (give "
				         "mac=02:00:00:00:00:01)",
				         tok + 4);
				ret = -EINVAL;
			}
		} else if (!strncmp(tok, "mtu=", 4)) {
			unsigned long mtu = strtoul(tok + 4, &end, 10);

			if (*end || end == tok + 4 || mtu < 68 || mtu > NET_MTU_MAX) {
				snprintf(err, errlen, "--net: mtu=%s is not a number from 68 to %d",
				         tok + 4, NET_MTU_MAX);
				ret = -EINVAL;
			}
			spec->mtu = (uint16_t)mtu;
		} else if (!strncmp(tok, "rate=", 5)) {
			if (parse_rate(tok + 5, &spec->rate)) {
				snprintf(err, errlen,
				         "--net: rate=%s is not a rate in bytes per second from "
				         "1K to 100G (give rate=1M)",
				         tok + 5);
				ret = -EINVAL;
			}
		} else if (!strncmp(tok, "ip=", 3)) {
			unsigned n = 0;
			char rest;

			if (strspn(tok + 3, "0123456789.") != strlen(tok + 3) ||
			    sscanf(tok + 3, "10.0.2.%3u%c", &n, &rest) != 1 || n < 4 || n > 239) {
				snprintf(err, errlen,
				         "--net: ip=%s is not an address from 10.0.2.4 to "
				         "10.0.2.239 (give ip=10.0.2.15)",
				         tok + 3);
				ret = -EINVAL;
			}
			spec->host = (uint8_t)n;
		} else {
			snprintf(err, errlen,
			         "--net: unknown option \"%s\" (mac=, mtu=, rate=, ip=)", tok);
			ret = -EINVAL;
		}
	}
	free(copy);
	return ret;
}

static void net_config_read(void *dev, uint32_t off, void *data, unsigned len)
{
	struct virtio_net *n = dev;
	struct virtio_net_config cfg = {0};

	memcpy(cfg.mac, n->spec.mac, sizeof(cfg.mac));
	cfg.status = htole16(VIRTIO_NET_S_LINK_UP);
	cfg.max_virtqueue_pairs = htole16(1);
	cfg.mtu = htole16(n->spec.mtu);
	memcpy(data, (uint8_t *)&cfg + off, len);
}

static void net_notify(void *dev, unsigned q)
{
	struct virtio_net *n = dev;

	(void)q;
	n->kick(n->ctx);
}

static int net_activate(void *dev)
{
	struct virtio_net *n = dev;

	/* Frames held back while the guest had no queues can go now. */
	n->kick(n->ctx);
	return 0;
}

static const struct virtio_dev_ops net_ops = {
	.name = "virtio-net",
	.device_id = VIRTIO_ID_NET,
	.nr_queues = 2,
	.queue_max = NET_QUEUE_SIZE,
	.kick_when_empty = true,
	.features = (1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_GUEST_CSUM) |
                    (1ull << VIRTIO_NET_F_MTU) | (1ull << VIRTIO_NET_F_MAC) |
                    (1ull << VIRTIO_NET_F_MRG_RXBUF) | (1ull << VIRTIO_NET_F_STATUS),
	.config_size = offsetof(struct virtio_net_config, mtu) + sizeof(uint16_t),
	.config_read = net_config_read,
	.notify = net_notify,
	.notify_by_fd = true,
	.activate = net_activate,
};

/* Whether the backend may touch the queues: not while a pause or snapshot is under way. */
static bool net_live(struct virtio_net *n)
{
	return !atomic_load(&n->vm->pause_req);
}

static uint32_t net_csum_add(const uint8_t *p, size_t len, uint32_t sum)
{
	for (; len > 1; p += 2, len -= 2)
		sum += (uint32_t)p[0] << 8 | p[1];
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

/* The guest summed the pseudo-header into the field; we sum the rest and store it. */
static int net_csum_finish(uint8_t *frame, size_t len, uint16_t start, uint16_t offset)
{
	uint32_t sum;

	if ((size_t)start + offset + 2 > len)
		return -EINVAL;
	sum = net_csum_add(frame + start, len - start, 0);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	frame[start + offset] = (uint8_t)(sum >> 8);
	frame[start + offset + 1] = (uint8_t)sum;
	return 0;
}

/* Reads one transmit chain into buf: the frame's length, or -EINVAL to drop it. */
static ssize_t net_tx_one(struct virtio_net *n, uint8_t *buf, size_t cap)
{
	struct virtio_net_hdr_v1 hdr;
	size_t len;

	if (virtq_chain_read(&n->chain, 0, &hdr, sizeof(hdr)) != sizeof(hdr) ||
	    n->chain.out_len - sizeof(hdr) > cap || n->chain.out_len - sizeof(hdr) < 14)
		return -EINVAL;
	if (hdr.gso_type != VIRTIO_NET_HDR_GSO_NONE)
		return -EINVAL; /* never offered */
	len = virtq_chain_read(&n->chain, sizeof(hdr), buf, n->chain.out_len - sizeof(hdr));
	if ((hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
	    net_csum_finish(buf, len, le16toh(hdr.csum_start), le16toh(hdr.csum_offset)))
		return -EINVAL;
	return (ssize_t)len;
}

ssize_t virtio_net_tx(struct virtio_net *n, uint8_t *buf, size_t cap)
{
	struct virtq *vq = virtio_queue(n->t, NET_TXQ);
	ssize_t got = 0;
	int ret;

	virtio_lock(n->t);
	while (got == 0 && net_live(n) && (ret = virtq_pop(vq, virtio_mem(n->t), &n->chain)) != 0) {
		if (ret < 0)
			continue;
		got = net_tx_one(n, buf, cap);
		virtq_push(vq, n->chain.head, 0);
		if (got < 0) {
			log_guest(LOG_WARN, "virtio-net: dropped a malformed frame from the guest");
			got = 0;
		}
	}
	virtio_unlock(n->t);
	return got;
}

void virtio_net_flush(struct virtio_net *n)
{
	virtio_lock(n->t);
	virtio_signal(n->t, NET_RXQ);
	virtio_signal(n->t, NET_TXQ);
	virtio_unlock(n->t);
}

/* Gives back the chains taken for a frame that did not fit (nothing was pushed since). */
static void net_rx_rewind(struct virtq *vq, unsigned taken)
{
	while (taken--)
		virtq_unpop(vq);
}

static int net_rx_locked(struct virtio_net *n, const uint8_t *frame, size_t len)
{
	struct virtq *vq = virtio_queue(n->t, NET_RXQ);
	const struct guest_mem *mem = virtio_mem(n->t);
	bool merge = virtio_has_feature(n->t, VIRTIO_NET_F_MRG_RXBUF);
	struct virtio_net_hdr_v1 hdr = {0};
	size_t done = 0;
	unsigned taken = 0;
	uint16_t nbuf;

	if (!net_live(n) || !vq || !vq->ready)
		return -EAGAIN;
	while (taken == 0 || done < len) {
		struct virtq_chain *c = taken ? &n->chain : &n->first;
		size_t off = taken ? 0 : NET_HDR_SIZE, room;
		int ret;

		if (taken == NET_QUEUE_SIZE) {
			net_rx_rewind(vq, taken);
			return -EAGAIN;
		}
		ret = virtq_pop(vq, mem, c);
		if (ret == 0) {
			net_rx_rewind(vq, taken);
			return -EAGAIN;
		}
		if (ret < 0 || c->in_len < off) {
			/*
			 * A bad chain (virtq_pop gave it back, or it cannot hold the
			 * header): what this frame took cannot be rewound past it, so
			 * it goes back empty too, and the frame waits for better ones.
			 */
			if (ret > 0)
				virtq_push(vq, c->head, 0);
			for (unsigned i = 0; i < taken; i++)
				virtq_push(vq, n->heads[i], 0);
			return -EAGAIN;
		}
		room = c->in_len - off < len - done ? c->in_len - off : len - done;
		n->heads[taken] = c->head;
		n->lens[taken] = (uint32_t)(off + virtq_chain_write(c, off, frame + done, room));
		done += room;
		taken++;
		if (!merge && done < len) {
			/* Without mergeable buffers one chain must hold the frame: it never will.
			 */
			net_rx_rewind(vq, taken);
			return -EMSGSIZE;
		}
	}
	nbuf = (uint16_t)taken;
	hdr.flags = VIRTIO_NET_HDR_F_DATA_VALID; /* our stack's checksums are right */
	hdr.num_buffers = htole16(nbuf);
	virtq_chain_write(&n->first, 0, &hdr, sizeof(hdr));
	for (unsigned i = 0; i < taken; i++)
		virtq_push(vq, n->heads[i], n->lens[i]);
	return 0;
}

int virtio_net_rx(struct virtio_net *n, const void *frame, size_t len)
{
	int ret;

	if (len > NET_FRAME_MAX)
		return -EMSGSIZE;
	virtio_lock(n->t);
	ret = net_rx_locked(n, frame, len);
	virtio_unlock(n->t);
	return ret;
}

int virtio_net_notify_fd(struct virtio_net *n, bool tx)
{
	return virtio_notify_fd(n->t, tx ? NET_TXQ : NET_RXQ);
}

void virtio_net_notified(struct virtio_net *n, bool tx)
{
	virtio_notify_take(n->t, tx ? NET_TXQ : NET_RXQ);
}

struct virtio_net *virtio_net_create(struct vm *vm, const struct net_spec *spec,
                                     void (*kick)(void *ctx), void *ctx)
{
	struct virtio_net *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->vm = vm;
	n->spec = *spec;
	n->kick = kick;
	n->ctx = ctx;
	n->t = virtio_mmio_create(vm, &net_ops, n);
	if (!n->t) {
		free(n);
		return NULL;
	}
	return n;
}

void virtio_net_destroy(struct virtio_net *n)
{
	if (!n)
		return;
	virtio_mmio_destroy(n->t);
	free(n);
}
