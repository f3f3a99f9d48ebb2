// SPDX-License-Identifier: MIT
/* Fuzzes the vsock packet header parser and the host handshake line parser. */
#include <stdint.h>
#include <string.h>

#include "virtio/vsock_pkt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct virtio_vsock_hdr wire;
	struct vsock_pkt p;
	const char *why;
	uint32_t port;

	if (vsock_pkt_parse(data, size, size > VSOCK_HDR_SIZE ? size - VSOCK_HDR_SIZE : 0, 3, &p,
	                    &why) == 0) {
		/* What parses must encode back to the same header. */
		vsock_pkt_encode(&p, &wire);
		if (memcmp(&wire, data, sizeof(wire)))
			__builtin_trap();
	}
	vsock_parse_connect((const char *)data, size, &port);
	return 0;
}
