/* SPDX-License-Identifier: MIT */
#ifndef HUSK_E2B_INT_H
#define HUSK_E2B_INT_H

/*
 * E2B's API beside the reference's (API.md §11): the REST paths its SDK
 * calls under /e2b (e2b_rest.c) and the in-sandbox service ("envd") under
 * /e2b/envd, which huskd serves itself over each sandbox's agent session:
 * the Connect protocol in its JSON encoding (e2b_connect.c) for
 * process.Process (e2b_proc.c) and filesystem.Filesystem (e2b_fs.c), and
 * the /files routes (e2b_files.c). These files sit in the routes layer: they
 * see requests and call only the manager's public functions (sbx.h).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "r_int.h"

/* The envd version huskd answers as: what the SDK checks features against. */
#define E2B_ENVD_VERSION "0.5.7"
/* Hex characters of a sandbox's envd access token (128 bits). */
#define E2B_TOKEN_HEX ROUTES_TOKEN_HEX

/* ---- e2b_reply.c: answers ---- */
/* E2B's error body {code, message} with status code. */
void e2b_error(struct http_req *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The manager's error as E2B's (404, 409, 400 ...). */
void e2b_reply_error(struct http_req *r, const struct sbx_err *err);
/* A sandbox's envd access token: HMAC of its id under the stream key. */
void e2b_token(const struct routes *rt, const char *sandbox_id, char out[E2B_TOKEN_HEX + 1]);

/* The E2B status of a manager error (404, 409, 400 ...). */
int e2b_status_of(const struct sbx_err *err);
/* "running" or "paused" (E2B's states) of a SandboxInfo; NULL once it has ended. */
const char *e2b_state(json_t *info);
/* A SandboxInfo as E2B's Sandbox (token: with its envdAccessToken) or ListedSandbox. */
json_t *e2b_sandbox(const struct routes *rt, json_t *info, bool token);

/* ---- e2b_args.c: requests ---- */
/* The body as a JSON object (empty: {}), or NULL after a 400. */
json_t *e2b_body(struct http_req *r);
/* body.timeout: seconds (1..a day) into *secs; absent: def. -1 after a 400. */
int e2b_timeout_of(struct http_req *r, json_t *body, long long def, long long *secs);
/* E2B's {allowOut, denyOut, allow_internet_access} as husk's {allow, deny}; NULL: no memory. */
json_t *e2b_net_lists(json_t *body);
/*
 * The caller's live sandbox id: its state ("running", "paused"; info, if
 * asked for, its record), or NULL after a 404 (another org's is not there
 * for it, an ended one is gone, as on E2B).
 */
const char *e2b_live(struct routes *rt, struct http_req *r, const char *id, json_t **info);

/* A list's page: limit and nextToken (an offset) from the query. */
struct e2b_page {
	long long limit, from, seen;
};
/* 0, or -1 after a 400. */
int e2b_page_of(struct http_req *r, struct e2b_page *pg);
/* For each item that matches, with have items taken: 1 take, 0 skip, -1 full (x-next-token set). */
int e2b_page_next(struct http_req *r, struct e2b_page *pg, size_t have);

/* ---- e2b_connect.c: the Connect protocol (JSON), and who an envd request is for ---- */
/* Connect's error codes ("not_found" ...), each with its HTTP status. */
enum cx_code {
	CX_INVALID_ARGUMENT,
	CX_NOT_FOUND,
	CX_ALREADY_EXISTS,
	CX_PERMISSION_DENIED,
	CX_RESOURCE_EXHAUSTED,
	CX_FAILED_PRECONDITION,
	CX_UNIMPLEMENTED,
	CX_INTERNAL,
	CX_UNAVAILABLE,
	CX_UNAUTHENTICATED,
	CX_CANCELED,
};
/*
 * The sandbox an envd request is for (E2b-Sandbox-Id) into id, its access
 * token (X-Access-Token) checked: 0, or -1 after answering (as a Connect
 * error when rpc, else E2B's envd error body).
 */
int cx_sandbox(struct routes *rt, struct http_req *r, bool rpc, char id[STORE_ID_LEN]);
/*
 * A unary call's request message, or a server-streaming call's one
 * enveloped message (streaming): a JSON object, or NULL after answering.
 */
json_t *cx_request(struct http_req *r, bool streaming);
/* A unary call's answer (steals msg). */
void cx_reply(struct http_req *r, json_t *msg);
/* A unary call's error. */
void cx_error(struct http_req *r, enum cx_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The manager's error as Connect's code. */
enum cx_code cx_code_of(const struct sbx_err *err);
/* A server stream: its 200 head, one message (steals msg; 0 or -EPIPE), its end (err NULL: OK). */
void cx_stream_begin(struct http_req *r);
int cx_stream_send(struct http_req *r, json_t *msg);
void cx_stream_end(struct http_req *r, enum cx_code code, const char *err);

/* ---- the services: handlers of POST /e2b/envd/<service>/<method> ---- */
struct e2b_proc;
/* A sandbox's last CPU sample (e2b_metrics.c): the next one's share is against it. */
struct e2b_cpu {
	struct e2b_cpu *next;
	char id[STORE_ID_LEN];
	int64_t busy_ms, total_ms, at_ms;
};
/* E2B's state in huskd: the processes run for envd (e2b_proc.c), CPU samples. */
struct e2b {
	struct routes *rt;
	struct e2b_proc *procs;
	uint32_t next_pid;
	struct e2b_cpu *cpu;
};
/* The processes huskd runs for envd (e2b_proc.c), all sandboxes'. */
int e2b_open(struct routes *rt, struct e2b **out) __attribute__((warn_unused_result));
void e2b_close(struct e2b *e);
void e2b_process_call(struct routes *rt, struct http_req *r, const char *id, const char *method);
void e2b_fs_call(struct routes *rt, struct http_req *r, const char *id, const char *method);

/* Standard base64 (padded; "" is no bytes) decoded, *len set; NULL: not base64. Caller frees. */
unsigned char *e2b_unb64(const char *in, size_t *len);
/* Base64 of len bytes (standard, padded), NUL-terminated; NULL: out of memory. */
char *e2b_b64(const void *p, size_t len);

#endif
