/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENTOP_H
#define HUSK_AGENTOP_H

/*
 * One HTTP request served by agent requests: made on a task thread once the
 * sandbox is ready, answered on the loop by op->answer. Used by the files,
 * env and jobs handlers.
 */
#include <jansson.h>

#include "huskd.h"

/*
 * OP_EXEC runs req (an exec request) with stdin from in_fd (when >= 0):
 * stdout lands in fd (len bytes), stderr in err_fd, the RESULT in out.
 */
enum op_kind { OP_CALL, OP_READ, OP_WRITE_FILES, OP_ENV, OP_EXEC };

struct op {
	struct huskd *d;
	struct http_req *r;
	char sandbox[STORE_ID_LEN];
	char vsock[4096];
	enum op_kind kind;
	json_t *req, *out, *files;
	json_t *ctx; /* the handler's own data for its answer */
	void *arg;   /* and its own C data (not freed with the op) */
	/* Called with arg when the op ends without answer running (r got an error). */
	void (*dropped)(void *arg);
	void (*answer)(struct op *op);
	int rc;
	char err[512];
	int fd; /* OP_READ, OP_EXEC: the bytes read (stdout) */
	size_t len;
	int in_fd, err_fd; /* OP_EXEC: stdin (or -1), stderr */
};

struct op *op_new(enum op_kind kind, void (*answer)(struct op *op));
/* Runs op against sandbox id once it is ready; answers 404/409 itself if it cannot. */
void op_submit(struct huskd *d, struct http_req *r, const char *id, struct op *op);
/* OP_EXEC: the first line of the command's stderr, for an error message. */
void op_stderr(struct op *op, char *out, size_t outlen);
/* An agent ERROR (or a lost connection) as an HTTP error. */
void answer_agent_error(struct op *op);

#endif
