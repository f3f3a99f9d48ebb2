// SPDX-License-Identifier: MIT
/*
 * Fuzzes the files API's archive conversion (api/huskd/sandbox/zipconv.c):
 * the first byte picks the direction - the rest as a client's zip to be made
 * a tar, or as a guest's tar(.gz) to be made a zip. Results must be 0 or a
 * negative errno with a message; the output never passes the data bound by
 * more than the formats' own headers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zipconv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	struct stat st;
	int out, in, ret;

	if (size < 1)
		return 0;
	out = memfd_create("out", MFD_CLOEXEC);
	if (out < 0)
		abort();
	if (data[0] & 1) {
		ret = zipconv_to_tar(data + 1, size - 1, out, MAX, err, sizeof(err));
	} else {
		in = memfd_create("in", MFD_CLOEXEC);
		if (in < 0 || write(in, data + 1, size - 1) != (ssize_t)(size - 1))
			abort();
		ret = zipconv_to_zip(in, out, MAX, err, sizeof(err));
		close(in);
	}
	if (ret > 0 || (ret < 0 && !err[0]))
		abort();
	/* Headers and names are the formats'; entry data is bounded (the input caps names). */
	if (fstat(out, &st) || (uint64_t)st.st_size > MAX + 64 * (size + 1024))
		abort();
	close(out);
	return 0;
}
