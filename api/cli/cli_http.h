/* SPDX-License-Identifier: MIT */
#ifndef HUSK_CLI_HTTP_H
#define HUSK_CLI_HTTP_H

/*
 * The husk CLI's HTTP/1.1 client: one request per connection (Connection:
 * close), or requests one after another on a kept connection
 * (cli_http_do_on), over TCP or a Unix socket, blocking with timeouts. Responses are
 * parsed by http-parser: Content-Length, chunked, or up to EOF. A body can
 * go to a callback as it arrives (output streams, file downloads) or be
 * collected in memory (JSON answers). Several requests can be in flight at
 * once through cli_http_start/step (the two output streams of a command).
 */
#include <stdbool.h>
#include <stddef.h>

/* Where huskd is: http://host[:port][/prefix] or unix:/path/to/socket. */
struct cli_url {
	bool is_unix;
	char host[256]; /* TCP host; "localhost" over a Unix socket (for Host:) */
	char port[8];
	char sock[108];   /* sun_path */
	char prefix[512]; /* path of the base URL, no trailing '/' */
};

/* Parses text into u; 0, or -EINVAL with why (a sentence) in err. */
int cli_url_parse(const char *text, struct cli_url *u, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* Receives body bytes of a 2xx answer as they come; non-zero stops the request. */
typedef int (*cli_body_fn)(void *arg, const void *data, size_t len);

struct cli_req {
	const char *method;
	const char *target; /* path and query, escaped; the URL's prefix goes before it */
	const char *key;    /* Bearer key, or NULL for no Authorization header */
	const char *ctype;  /* Content-Type of the body, or NULL */
	const void *body;
	size_t len;
	cli_body_fn fn; /* NULL: the body is collected in cli_resp.body */
	void *arg;
	int timeout_ms; /* longest silence while waiting for the answer; 0: no limit */
	bool chunked;   /* the body is sent later, as it comes (cli_http_chunk); body unused */
};

struct cli_resp {
	int status;
	char ctype[128];
	char *body; /* NUL-terminated; also holds error bodies when fn was set */
	size_t len;
	bool unreachable; /* the connection could not be made (err says why) */
	char err[256];    /* why the request failed, when cli_http_* returned < 0 */
};

struct cli_conn;

/*
 * Connects and sends rq; *out is the request in flight. On failure returns
 * -errno with resp->err and resp->unreachable set. resp must outlive the
 * connection: the answer is stored there.
 */
int cli_http_start(const struct cli_url *u, const struct cli_req *rq, struct cli_resp *resp,
                   struct cli_conn **out) __attribute__((warn_unused_result));
/* A chunked request's next piece of body (len 0: its end); 0 or -errno. */
int cli_http_chunk(struct cli_conn *c, const void *p, size_t len)
	__attribute__((warn_unused_result));
/* The socket, for poll(POLLIN). */
int cli_http_fd(const struct cli_conn *c);
/* Reads what is there: 1 when the answer is complete, 0 for more, -errno (resp->err). */
int cli_http_step(struct cli_conn *c) __attribute__((warn_unused_result));
/* Closes and frees c (NULL is fine); the answer stays in its cli_resp. */
void cli_http_close(struct cli_conn *c);
/* start, then step until complete or rq->timeout_ms of silence: 0 or -errno. */
int cli_http_do(const struct cli_url *u, const struct cli_req *rq, struct cli_resp *resp)
	__attribute__((warn_unused_result));
/*
 * cli_http_do on a kept connection: *keep (NULL at first) is used if the
 * server kept it open (if it closed it meanwhile, a new one is made), and
 * holds the connection after, while the server keeps it; the caller ends
 * with cli_http_close(*keep).
 */
int cli_http_do_on(struct cli_conn **keep, const struct cli_url *u, const struct cli_req *rq,
                   struct cli_resp *resp) __attribute__((warn_unused_result));
void cli_resp_free(struct cli_resp *r);

#endif
