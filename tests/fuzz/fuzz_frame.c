// SPDX-License-Identifier: MIT
/*
 * Fuzzes the agent's frame reader: the input is fed in pieces whose sizes
 * come from the input itself, and every whole frame's payload is parsed as
 * the agent would parse a request.
 */
#include <jansson.h>
#include <stdint.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader r;
	size_t off = 0, step = size ? (size_t)data[0] % 64 + 1 : 1;

	/* A small limit, so oversized frames are exercised too. */
	frame_reader_init(&r, 4096);
	while (off < size) {
		size_t len = size - off < step ? size - off : step, used = 0;
		struct frame f;
		enum frame_status st = frame_reader_feed(&r, data + off, len, &used, &f);

		if (used > len)
			__builtin_trap();
		off += used;
		if (st == FRAME_OK && f.type == FRAME_REQUEST) {
			json_t *j = json_loadb((const char *)f.payload, f.len,
			                       JSON_REJECT_DUPLICATES, NULL);

			json_decref(j);
		}
		if (st == FRAME_BAD)
			break;
		if (used == 0 && st == FRAME_NEED_MORE)
			break;
	}
	frame_reader_free(&r);
	return 0;
}
