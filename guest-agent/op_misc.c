// SPDX-License-Identifier: MIT
/* env.set / env.get (the sandbox's default environment) and info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent.h"

void op_env(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	struct agent *a = conn_agent(c);
	json_t *vars = json_object_get(req, "vars"), *v;
	const char *k;

	if (!strcmp(op, "env.set")) {
		if (!json_is_object(vars)) {
			conn_send_error(c, id, "bad_request", "vars must be an object");
			return;
		}
		/* Check everything before changing anything. */
		json_object_foreach(vars, k, v)
		{
			if (!*k || strchr(k, '=') || (!json_is_string(v) && !json_is_null(v))) {
				conn_send_error(
					c, id, "bad_request",
					"'%.64s': names need no '=', values are strings or null",
					k);
				return;
			}
		}
		json_object_foreach(vars, k, v)
		{
			if (json_is_null(v))
				json_object_del(a->env, k);
			else
				json_object_set(a->env, k, v);
		}
	} else if (strcmp(op, "env.get")) {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
		return;
	}
	conn_send_json(c, FRAME_RESULT, id, json_pack("{s:O}", "env", a->env));
}

void op_info(struct conn *c, uint32_t id, json_t *req)
{
	struct utsname u;
	struct sysinfo si;
	struct statvfs vfs;
	json_t *r;

	(void)req;
	uname(&u);
	sysinfo(&si);
	r = json_pack("{s:s, s:i, s:f, s:s, s:i}", "version", AGENT_VERSION, "protocol",
	              PROTO_VERSION, "uptime_s", init_uptime(), "kernel", u.release, "cpus",
	              (int)sysconf(_SC_NPROCESSORS_ONLN));
	json_object_set_new(r, "memory",
	                    json_pack("{s:I, s:I}", "total_bytes",
	                              (json_int_t)si.totalram * si.mem_unit, "free_bytes",
	                              (json_int_t)(si.freeram + si.bufferram) * si.mem_unit));
	if (statvfs("/", &vfs) == 0)
		json_object_set_new(r, "disk",
		                    json_pack("{s:I, s:I}", "total_bytes",
		                              (json_int_t)(vfs.f_blocks * vfs.f_frsize),
		                              "free_bytes",
		                              (json_int_t)(vfs.f_bavail * vfs.f_frsize)));
	conn_send_json(c, FRAME_RESULT, id, r);
}
