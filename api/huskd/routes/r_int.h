/* SPDX-License-Identifier: MIT */
#ifndef HUSK_R_INT_H
#define HUSK_R_INT_H

/* Inside the routes (api/huskd/routes/ only). */
#include <jansson.h>

#include "http.h"
#include "huskd_log.h"
#include "json_resp.h"
#include "routes.h"
#include "sbx.h"

struct waiter;
struct e2b;

struct routes {
	struct sbx_mgr *m;
	struct routes_config cfg;
	struct waiter *waiters; /* held long-polls */
	struct e2b *e2b;        /* E2B's envd processes (e2b/e2b_proc.c) */
};

#define ROUTE(name) void name(struct http_req *r, const char *const *p, void *ctx)

/* What a route's errors are about: it names the 404 code (FILE_NOT_FOUND ...). */
enum subject {
	S_SANDBOX,
	S_FILE,
	S_ARCHIVE,
	S_CHECKPOINT,
	S_SNAPSHOT,
	S_JOB,
	S_EXECUTION,
	S_BUILD,
	S_RUNTIME,
	S_STREAM
};

/* Calls (r_call.c): a request from its admission to its end (the audit record). */
int call_begin(struct routes *rt, struct http_req *r, struct who *who, bool counted);
/* What the call was about when its path does not say (a create: the new sandbox). */
void call_about(struct http_req *r, const char *sandbox_id);
/* The route r's path matched (its pattern, static; NULL: none) and the sandbox the path names. */
void call_route(struct http_req *r, const char *pattern, const char *sandbox_id);
/* The caller whose key the request carries; NULL only on routes that need no key. */
const struct who *caller(const struct http_req *r);
/* The valid key r carries (on an open route too), or NULL. */
const struct who *routes_key(struct routes *rt, struct http_req *r);
/* The caller's org id, or NULL (no key). */
const char *caller_org(const struct http_req *r);
/* Sets "org": {id, name} in a create or build body to the caller's; -1 after answering. */
int body_set_org(struct http_req *r, json_t *body);

/* Answers the manager's error with its HTTP status and code; 5xx are logged with the cause. */
void reply_error(struct http_req *r, const struct sbx_err *err, enum subject what);
/* Answers 200 with the reply's data (or {"success":true}), or the error. */
void reply_done(struct http_req *r, const struct sbx_err *err, const struct sbx_reply *reply,
                enum subject what);
/* sbx_done_fn adapters: ctx is the request. */
void done_sandbox(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply);
void done_file(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply);

/* A list's query (GET /sandbox, GET /cli/sandbox) into q; -1 after answering 400. */
struct list_query_bufs {
	char name[256], status[32], live[8], sort[32], dir[8], del[8], mode[16];
	char project[256], snapshot[256];
};
int list_query(struct http_req *r, struct list_query_bufs *b, struct sbx_list_query *q);

/* The request body as a JSON object, or NULL after answering 400. */
json_t *body_object(struct http_req *r);
/* A query parameter as an int (atoi), def when absent. */
int query_int(struct http_req *r, const char *key, int def);
/* limit (def when absent or <= 0, at most max) and offset (>= 0) from the query. */
void query_page(struct http_req *r, int def, int max, int *limit, int *offset);
/* The public base URL for stream links ("http://host:port"), from config or the request. */
int base_url(struct routes *rt, struct http_req *r, char *out, size_t outlen);

/* Exposed ports (r_proxy.c): serves r if it is for one (true), before any key check. */
bool proxy_route(struct routes *rt, struct http_req *r);
/* Adds "url" to a SandboxInfo with a networkPort, as r's client reaches it. */
int proxy_url(struct routes *rt, struct http_req *r, json_t *info);

/* Long-polls (r_wait.c). */
void wait_status(struct routes *rt, struct http_req *r, const char *sandbox_id, const char *set,
                 uint64_t ms);
void wait_execution(struct routes *rt, struct http_req *r, const char *exec_id, uint64_t ms);
void wait_kick(void *rt, const char *id);
void wait_drop_all(struct routes *rt);
/* Hex characters of a token of routes_token (128 bits). */
#define ROUTES_TOKEN_HEX 32
/*
 * A capability of sandbox id for what ("url", "e2b-envd"): an HMAC under the
 * stream key, so it needs no storage and is the same after a restart (r_sign.c).
 */
void routes_token(const struct routes *rt, const char *what, const char *id,
                  char out[ROUTES_TOKEN_HEX + 1]);
/* Signed stream URLs (r_sign.c): data's, data.executions[]'s and data.jobs[]'s. */
void stream_sign(const struct routes *rt, json_t *data);
/* obj's URL field key (…/streams/ID) signed. */
void stream_sign_field(const struct routes *rt, json_t *obj, const char *key);
/* 0 if r's exp and sig sign stream sid and have not expired; else -1 after a 403. */
int stream_check(const struct routes *rt, struct http_req *r, const char *sid);
/*
 * Answers r with fd's content from its start, paced by the client (fd
 * borrowed: a copy is kept until the end); 503 if none can be made.
 */
void stream_file(struct http_req *r, int fd, const char *content_type);
/* The same for a file still being written (live, held with outbuf_ref): followed to its end. */
void stream_live(struct http_req *r, int fd, struct outbuf *live, const char *content_type);
/* Output streams (r_stream.c). */
void stream_serve(struct routes *rt, struct http_req *r, const char *stream_id);

ROUTE(r_create);
ROUTE(r_key_create);
ROUTE(r_key_list);
ROUTE(r_key_revoke);
ROUTE(r_whoami);
ROUTE(r_org_key_delete);
ROUTE(r_audit_list);
ROUTE(r_audit_verify);
ROUTE(r_net_set);
ROUTE(r_list);
ROUTE(r_get);
ROUTE(r_status);
ROUTE(r_destroy);
ROUTE(r_pause);
ROUTE(r_resume);
ROUTE(r_events);
ROUTE(r_runtimes);
ROUTE(r_import_init);
ROUTE(r_import_upload);
ROUTE(r_import_run);
ROUTE(r_import_get);
ROUTE(r_runtime_delete);
ROUTE(r_execute);
ROUTE(r_execution);
ROUTE(r_execution_cancel);
ROUTE(r_executions);
ROUTE(r_stream);
ROUTE(r_stream_create);
ROUTE(r_cli_list);
ROUTE(r_shell);
ROUTE(r_cli_resolve);
ROUTE(r_stream_put);
ROUTE(r_fs_write);
ROUTE(r_fs_read);
ROUTE(r_fs_list);
ROUTE(r_fs_mkdir);
ROUTE(r_fs_rm);
ROUTE(r_fs_rmdir);
ROUTE(r_fs_download);
ROUTE(r_fs_upload);
ROUTE(r_env);
ROUTE(r_job_create);
ROUTE(r_job_list);
ROUTE(r_job_get);
ROUTE(r_job_stop);
ROUTE(r_stats);
ROUTE(r_service_stats);
ROUTE(r_ckpt_create);
ROUTE(r_ckpt_list);
ROUTE(r_ckpt_restore);
ROUTE(r_ckpt_delete);
ROUTE(r_snap_create);
ROUTE(r_snap_list);
ROUTE(r_snap_get);
ROUTE(r_snap_tag);
ROUTE(r_snap_delete);
ROUTE(r_snap_lineage);
ROUTE(r_snap_public_list);
ROUTE(r_snap_public_get);
ROUTE(r_build_init);
ROUTE(r_build_upload);
ROUTE(r_build_finalize);

#endif
