// SPDX-License-Identifier: MIT
/*
 * GET /fs/download and POST /fs/upload (API.md §5.3 (18), (19)): a folder
 * as a tar.gz and back. The guest's own tar and gzip do the work, run
 * through the agent, so huskd needs no archive code of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agentop.h"
#include "handlers.h"
#include "json_resp.h"
#include "util.h"

/* Archives pass through memory: bigger ones belong to a snapshot, not an HTTP body. */
#define ARCHIVE_MAX (512u << 20)

/* 0 when the archive command ran and exited 0; otherwise answers the error. */
static int exec_failed(struct op *op)
{
	char why[256];

	if (op->rc) {
		answer_agent_error(op);
		return 1;
	}
	if (json_integer_value(json_object_get(op->out, "exit_code")) == 0)
		return 0;
	op_stderr(op, why, sizeof(why));
	api_error(op->r, strstr(why, "No such file") || strstr(why, "Cannot") ? 404 : 400,
	          "ARCHIVE_FAILED", "%s", why[0] ? why : "tar failed in the sandbox");
	return 1;
}

static void answer_download(struct op *op)
{
	void *data;

	if (exec_failed(op))
		return;
	if (op->len > ARCHIVE_MAX) {
		api_error(op->r, 413, "ARCHIVE_TOO_LARGE", "the archive has %zu bytes, over %u MiB",
		          op->len, ARCHIVE_MAX >> 20);
		return;
	}
	data = op->len ? mmap(NULL, op->len, PROT_READ, MAP_PRIVATE, op->fd, 0) : NULL;
	if (data == MAP_FAILED) {
		api_error(op->r, 500, "INTERNAL", "cannot map the archive: %s", strerror(errno));
		return;
	}
	http_respond(op->r, 200, "application/gzip", data, op->len);
	if (data)
		munmap(data, op->len);
}

/* tar.gz is the one format; zip would need a zip tool in every runtime. */
static int format_ok(struct http_req *r)
{
	char fmt[16] = "";

	if (http_query_get(r, "format", fmt, sizeof(fmt)) > 0 && strcmp(fmt, "tar.gz")) {
		api_error(r, 400, "BAD_REQUEST", "format '%s' is not supported; use tar.gz", fmt);
		return 0;
	}
	return 1;
}

HANDLER(h_fs_download)
{
	char path[4096] = ".", full[4096];
	struct op *op;

	if (!format_ok(r))
		return;
	http_query_get(r, "path", path, sizeof(path));
	workspace_path(WORKSPACE, path, full, sizeof(full));
	op = op_new(OP_EXEC, answer_download);
	if (!op) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	op->req = json_pack("{sss[ssssss]ss}", "op", "exec", "argv", "tar", "-czf", "-", "-C", full,
	                    ".", "cwd", "/");
	op_submit(ctx, r, p[0], op);
}

static void answer_upload(struct op *op)
{
	if (!exec_failed(op))
		api_ok(op->r, 200, NULL);
}

HANDLER(h_fs_upload)
{
	static const unsigned char gz[] = {0x1f, 0x8b}, zip[] = {'P', 'K', 3, 4};
	char path[4096] = ".", full[4096];
	size_t len = 0;
	const unsigned char *body = http_body(r, &len);
	struct op *op;
	int fd;

	if (!format_ok(r))
		return;
	if (len >= 4 && !memcmp(body, zip, 4)) {
		api_error(r, 400, "BAD_REQUEST", "zip archives are not supported; send a tar.gz");
		return;
	}
	if (len < 2 || memcmp(body, gz, 2)) {
		api_error(r, 400, "BAD_REQUEST", "the body is not a gzip-compressed tar archive");
		return;
	}
	http_query_get(r, "path", path, sizeof(path));
	workspace_path(WORKSPACE, path, full, sizeof(full));
	fd = memfd_create("husk-upload", MFD_CLOEXEC);
	op = fd >= 0 && write(fd, body, len) == (ssize_t)len && lseek(fd, 0, SEEK_SET) == 0
	             ? op_new(OP_EXEC, answer_upload)
	             : NULL;
	if (!op) {
		if (fd >= 0)
			close(fd);
		api_error(r, 503, "UNAVAILABLE", "cannot hold the upload");
		return;
	}
	op->in_fd = fd;
	op->req = json_pack("{sss[sssss]sssb}", "op", "exec", "argv", "sh", "-c",
	                    "mkdir -p \"$1\" && tar -xzf - -C \"$1\"", "sh", full, "cwd", "/",
	                    "stdin", 1);
	op_submit(ctx, r, p[0], op);
}
