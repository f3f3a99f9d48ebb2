/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_HTTP_FAKE_H
#define HUSK_TEST_HTTP_FAKE_H

/*
 * A fake transport for the socket-free HTTP core (api/http/http_conn.h): what the
 * connection writes is collected in out, sends complete when fake_run says
 * so, and the timer fires when the test (or fuzzer) fires it. Used by the
 * unit tests and by tests/fuzz/fuzz_http.c.
 */
#include <stdbool.h>
#include <stddef.h>

#include "http_conn.h"

struct fake_conn {
	struct http_conn c;                /* first: the ops get &c */
	char *out;                         /* everything written, NUL-terminated */
	size_t out_len, out_cap, out_keep; /* out_keep: 0 keeps all, else only a count */
	size_t unsent;                     /* written, not yet reported sent */
	int timer_ms;                      /* armed timer, -1 if none */
	bool hold;                         /* the "client" does not read: sends stay pending */
	bool fail_writes;                  /* writes fail at once (a dead socket) */
	bool paused, shut, closed;
};

/* Starts f's connection with lim (defaults if NULL), handler(req, ctx). */
void fake_init(struct fake_conn *f, const struct http_limits *lim, http_handler handler, void *ctx);
/*
 * Completes pending sends (unless hold) and runs 0 ms timers until nothing
 * changes. Returns 0, or -1 if it never settles (a livelock).
 */
int fake_run(struct fake_conn *f);
/* Feeds len bytes of data, then fake_run. */
int fake_feed(struct fake_conn *f, const void *data, size_t len);
/* Feeds the string s, then fake_run. */
int fake_feeds(struct fake_conn *f, const char *s);
/* Fires the armed timer (whatever its length), then fake_run. */
int fake_fire(struct fake_conn *f);
/* Drops the collected output. */
void fake_clear(struct fake_conn *f);
/* Aborts f's connection if still open and frees everything. */
void fake_free(struct fake_conn *f);

#endif
