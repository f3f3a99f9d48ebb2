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
HANDLER(h_pause);
HANDLER(h_resume);
HANDLER(h_service_stats);

/* The request body as a JSON object, or NULL after answering 400. */
json_t *body_object(struct http_req *r);

#endif
