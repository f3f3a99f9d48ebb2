/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_HTTP_CLIENT_H
#define HUSK_TEST_HTTP_CLIENT_H

/*
 * A small blocking HTTP/1.1 client for the socket tests: raw requests go out
 * as given (so tests can send anything), responses are read with a timeout
 * and parsed (Content-Length, chunked, or to EOF).
 */
#include <stdbool.h>
#include <stddef.h>

struct hconn {
	int fd;
	char *buf; /* received, not yet consumed */
	size_t len, cap;
	bool eof;
};

struct hresp {
	int status;
	char head[16384]; /* status line and headers */
	char *body;       /* malloc'd, NUL-terminated */
	size_t body_len;
};

/* Connects to 127.0.0.1:port or to a Unix socket; returns 0 or -errno. */
int hc_tcp(struct hconn *c, int port);
int hc_unix(struct hconn *c, const char *path);
void hc_close(struct hconn *c);
/* Sends len bytes (or the string s). 0 or -errno. */
int hc_send(struct hconn *c, const void *data, size_t len);
int hc_sends(struct hconn *c, const char *s);
/*
 * Reads one response (a 1xx too) within timeout_ms. 0, or -ETIMEDOUT, or
 * -ECONNRESET for an EOF or reset before a whole response. Free with hr_free.
 */
int hc_read(struct hconn *c, struct hresp *r, int timeout_ms);
/* Reads more input within timeout_ms: >0 bytes added, 0 at EOF, -ETIMEDOUT. */
int hc_fill(struct hconn *c, int timeout_ms);
/* Waits for EOF (discarding input): 0, or -ETIMEDOUT. */
int hc_wait_eof(struct hconn *c, int timeout_ms);
/* The value of header name in r (case-insensitive) copied into out, or NULL. */
const char *hr_header(const struct hresp *r, const char *name, char *out, size_t outlen);
void hr_free(struct hresp *r);
/* Milliseconds on a monotonic clock. */
long long now_ms(void);

#endif
