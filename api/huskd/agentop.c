// SPDX-License-Identifier: MIT
/* Agent requests on task threads for HTTP handlers (agentop.h). */
#include "agentop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent_client.h"
#include "json_resp.h"
#include "sbx_priv.h"

static void op_work(void *arg)
{
	struct op *op = arg;
	struct agent_client *c = NULL;
	int rc = agent_client_connect_vsock(op->vsock, AGENT_VSOCK_PORT, &c);

	if (rc) {
		snprintf(op->err, sizeof(op->err), "cannot reach the sandbox's agent: %s",
		         strerror(-rc));
		op->rc = rc;
		return;
	}
	switch (op->kind) {
	case OP_CALL:
	case OP_ENV:
		rc = agent_call(c, op->req, &op->out);
		break;
	case OP_READ:
		op->fd = memfd_create("husk-read", MFD_CLOEXEC);
		rc = op->fd < 0 ? -errno
		                : agent_get(c, json_string_value(json_object_get(op->req, "path")),
		                            op->fd, &op->out);
		if (!rc)
			op->len = (size_t)lseek(op->fd, 0, SEEK_END);
		break;
	case OP_WRITE_FILES:
		rc = sbx_write_files(c, op->files, op->err, sizeof(op->err));
		break;
	case OP_EXEC:
		op->fd = memfd_create("husk-out", MFD_CLOEXEC);
		op->err_fd = memfd_create("husk-err", MFD_CLOEXEC);
		rc = op->fd < 0 || op->err_fd < 0
		             ? -errno
		             : agent_exec(c, op->req, op->in_fd, op->fd, op->err_fd, &op->out);
		if (!rc)
			op->len = (size_t)lseek(op->fd, 0, SEEK_END);
		break;
	}
	agent_client_close(c);
	op->rc = rc;
}

static void op_free(struct op *op)
{
	json_decref(op->req);
	json_decref(op->out);
	json_decref(op->files);
	json_decref(op->ctx);
	if (op->fd >= 0)
		close(op->fd);
	if (op->in_fd >= 0)
		close(op->in_fd);
	if (op->err_fd >= 0)
		close(op->err_fd);
	free(op);
}

void op_stderr(struct op *op, char *out, size_t outlen)
{
	ssize_t n = op->err_fd >= 0 ? pread(op->err_fd, out, outlen - 1, 0) : -1;

	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* An agent ERROR as an HTTP error. */
void answer_agent_error(struct op *op)
{
	const char *code = json_string_value(json_object_get(op->out, "code"));
	const char *msg = json_string_value(json_object_get(op->out, "message"));
	int status = 500;

	if (op->rc < 0) {
		api_error(op->r, 502, "SANDBOX_UNREACHABLE", "%s",
		          op->err[0] ? op->err : strerror(-op->rc));
		return;
	}
	if (code && !strcmp(code, "not_found"))
		status = 404;
	else if (code && (!strcmp(code, "is_a_directory") || !strcmp(code, "not_a_directory") ||
	                  !strcmp(code, "bad_request")))
		status = 400;
	else if (code && (!strcmp(code, "exists") || !strcmp(code, "busy")))
		status = 409;
	else if (code && !strcmp(code, "permission_denied"))
		status = 403;
	else if (code && !strcmp(code, "no_space"))
		status = 507;
	api_error(op->r, status, status == 404 ? "NOT_FOUND" : "FILE_ERROR", "%s",
	          msg          ? msg
	          : op->err[0] ? op->err
	                       : "the sandbox refused the request");
}

static void op_done(void *arg)
{
	struct op *op = arg;

	op->answer(op);
	op_free(op);
}

/* The op ends unanswered by its handler (the request got an error already). */
static void op_drop(struct op *op)
{
	if (op->dropped)
		op->dropped(op->arg);
	op_free(op);
}

static void op_ready(struct sandbox *sb, bool ready, void *arg)
{
	struct op *op = arg;

	if (!ready) {
		api_error(op->r, 409, "SANDBOX_TERMINATED", "sandbox %s is not running", sb->id);
		op_drop(op);
		return;
	}
	if (task_run(op->d->tasks, op_work, op_done, op)) {
		api_error(op->r, 503, "UNAVAILABLE", "cannot start a thread");
		op_drop(op);
	}
}

void op_submit(struct huskd *d, struct http_req *r, const char *id, struct op *op)
{
	struct sandbox *sb = sbx_find(d, id);
	json_t *info = NULL;

	op->d = d;
	op->r = r;
	if (!sb) {
		if (store_sandbox_get(d->store, id, &info, NULL))
			api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", id);
		else
			api_error(r, 409, "SANDBOX_TERMINATED", "sandbox %s is %s", id,
			          json_string_value(json_object_get(info, "status")));
		json_decref(info);
		op_drop(op);
		return;
	}
	/* Using a sandbox counts as activity: its idle countdown starts again. */
	if (!strcmp(sb->status, "idle"))
		sbx_idle_arm(sb);
	snprintf(op->sandbox, sizeof(op->sandbox), "%s", id);
	snprintf(op->vsock, sizeof(op->vsock), "%s", sb->vsock);
	sbx_when_ready(sb, op_ready, op);
}

struct op *op_new(enum op_kind kind, void (*answer)(struct op *op))
{
	struct op *op = calloc(1, sizeof(*op));

	if (op) {
		op->kind = kind;
		op->answer = answer;
		op->fd = op->in_fd = op->err_fd = -1;
	}
	return op;
}
