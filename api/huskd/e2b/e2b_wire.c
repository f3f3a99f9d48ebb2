// SPDX-License-Identifier: MIT
/*
 * The bytes of E2B's wire formats huskd parses itself: multipart/form-data
 * (RFC 7578) as the SDK uploads files - each part's filename and bytes,
 * found in place in the body, nothing copied or allocated - and Connect's
 * envelopes. Every length is checked against the body before it is used;
 * tests/fuzz/fuzz_e2b_wire.c feeds them arbitrary bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "e2b_wire.h"

/* RFC 2046: a boundary is 1..70 characters. */
#define BOUNDARY_MAX 70

int multipart_boundary(const char *content_type, char out[MULTIPART_BOUNDARY_LEN])
{
	const char *b, *end;
	size_t n;

	if (!content_type || strncasecmp(content_type, "multipart/form-data", 19))
		return -EINVAL;
	b = strcasestr(content_type, "boundary=");
	if (!b)
		return -EINVAL;
	b += 9;
	if (*b == '"') {
		end = strchr(++b, '"');
		if (!end)
			return -EINVAL;
	} else {
		end = b + strcspn(b, "; \t");
	}
	n = (size_t)(end - b);
	if (n < 1 || n > BOUNDARY_MAX)
		return -EINVAL;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

/* The value of param (filename, name) in a Content-Disposition line [p, end), or -ENOENT. */
static int disposition_param(const char *p, const char *end, const char *param, char *out,
                             size_t outlen)
{
	size_t plen = strlen(param), n;
	const char *v, *q;

	for (v = p; v + plen + 2 <= end; v++) {
		if ((v == p || v[-1] == ' ' || v[-1] == ';') && !strncasecmp(v, param, plen) &&
		    v[plen] == '=')
			break;
	}
	if (v + plen + 2 > end)
		return -ENOENT;
	v += plen + 1;
	if (*v == '"') {
		v++;
		q = memchr(v, '"', (size_t)(end - v));
		if (!q)
			return -EINVAL;
	} else {
		for (q = v; q < end && *q != ';' && *q != ' '; q++)
			;
	}
	n = (size_t)(q - v);
	if (n >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

/* A part's head [p, end): its filename (and name) from Content-Disposition. */
static int part_head(const char *p, const char *end, struct multipart_part *part)
{
	const char *line, *eol;

	part->filename[0] = part->name[0] = '\0';
	for (line = p; line < end; line = eol + 2) {
		eol = memmem(line, (size_t)(end - line), "\r\n", 2);
		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > 20 && !strncasecmp(line, "Content-Disposition:", 20)) {
			int rc = disposition_param(line + 20, eol, "filename", part->filename,
			                           sizeof(part->filename));

			if (rc == -EINVAL || rc == -ENAMETOOLONG)
				return rc;
			rc = disposition_param(line + 20, eol, "name", part->name,
			                       sizeof(part->name));
			if (rc == -EINVAL || rc == -ENAMETOOLONG)
				return rc;
		}
		if (eol == end)
			break;
	}
	return 0;
}

int multipart_parse(const char *boundary, const void *body, size_t len,
                    struct multipart_part *parts, size_t max, size_t *count)
{
	char delim[BOUNDARY_MAX + 5];
	const char *p = body, *end = p + len, *head_end, *next;
	size_t dlen, n = 0;
	int rc;

	*count = 0;
	dlen = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	if (dlen < 5 || dlen >= sizeof(delim))
		return -EINVAL;
	/* The first delimiter may open the body (no CRLF before it) or follow a preamble. */
	if (len >= dlen - 2 && !memcmp(p, delim + 2, dlen - 2))
		p += dlen - 2;
	else if ((next = memmem(p, len, delim, dlen)) != NULL)
		p = next + dlen;
	else
		return -EINVAL;
	for (;;) {
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			break; /* the close delimiter */
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return -EINVAL;
		p += 2;
		head_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!head_end && end - p >= 2 && p[0] == '\r' && p[1] == '\n')
			head_end = p - 2; /* no headers at all */
		if (!head_end)
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		if ((rc = part_head(p, head_end, &parts[n])) != 0)
			return rc;
		p = head_end + 4;
		next = memmem(p, (size_t)(end - p), delim, dlen);
		if (!next)
			return -EINVAL;
		parts[n].data = p;
		parts[n].len = (size_t)(next - p);
		n++;
		p = next + dlen;
	}
	*count = n;
	return 0;
}

int envelope_unwrap(const void *body, size_t len, const void **msg, size_t *msg_len)
{
	const unsigned char *p = body;
	uint32_t n;

	if (len < 5)
		return -EINVAL;
	if (p[0] & 0x01)
		return -ENOTSUP;
	n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (p[0] != 0 || n != len - 5)
		return -EINVAL;
	*msg = p + 5;
	*msg_len = n;
	return 0;
}
