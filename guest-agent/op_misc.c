// SPDX-License-Identifier: MIT
/* env.set / env.get (the sandbox's default environment), info, resumed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "netcfg.h"

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

/* The guest's CPU time since boot, all CPUs: busy and in all, in ms (/proc/stat's cpu line). */
static json_t *cpu_times(void)
{
	unsigned long long v[8] = {0};
	long tick = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "re");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
	                   &v[3], &v[4], &v[5], &v[6], &v[7])
	          : 0;
	unsigned long long busy, total;

	if (f)
		fclose(f);
	if (n < 4 || tick <= 0)
		return NULL;
	/* user nice system idle iowait irq softirq steal */
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	total = busy + v[3] + v[4];
	return json_pack("{s:I, s:I}", "busy_ms", (json_int_t)(busy * 1000 / (unsigned long)tick),
	                 "total_ms", (json_int_t)(total * 1000 / (unsigned long)tick));
}

void op_info(struct conn *c, uint32_t id, json_t *req)
{
	json_t *cpu = cpu_times();
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
	if (cpu)
		json_object_set_new(r, "cpu", cpu);
	if (statvfs("/", &vfs) == 0)
		json_object_set_new(r, "disk",
		                    json_pack("{s:I, s:I}", "total_bytes",
		                              (json_int_t)(vfs.f_blocks * vfs.f_frsize),
		                              "free_bytes",
		                              (json_int_t)(vfs.f_bavail * vfs.f_frsize)));
	conn_send_json(c, FRAME_RESULT, id, r);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/*
 * The guest was restored from a snapshot: its wall clock stopped when the
 * snapshot was taken, and a sandbox started from a shared snapshot has the
 * same random state as its siblings. The host gives the time and fresh
 * entropy; the CRNG reseeds from it at once.
 */
void op_resumed(struct conn *c, uint32_t id, json_t *req)
{
	const char *seed = json_string_value(json_object_get(req, "seed"));
	const char *machine_id = json_string_value(json_object_get(req, "machine_id"));
	const char *hostname = json_string_value(json_object_get(req, "hostname"));
	const char *boot_id = json_string_value(json_object_get(req, "boot_id"));
	json_t *ns = json_object_get(req, "time_ns"), *net = json_object_get(req, "net");
	struct netcfg nc;
	json_t *res;
	char why[160];
	int ended = 0;
	struct {
		struct rand_pool_info info;
		uint8_t buf[64];
	} e = {0};
	size_t n = seed ? strlen(seed) / 2 : 0;
	struct timespec ts;
	int fd, rc, clock_rc = 0, rng_rc = 0;

	if (!json_is_integer(ns) || json_integer_value(ns) <= 0 || !seed || n == 0 ||
	    n > sizeof(e.buf) || strlen(seed) != 2 * n) {
		conn_send_error(c, id, "bad_request",
		                "resumed needs time_ns (> 0) and seed (1 to 64 bytes in hex)");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(seed[2 * i]), lo = hexval(seed[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			conn_send_error(c, id, "bad_request", "seed is not lowercase hex");
			return;
		}
		e.buf[i] = (uint8_t)(hi << 4 | lo);
	}
	if (machine_id &&
	    (strlen(machine_id) != 32 || strspn(machine_id, "0123456789abcdef") != 32)) {
		conn_send_error(c, id, "bad_request", "machine_id must be 32 lowercase hex digits");
		return;
	}
	if (hostname && !identity_hostname_valid(hostname)) {
		conn_send_error(
			c, id, "bad_request",
			"hostname must be 1 to 63 of a-z, 0-9 and '-', not starting or ending "
			"with '-'");
		return;
	}
	if (boot_id && !identity_boot_id_valid(boot_id)) {
		conn_send_error(c, id, "bad_request",
		                "boot_id must be a UUID in lowercase hex (8-4-4-4-12)");
		return;
	}
	if (net && netcfg_parse(net, &nc, why, sizeof(why))) {
		conn_send_error(c, id, "bad_request", "%s", why);
		return;
	}
	ts.tv_sec = (time_t)(json_integer_value(ns) / 1000000000);
	ts.tv_nsec = (long)(json_integer_value(ns) % 1000000000);
	if (clock_settime(CLOCK_REALTIME, &ts) < 0)
		clock_rc = -errno;
	e.info.entropy_count = (int)(n * 8);
	e.info.buf_size = (int)n;
	fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, &e.info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
		rng_rc = -errno;
	if (fd >= 0)
		close(fd);
	if (clock_rc || rng_rc) {
		conn_send_error(c, id, "failed", "clock: %s; random: %s",
		                clock_rc ? strerror(-clock_rc) : "set",
		                rng_rc ? strerror(-rng_rc) : "reseeded");
		return;
	}
	if (machine_id && (rc = identity_set_machine_id(machine_id))) {
		conn_send_error(c, id, "failed", "cannot write /etc/machine-id: %s", strerror(-rc));
		return;
	}
	if (hostname && (rc = identity_set_hostname(hostname))) {
		conn_send_error(c, id, "failed", "cannot set the host name: %s", strerror(-rc));
		return;
	}
	if (boot_id && (rc = identity_set_boot_id(boot_id))) {
		conn_send_error(c, id, "failed", "cannot renew the boot id: %s", strerror(-rc));
		return;
	}
	if (net && (rc = netcfg_apply(&nc, &ended, why, sizeof(why)))) {
		conn_send_error(c, id, "failed", "the network: %s", why);
		return;
	}
	res = json_pack("{s:b, s:b, s:b, s:b, s:b, s:b}", "clock", 1, "reseeded", 1, "machineId",
	                machine_id != NULL, "hostname", hostname != NULL, "bootId", boot_id != NULL,
	                "net", net != NULL);
	/* The network is the guest's either way; its old connections may linger. */
	if (res && net)
		json_object_set_new(res, "connectionsEnded",
		                    ended >= 0 ? json_integer(ended)
		                               : json_string(strerror(-ended)));
	conn_send_json(c, FRAME_RESULT, id, res);
}
