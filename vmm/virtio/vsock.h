/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_VSOCK_H
#define HUSK_VIRTIO_VSOCK_H

#include <stdint.h>

struct vm;
struct vsock_dev;

/*
 * virtio-vsock with its host side on Unix sockets (as Firecracker does it):
 * - a host process connects to uds_path, writes "CONNECT <port>\n", reads
 *   "OK <host port>\n", and the stream is then a connection to the guest's
 *   port;
 * - a guest connection to host (CID 2) port P is passed to whoever listens
 *   on the socket "<uds_path>_<P>".
 * Flow control follows the virtio credit scheme: each connection buffers at
 * most VSOCK_BUF_ALLOC bytes each way, however slow either reader is.
 * Returns NULL and logs on failure.
 */
struct vsock_dev *vsock_create(struct vm *vm, uint64_t guest_cid, const char *uds_path);
void vsock_destroy(struct vsock_dev *d);

#endif
