// SPDX-License-Identifier: MIT
#include "virtio/vsock_pkt.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#define CONNECT_LINE_MAX 32

int vsock_pkt_parse(const void *hdr, size_t hdr_len, size_t payload_avail, uint64_t guest_cid,
                    struct vsock_pkt *p, const char **why)
{
	struct virtio_vsock_hdr h;

	if (hdr_len < sizeof(h)) {
		*why = "packet shorter than its header";
		return -EINVAL;
	}
	memcpy(&h, hdr, sizeof(h));
	p->src_cid = le64toh(h.src_cid);
	p->dst_cid = le64toh(h.dst_cid);
	p->src_port = le32toh(h.src_port);
	p->dst_port = le32toh(h.dst_port);
	p->len = le32toh(h.len);
	p->type = le16toh(h.type);
	p->op = le16toh(h.op);
	p->flags = le32toh(h.flags);
	p->buf_alloc = le32toh(h.buf_alloc);
	p->fwd_cnt = le32toh(h.fwd_cnt);

	if (p->type != VIRTIO_VSOCK_TYPE_STREAM) {
		*why = "not a stream packet";
		return -EINVAL;
	}
	if (p->src_cid != guest_cid || p->dst_cid != VSOCK_HOST_CID) {
		*why = "wrong source or destination CID";
		return -EINVAL;
	}
	if (p->op < VIRTIO_VSOCK_OP_REQUEST || p->op > VIRTIO_VSOCK_OP_CREDIT_REQUEST) {
		*why = "unknown operation";
		return -EINVAL;
	}
	if (p->op != VIRTIO_VSOCK_OP_RW && p->len) {
		*why = "payload on a control packet";
		return -EINVAL;
	}
	if (p->len > VSOCK_MAX_PAYLOAD || p->len > payload_avail) {
		*why = "payload length beyond the packet";
		return -EINVAL;
	}
	return 0;
}

void vsock_pkt_encode(const struct vsock_pkt *p, struct virtio_vsock_hdr *h)
{
	h->src_cid = htole64(p->src_cid);
	h->dst_cid = htole64(p->dst_cid);
	h->src_port = htole32(p->src_port);
	h->dst_port = htole32(p->dst_port);
	h->len = htole32(p->len);
	h->type = htole16(p->type);
	h->op = htole16(p->op);
	h->flags = htole32(p->flags);
	h->buf_alloc = htole32(p->buf_alloc);
	h->fwd_cnt = htole32(p->fwd_cnt);
}

int vsock_parse_connect(const char *buf, size_t len, uint32_t *port)
{
	static const char verb[] = "CONNECT ";
	size_t vlen = sizeof(verb) - 1, i;
	uint64_t v = 0;

	/* Reject early on a wrong prefix, so no garbage is waited for. */
	if (memcmp(buf, verb, len < vlen ? len : vlen))
		return -EINVAL;
	if (len <= vlen)
		return 0;
	for (i = vlen; i < len && i < CONNECT_LINE_MAX; i++) {
		if (buf[i] == '\n')
			break;
		if (buf[i] < '0' || buf[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(buf[i] - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
	}
	if (i >= CONNECT_LINE_MAX)
		return -EINVAL;
	if (i == len)
		return 0; /* no newline yet */
	if (i == vlen)
		return -EINVAL; /* no digits */
	*port = (uint32_t)v;
	return (int)(i + 1);
}
