/* SPDX-License-Identifier: MIT */
#ifndef HUSK_OUTBUF_H
#define HUSK_OUTBUF_H

/*
 * One captured output stream (an execution's stdout, say), kept in a file
 * so it costs no memory, survives a huskd restart and outlives its
 * sandbox. The writer appends and closes; readers read the file and watch
 * for more.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outbuf;

/* Creates stream id's file in dir. limit: bytes kept; the rest is counted, then dropped. */
int outbuf_create(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
	__attribute__((warn_unused_result));
/* Opens stream id's file in dir to append to it (a huskd restart: the writer goes on). */
int outbuf_reopen(const char *dir, const char *id, uint64_t limit, struct outbuf **out)
	__attribute__((warn_unused_result));
/*
 * An unnamed stream (an unlinked file in dir) for one answer: *read_fd gets
 * a descriptor to read it by (the caller closes it).
 */
int outbuf_create_anon(const char *dir, uint64_t limit, struct outbuf **out, int *read_fd)
	__attribute__((warn_unused_result));
/* The writer failed: the stream ends, and its readers are told it is incomplete. */
void outbuf_fail(struct outbuf *ob);
bool outbuf_failed(const struct outbuf *ob);
/* Bytes in its file. */
uint64_t outbuf_len(const struct outbuf *ob);
/* Appends (up to the limit); watchers are told. */
void outbuf_append(struct outbuf *ob, const void *data, size_t len);
/* No more data: the file is marked complete; watchers are told. */
void outbuf_close(struct outbuf *ob);
bool outbuf_closed(const struct outbuf *ob);
/* Whether output past the limit was dropped. */
bool outbuf_truncated(const struct outbuf *ob);
const char *outbuf_id(const struct outbuf *ob);
const char *outbuf_path(const struct outbuf *ob);

/* A reference: the writer holds one from create; readers take their own. */
void outbuf_ref(struct outbuf *ob);
/* Drops a reference (the writer's closes the stream first); frees at the last. */
void outbuf_unref(struct outbuf *ob);
/*
 * fn(arg) runs after every append and at close, until unwatched. One
 * watcher per reader; returns 0 or -ENOMEM.
 */
int outbuf_watch(struct outbuf *ob, void (*fn)(void *arg), void *arg)
	__attribute__((warn_unused_result));
void outbuf_unwatch(struct outbuf *ob, void *arg);

/* The file of stream id in dir, or -ENOENT for a name that is not a stream id. */
int outbuf_file(const char *dir, const char *id, char *out, size_t outlen)
	__attribute__((warn_unused_result));

#endif
