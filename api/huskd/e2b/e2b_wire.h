/* SPDX-License-Identifier: MIT */
#ifndef HUSK_E2B_WIRE_H
#define HUSK_E2B_WIRE_H

/*
 * What E2B's SDK sends that huskd parses itself (e2b_wire.c, fuzzed by
 * tests/fuzz/fuzz_e2b_wire.c): multipart/form-data bodies and Connect's
 * envelopes, found in place and bounded by the body.
 */
#include <stddef.h>

#define MULTIPART_BOUNDARY_LEN 71

struct multipart_part {
	char name[256];      /* the form field's name ("" if none) */
	char filename[4096]; /* the part's filename ("" if none) */
	const void *data;    /* its bytes, inside the body */
	size_t len;
};

/* The boundary of a "multipart/form-data; boundary=..." Content-Type: 0, or -EINVAL. */
int multipart_boundary(const char *content_type, char out[MULTIPART_BOUNDARY_LEN]);
/*
 * The parts of body (len bytes) delimited by boundary, at most max:
 * 0 with *count, -EINVAL for a body that is not multipart, -E2BIG past
 * max parts, -ENAMETOOLONG for a name or filename too long for the struct.
 */
int multipart_parse(const char *boundary, const void *body, size_t len,
                    struct multipart_part *parts, size_t max, size_t *count);

/*
 * A Connect envelope (flags, 32-bit big-endian length, message) that must
 * be the whole body: 0 with *msg and *msg_len, -EINVAL if it is not
 * exactly one uncompressed message, -ENOTSUP if it is compressed.
 */
int envelope_unwrap(const void *body, size_t len, const void **msg, size_t *msg_len);

#endif
