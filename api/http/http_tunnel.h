/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HTTP_TUNNEL_H
#define HUSK_HTTP_TUNNEL_H

/*
 * A byte tunnel between a client connection taken over from the HTTP
 * server (http_takeover) and a Unix socket upstream: a reverse proxy for
 * HTTP, WebSocket or anything else once the first request is through. Each
 * direction is paced by the other's write queue; an end's EOF half-closes
 * the other; the tunnel closes when both directions have ended or either
 * fails. On the loop thread, like the server.
 */
#include <stddef.h>
#include <uv.h>

/* A connection's libuv handle, whichever kind its listener made (TCP or Unix). */
union http_uv_stream {
	uv_handle_t handle;
	uv_stream_t stream;
	uv_tcp_t tcp;
	uv_pipe_t pipe;
};

struct http_tunnel_ops {
	/* Bytes moved (either way), at most once a second: the upstream is in use. May be NULL. */
	void (*activity)(void *arg);
	/* The tunnel is gone; arg may be freed. May be NULL. */
	void (*closed)(void *arg);
};

/*
 * Connects to the Unix socket upstream and starts the tunnel for the
 * client socket fd (ownership passes, on failure too). to_up (to_up_len
 * bytes, copied) is sent upstream first: the request as rewritten, and what
 * the client had sent after it. If the upstream cannot be reached, or ends
 * before it answered a single byte, the client gets no_answer (a complete
 * HTTP response, copied; NULL: nothing) and is closed.
 * Returns 0, or -errno (fd closed, no callbacks).
 */
int http_tunnel_start(uv_loop_t *loop, int fd, const char *upstream, const void *to_up,
                      size_t to_up_len, const char *no_answer, const struct http_tunnel_ops *ops,
                      void *arg) __attribute__((warn_unused_result));

#endif
