/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HANDLERS_H
#define HUSK_HANDLERS_H

/* huskd's route handlers; ctx is the struct huskd. */
#include "huskd.h"

#define HANDLER(name) void name(struct http_req *r, const char *const *p, void *ctx)

HANDLER(h_create);
HANDLER(h_list);
HANDLER(h_get);
HANDLER(h_status);
HANDLER(h_destroy);
HANDLER(h_execute);
HANDLER(h_execution);
HANDLER(h_executions);
HANDLER(h_events);
HANDLER(h_runtimes);
HANDLER(h_stream);
HANDLER(h_not_yet);
HANDLER(h_fs_write);
HANDLER(h_fs_read);
HANDLER(h_fs_list);
HANDLER(h_fs_mkdir);
HANDLER(h_fs_rm);
HANDLER(h_fs_rmdir);
HANDLER(h_env);
HANDLER(h_fs_download);
HANDLER(h_fs_upload);
HANDLER(h_job_create);
HANDLER(h_job_list);
HANDLER(h_job_get);
HANDLER(h_job_stop);
HANDLER(h_stats);
HANDLER(h_ckpt_create);
HANDLER(h_ckpt_list);
HANDLER(h_ckpt_restore);
HANDLER(h_ckpt_delete);
HANDLER(h_snap_create);
HANDLER(h_snap_list);
HANDLER(h_snap_get);
HANDLER(h_snap_tag);
HANDLER(h_snap_delete);
HANDLER(h_snap_lineage);
HANDLER(h_snap_public_list);
HANDLER(h_snap_public_get);
HANDLER(h_snap_build_init);
HANDLER(h_snap_build_upload);
HANDLER(h_snap_build_finalize);
HANDLER(h_pause);
HANDLER(h_resume);
HANDLER(h_service_stats);

/* The request body as a JSON object, or NULL after answering 400. */
json_t *body_object(struct http_req *r);
/* A query parameter as an int (atoi), def when absent. */
int query_int(struct http_req *r, const char *key, int def);
/* limit (def when absent or <= 0, at most max) and offset (>= 0) from the query. */
void query_page(struct http_req *r, int def, int max, int *limit, int *offset);

#endif
