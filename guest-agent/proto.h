/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_PROTO_H
#define HUSK_AGENT_PROTO_H

/*
 * The husk agent wire protocol, version 1: frames on a byte stream. See
 * PROTOCOL.md beside this file. Shared by the agent and the host client.
 */
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define AGENT_VSOCK_PORT 52

/* len (4) | type (1) | flags (1) | reserved (2) | id (4), all big-endian */
#define FRAME_HDR_SIZE 12
/* len counts the 8 header bytes after it, then the payload. */
#define FRAME_LEN_MIN 8
#define FRAME_MAX_PAYLOAD (1U << 20)

enum frame_type {
	FRAME_HELLO = 1,
	FRAME_REQUEST = 2,
	FRAME_RESULT = 3,
	FRAME_ERROR = 4,
	FRAME_STDOUT = 5,
	FRAME_STDERR = 6,
	FRAME_STDIN = 7,
	FRAME_DATA = 8,
	FRAME_CANCEL = 9,
	FRAME_WINDOW = 10,
	FRAME_TYPE_MAX = FRAME_WINDOW,
};

/* flags */
#define FRAME_F_END 0x01 /* STDIN: close the process's stdin; DATA: last chunk */

struct frame {
	uint8_t type, flags;
	uint32_t id;
	uint32_t len; /* payload bytes */
	const uint8_t *payload;
};

enum frame_status {
	FRAME_NEED_MORE, /* everything given was consumed */
	FRAME_OK,        /* *f is a whole frame, valid until the next feed */
	FRAME_TOO_LARGE, /* *f has type and id; its payload is being skipped unread */
	FRAME_BAD,       /* the length field is impossible: framing is lost */
};

/* Reassembles frames from a byte stream, allocating only within the limit. */
struct frame_reader {
	uint8_t hdr[FRAME_HDR_SIZE];
	uint32_t hdr_have;
	uint8_t *buf;
	uint32_t cap, have, need;
	uint32_t skip; /* payload bytes of an oversized frame still to discard */
	uint32_t max_payload;
	struct frame cur;
};

void frame_reader_init(struct frame_reader *r, uint32_t max_payload);
void frame_reader_free(struct frame_reader *r);

/*
 * Consumes bytes from data (up to len; *used says how many) until a frame
 * is whole or something is wrong. Call again with the rest.
 */
enum frame_status frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len,
                                    size_t *used, struct frame *f);

/* Writes the 12-byte header of a frame with payload_len bytes. */
void frame_encode_hdr(uint8_t *out, uint8_t type, uint8_t flags, uint32_t id, uint32_t payload_len);

const char *frame_type_name(uint8_t type);

#endif
