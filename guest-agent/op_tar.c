// SPDX-License-Identifier: MIT
/*
 * Directory transfer as a tar stream: tar.download streams `tar -c` of a
 * directory as DATA frames; tar.upload feeds DATA frames to `tar -x` in a
 * directory. The system's tar does the format (busybox or GNU); the exec
 * machinery moves the bytes, and what tar says on stderr becomes the error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "exec_opts.h"
#include "fsutil.h"

void op_tar(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	static const struct exec_mode mode = {.name = "tar", .data = true};
	struct agent *a = conn_agent(c);
	const char *path = json_string_value(json_object_get(req, "path"));
	bool upload = !strcmp(op, "tar.upload");
	char *up[] = {"tar", "-C", (char *)path, "-xf", "-", NULL};
	char *down[] = {"tar", "-C", (char *)path, "-cf", "-", ".", NULL};
	struct exec_opts o = {.spawn = {.argv = upload ? up : down, .stdin_pipe = upload}};
	const char *why;
	struct stat st;
	int ret;

	if (!upload && strcmp(op, "tar.download")) {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
		return;
	}
	if (!path || !*path) {
		conn_send_error(c, id, "bad_request", "path must be a non-empty string");
		return;
	}
	if (upload)
		ret = fs_mkdirs(path, 0755);
	else
		ret = stat(path, &st) < 0 ? -errno : !S_ISDIR(st.st_mode) ? -ENOTDIR : 0;
	if (ret) {
		conn_send_error(c, id, errno_code(-ret), "'%s': %s", path, strerror(-ret));
		return;
	}
	o.env = proc_build_env(a->env, NULL, &why);
	if (!o.env) {
		conn_send_error(c, id, "io_error", "%s", why);
		return;
	}
	o.spawn.envp = o.env;
	exec_start(c, id, &o, &mode);
	proc_free_env(o.env);
}
