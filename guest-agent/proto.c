// SPDX-License-Identifier: MIT
#include "proto.h"

#include <stdlib.h>
#include <string.h>

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void frame_reader_init(struct frame_reader *r, uint32_t max_payload)
{
	memset(r, 0, sizeof(*r));
	r->max_payload = max_payload;
}

void frame_reader_free(struct frame_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

enum frame_status frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len,
                                    size_t *used, struct frame *f)
{
	size_t off = 0;

	*used = 0;
	/* Discarding an oversized frame's payload. */
	if (r->skip) {
		size_t n = len < r->skip ? len : r->skip;

		r->skip -= (uint32_t)n;
		*used = n;
		return FRAME_NEED_MORE;
	}
	if (r->hdr_have < FRAME_HDR_SIZE) {
		size_t n = FRAME_HDR_SIZE - r->hdr_have;

		if (n > len)
			n = len;
		memcpy(r->hdr + r->hdr_have, data, n);
		r->hdr_have += (uint32_t)n;
		off = n;
		if (r->hdr_have < FRAME_HDR_SIZE) {
			*used = off;
			return FRAME_NEED_MORE;
		}
		uint32_t flen = get32(r->hdr);

		r->cur.type = r->hdr[4];
		r->cur.flags = r->hdr[5];
		r->cur.id = get32(r->hdr + 8);
		if (flen < FRAME_LEN_MIN) {
			*used = off;
			r->hdr_have = 0;
			return FRAME_BAD;
		}
		r->need = flen - FRAME_LEN_MIN;
		r->have = 0;
		if (r->need > r->max_payload) {
			/* Refused before anything is allocated; the stream stays in sync. */
			r->skip = r->need;
			r->hdr_have = 0;
			*f = r->cur;
			f->len = r->need;
			f->payload = NULL;
			*used = off;
			return FRAME_TOO_LARGE;
		}
		if (r->need > r->cap) {
			uint8_t *nb = realloc(r->buf, r->need);

			if (!nb) {
				/* Treat as too large: skip it, tell the peer. */
				r->skip = r->need;
				r->hdr_have = 0;
				*f = r->cur;
				f->len = r->need;
				f->payload = NULL;
				*used = off;
				return FRAME_TOO_LARGE;
			}
			r->buf = nb;
			r->cap = r->need;
		}
	}
	if (r->have < r->need) {
		size_t n = r->need - r->have;

		if (n > len - off)
			n = len - off;
		memcpy(r->buf + r->have, data + off, n);
		r->have += (uint32_t)n;
		off += n;
	}
	*used = off;
	if (r->have < r->need)
		return FRAME_NEED_MORE;
	*f = r->cur;
	f->len = r->need;
	f->payload = r->buf;
	r->hdr_have = 0;
	return FRAME_OK;
}

void frame_encode_hdr(uint8_t *out, uint8_t type, uint8_t flags, uint32_t id, uint32_t payload_len)
{
	put32(out, FRAME_LEN_MIN + payload_len);
	out[4] = type;
	out[5] = flags;
	out[6] = out[7] = 0;
	put32(out + 8, id);
}

const char *frame_type_name(uint8_t type)
{
	static const char *const names[] = {
		"?",      "HELLO", "REQUEST", "RESULT", "ERROR",  "STDOUT",
		"STDERR", "STDIN", "DATA",    "CANCEL", "WINDOW",
	};

	return type <= FRAME_TYPE_MAX ? names[type] : "?";
}
