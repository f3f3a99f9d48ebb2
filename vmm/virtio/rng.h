/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VIRTIO_RNG_H
#define HUSK_VIRTIO_RNG_H

struct vm;
struct virtio_rng;

/* A virtio entropy device fed from the host's getrandom(). NULL and logged on failure. */
struct virtio_rng *virtio_rng_create(struct vm *vm);
void virtio_rng_destroy(struct virtio_rng *r);

#endif
