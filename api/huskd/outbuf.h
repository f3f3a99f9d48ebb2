/* SPDX-License-Identifier: MIT */
#ifndef HUSK_OUTBUF_H
#define HUSK_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_req;
struct outbuf;

/*
 * One captured output stream (an execution's stdout, say), kept in a file
 * so it costs no memory, survives a huskd restart and outlives its
 * sandbox. Any number of HTTP readers replay it from the start and then
 * follow it live; each ends when the stream is closed and it has caught
 * up. A slow reader is paced by its connection's send queue, never by
 * buffering more here.
 */

/* Creates stream id's file in dir. limit: bytes kept; the rest is counted, then dropped. */
int outbuf_create(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
	__attribute__((warn_unused_result));

/* Appends (up to the limit); readers are fed at once. */
void outbuf_append(struct outbuf *ob, const void *data, size_t len);

/* No more data: readers end once caught up; the file is marked complete. */
void outbuf_close(struct outbuf *ob);

/* Whether output past the limit was dropped. */
bool outbuf_truncated(const struct outbuf *ob);

/* Frees once closed and without readers (later readers use outbuf_serve_file). */
void outbuf_release(struct outbuf *ob);

const char *outbuf_id(const struct outbuf *ob);

/* Attaches an HTTP request as a reader: streams from byte 0, follows, ends. */
void outbuf_serve(struct outbuf *ob, struct http_req *r);

/*
 * Serves a stream that is not live (ended, or from before a restart) from
 * its file. Returns -ENOENT if dir has no stream id.
 */
int outbuf_serve_file(const char *dir, const char *id, struct http_req *r)
	__attribute__((warn_unused_result));

#endif
