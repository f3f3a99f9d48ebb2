/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_HTTP_SMOKE_H
#define HUSK_TEST_HTTP_SMOKE_H

/*
 * What the HTTP socket tests share: http_smoke.c (main: starts http-echo with
 * these limits, runs every test) and http_smoke_streams.c (the streaming and
 * connection-count tests). A test fails its first CHECK (the reason goes to
 * failure, then to its out: label) and ends with report(its name).
 */
#include <stdio.h>

#include "http_client.h"

#define MAX_BODY (1 << 20)
#define REQ_TIMEOUT 800
#define IDLE_TIMEOUT 1500
#define MAX_CONNS 300
/*
 * How long a test waits for what must come (an answer, a close): a bound
 * for a server that hangs, never a measure of speed. A loaded machine took
 * over 5 s to serve the 300th connection.
 */
#define WAIT_MS 60000

extern int port;          /* http-echo's TCP port */
extern char failure[512]; /* why the current test failed; empty while it passes */

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			snprintf(failure, sizeof(failure), "line %d: %s", __LINE__, #cond); \
			goto out;                                                           \
		}                                                                           \
	} while (0)

/* Prints "PASS http/name" or "FAIL http/name: failure", counts it, clears failure. */
void report(const char *name);
/* GET path on c, expecting 200 and needle in the body. */
int get_ok(struct hconn *c, const char *path, const char *needle);

/* http_smoke_streams.c */
void t_stream_incremental(void);
void t_stream_client_gone(void);
void t_stalled_reader(void);
void t_many_connections(void);
void t_max_connections(void);
void t_http10_and_big(void);

/* http_smoke_cli.c */
void t_cli_keeps_connection(void);

#endif
