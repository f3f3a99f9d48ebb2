/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_CLIENT_H
#define HUSK_AGENT_CLIENT_H

/*
 * Host side of the agent protocol (guest-agent/PROTOCOL.md): one blocking
 * connection to a guest agent, either straight to a Unix socket the agent
 * listens on, or through a VMM's vsock socket and its CONNECT handshake.
 * Functions return 0 with a RESULT, 1 with an ERROR from the agent (its JSON
 * {code, message} in *out), or -errno when the connection fails.
 */
#include <jansson.h>
#include <stdint.h>

#include "proto.h"

struct agent_client;

int agent_client_connect_unix(const char *path, struct agent_client **out)
	__attribute__((warn_unused_result));
/* Through husk-vmm --vsock PATH: "CONNECT port" then "OK n". */
int agent_client_connect_vsock(const char *uds_path, uint32_t port, struct agent_client **out)
	__attribute__((warn_unused_result));
void agent_client_close(struct agent_client *c);

/*
 * Asks a running agent_exec() to cancel its process (CANCEL frame): safe
 * from a signal handler. The exec still returns its RESULT.
 */
void agent_client_cancel(struct agent_client *c);

/* The next request id this connection has not used. */
uint32_t agent_client_next_id(struct agent_client *c);

/* Frame I/O. A received payload stays valid until the next receive. */
int agent_client_send(struct agent_client *c, uint8_t type, uint8_t flags, uint32_t id,
                      const void *payload, size_t len) __attribute__((warn_unused_result));
int agent_client_send_json(struct agent_client *c, uint8_t type, uint32_t id, json_t *j)
	__attribute__((warn_unused_result));
int agent_client_recv(struct agent_client *c, struct frame *f) __attribute__((warn_unused_result));
int agent_client_fd(const struct agent_client *c);

/* A request without streams: sends req (reference kept by the caller). */
int agent_call(struct agent_client *c, json_t *req, json_t **out)
	__attribute__((warn_unused_result));

/*
 * exec: req is the exec request ({"op":"exec", "argv": [...], ...}). Output
 * goes to out_fd and err_fd as it arrives; if in_fd >= 0 its bytes are the
 * process's stdin until EOF (req must then say "stdin": true).
 */
int agent_exec(struct agent_client *c, json_t *req, int in_fd, int out_fd, int err_fd, json_t **out)
	__attribute__((warn_unused_result));

/*
 * After a restore from a snapshot: sets the guest's wall clock to now and
 * reseeds its random generator with fresh host entropy ("resumed" op).
 * 0, a positive value if the agent refused (an older agent), or -errno.
 */
int agent_resumed(struct agent_client *c) __attribute__((warn_unused_result));

/* file.write from fd (to EOF), atomically replacing remote. mode < 0: default. */
int agent_put(struct agent_client *c, const char *remote, int fd, int mode, json_t **out)
	__attribute__((warn_unused_result));
/* file.read into fd. */
int agent_get(struct agent_client *c, const char *remote, int fd, json_t **out)
	__attribute__((warn_unused_result));
/* Sends a streaming request whose DATA comes from fd (tar.upload and the like). */
int agent_stream_in(struct agent_client *c, json_t *req, int fd, json_t **out)
	__attribute__((warn_unused_result));
/* Sends a request and writes every DATA frame it answers with to fd. */
int agent_stream_out(struct agent_client *c, json_t *req, int fd, json_t **out)
	__attribute__((warn_unused_result));

#endif
