// SPDX-License-Identifier: MIT
/*
 * Device state from a corrupted snapshot: the input, cut in pieces, is
 * handed to every device's restore as its saved state (a snapshot file is
 * the guest's to have shaped), then the guest drives the device.
 * Input: [which device's state] [blob length / 8] blob, then what
 * fuzz_devices takes ([device to drive] driving).
 */
#include <string.h>

#include "fuzz_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fdev *f = fdev_get();
	size_t len;
	unsigned d;

	if (!f || size < 4)
		return 0;
	fdev_reset(f);
	d = data[0] % f->vm.nr_snap_devs;
	len = data[1] * 8u < size - 3 ? data[1] * 8u : size - 3;
	/* Refused or taken, the device must stay sound for what follows. */
	f->vm.snap_devs[d].restore(f->vm.snap_devs[d].dev, data + 2, len);
	data += 2 + len;
	size -= 2 + len;
	fdev_drive(f, data[0] % FDEV_COUNT, data + 1, size - 1);
	return 0;
}
