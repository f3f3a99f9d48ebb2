/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_VSOCK_PKT_H
#define HUSK_VIRTIO_VSOCK_PKT_H

#include <linux/virtio_vsock.h>
#include <stddef.h>
#include <stdint.h>

#define VSOCK_HOST_CID 2
#define VSOCK_HDR_SIZE sizeof(struct virtio_vsock_hdr)
/* Linux never sends more payload per packet than this (64 KiB). */
#define VSOCK_MAX_PAYLOAD (64 * 1024)

/* A packet header in host byte order. */
struct vsock_pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port;
	uint32_t len;
	uint16_t type, op;
	uint32_t flags;
	uint32_t buf_alloc, fwd_cnt;
};

/*
 * Decodes and checks a header the guest sent: a stream packet from
 * guest_cid to the host, a known operation, a payload only on RW and no
 * larger than VSOCK_MAX_PAYLOAD or than payload_avail (what the chain
 * really carries after the header). Returns 0, or -EINVAL with *why set.
 */
int vsock_pkt_parse(const void *hdr, size_t hdr_len, size_t payload_avail, uint64_t guest_cid,
                    struct vsock_pkt *p, const char **why) __attribute__((warn_unused_result));

/* Encodes a header for the guest (little-endian wire format). */
void vsock_pkt_encode(const struct vsock_pkt *p, struct virtio_vsock_hdr *out);

/*
 * The host side's handshake line: "CONNECT <port>\n". Looks at the first
 * len bytes a client sent. Returns the line's length (bytes to consume) with
 * *port set, 0 if more bytes are needed, or -EINVAL for anything else
 * (including a line longer than 32 bytes).
 */
int vsock_parse_connect(const char *buf, size_t len, uint32_t *port);

#endif
