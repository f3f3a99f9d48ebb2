// SPDX-License-Identifier: MIT
/*
 * The virtio devices a guest sees - rng, blk, vsock - driven as a hostile
 * guest would: register writes and reads in any order, notifications,
 * descriptor tables, avail rings and buffers the input fills and changes
 * between kicks (fuzz_dev.c). The first byte picks the device.
 */
#include "fuzz_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fdev *f = fdev_get();

	if (!f || size < 2)
		return 0;
	fdev_reset(f);
	fdev_drive(f, data[0] % FDEV_COUNT, data + 1, size - 1);
	return 0;
}
