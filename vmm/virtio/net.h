/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_NET_H
#define HUSK_VIRTIO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct vm;
struct virtio_net;

/* The largest frame either way: an MTU of 65520 plus the Ethernet header. */
#define NET_MTU_MAX 65520
#define NET_FRAME_MAX (NET_MTU_MAX + 14)

struct net_spec {
	uint8_t mac[6];
	uint16_t mtu;  /* 68..NET_MTU_MAX */
	uint64_t rate; /* the guest's sending, bytes per second; 0: unlimited */
	uint8_t host;  /* the guest's address is 10.0.2.<host> (its DHCP answer) */
};

/*
 * Parses a --net argument:
 * "slirp[,mac=XX:XX:XX:XX:XX:XX][,mtu=N][,rate=N][,ip=10.0.2.N]".
 * Fills spec (a random locally administered MAC unless given; MTU 65520
 * unless given; rate in bytes per second, with an optional K, M or G, none
 * unless given; the guest's address 10.0.2.15 unless given, N from 4 to 239
 * so DHCP's range stays inside the network). Returns 0, or -EINVAL with a message in err naming the
 * bad part.
 */
int net_spec_parse(const char *arg, struct net_spec *spec, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * A virtio-net device with one receive and one transmit queue. Its frames
 * are moved by a backend thread (netstack.c), not on the VM's event loop:
 * a queue notification only calls kick(ctx), which must wake that thread.
 * NULL and logged on failure.
 */
struct virtio_net *virtio_net_create(struct vm *vm, const struct net_spec *spec,
                                     void (*kick)(void *ctx), void *ctx);
void virtio_net_destroy(struct virtio_net *n);

/*
 * The backend thread's side. Gives the guest one frame: 0, -EAGAIN when the
 * guest has no room posted (or the VM is paused: nothing touches guest
 * memory then), -EMSGSIZE for a frame over NET_FRAME_MAX or one the guest's
 * buffers can never hold (no mergeable buffers, and a chain too small).
 */
int virtio_net_rx(struct virtio_net *n, const void *frame, size_t len);

/*
 * Takes the next frame the guest sent into buf (cap >= NET_FRAME_MAX),
 * completing a checksum the guest left to us. Returns its length, 0 when
 * there is none (or the VM is paused); a malformed one is dropped and
 * logged, and the next one taken.
 */
ssize_t virtio_net_tx(struct virtio_net *n, uint8_t *buf, size_t cap);

/*
 * Neither of the two above interrupts the guest: the backend calls this
 * once its turn's frames are in, both ways, so that a turn costs the guest
 * one interrupt (and its status read and ack) instead of one per frame.
 */
void virtio_net_flush(struct virtio_net *n);

/*
 * The eventfd the guest's kicks of the receive (tx false) or transmit queue
 * land in, -1 without KVM (kick() is called then); the backend thread polls
 * it and calls virtio_net_notified() when it is readable.
 */
int virtio_net_notify_fd(struct virtio_net *n, bool tx);
void virtio_net_notified(struct virtio_net *n, bool tx);

#endif
