// SPDX-License-Identifier: MIT
/*
 * Fuzzes what huskd parses of E2B's SDK's bytes itself (api/huskd/e2b/e2b_wire.c):
 * a Content-Type line, then a body read as multipart/form-data under its
 * boundary and as a Connect envelope. Every part found must lie inside the body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PARTS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size < 200 ? size : 200);
	char ct[201], boundary[MULTIPART_BOUNDARY_LEN];
	struct multipart_part *parts;
	const uint8_t *body;
	const void *msg;
	size_t len, n = 0, mlen;

	if (!nl)
		return 0;
	memcpy(ct, data, (size_t)(nl - data));
	ct[nl - data] = '\0';
	body = nl + 1;
	len = size - (size_t)(body - data);
	/* A copy of exactly len bytes, so ASan sees any read past the body. */
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return 0;
	memcpy(copy, body, len);
	if (envelope_unwrap(copy, len, &msg, &mlen) == 0 &&
	    ((const uint8_t *)msg + mlen != copy + len))
		abort();
	parts = calloc(PARTS, sizeof(*parts));
	if (parts && multipart_boundary(ct, boundary) == 0 &&
	    multipart_parse(boundary, copy, len, parts, PARTS, &n) == 0) {
		if (n > PARTS)
			abort();
		for (size_t i = 0; i < n; i++) {
			const uint8_t *p = parts[i].data;

			if (p < copy || p + parts[i].len > copy + len ||
			    strlen(parts[i].filename) >= sizeof(parts[i].filename))
				abort();
		}
	}
	free(parts);
	free(copy);
	return 0;
}
