// SPDX-License-Identifier: MIT
/*
 * agentbench: exec round trips and stream throughput against one agent.
 * usage: agentbench (--unix PATH | --vsock PATH) [RUNS] [MIB]
 * Prints: exec_p50_ms= exec_p99_ms= info_p50_ms= h2g_mbs= g2h_mbs=
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_agent.h"

/* Runs argv with stdin from in_fd and stdout to out_fd; returns ms or -1. */
static double timed_exec(struct agent_client *c, const char *script, int in_fd, int out_fd)
{
	json_t *req = json_pack("{s:s, s:[s,s,s], s:b}", "op", "exec", "argv", "sh", "-c", script,
	                        "stdin", in_fd >= 0),
	       *res = NULL;
	double t0 = bench_now_ms();
	int ret = agent_exec(c, req, in_fd, out_fd, -1, &res);
	double t = bench_now_ms() - t0;

	json_decref(req);
	if (ret || json_integer_value(json_object_get(res, "exit_code"))) {
		char *why = res ? json_dumps(res, JSON_COMPACT) : NULL;

		/* Why, for a run that failed: the agent's answer, or the client's error. */
		fprintf(stderr, "agentbench: '%s' failed after %.0f ms: %s (%s)\n", script, t,
		        ret ? strerror(ret < 0 ? -ret : ret) : "nonzero exit",
		        why ? why : "no answer");
		free(why);
		json_decref(res);
		return -1;
	}
	json_decref(res);
	return t;
}

int main(int argc, char **argv)
{
	int runs = argc > 3 ? atoi(argv[3]) : 200, mib = argc > 4 ? atoi(argv[4]) : 64, ret;
	struct agent_client *c;
	double *lat, h2g, g2h, exec_p50, exec_p99;
	char tmp[] = "/tmp/agentbench-XXXXXX", script[64];
	int fd, devnull = open("/dev/null", O_WRONLY);
	static char chunk[1 << 20];

	if (argc < 3 || runs < 1 || mib < 1) {
		fprintf(stderr, "usage: agentbench (--unix PATH | --vsock PATH) [RUNS] [MIB]\n");
		return 2;
	}
	ret = !strcmp(argv[1], "--unix")
	              ? agent_client_connect_unix(argv[2], &c)
	              : agent_client_connect_vsock(argv[2], AGENT_VSOCK_PORT, &c);
	if (ret) {
		fprintf(stderr, "agentbench: cannot connect: %s\n", strerror(-ret));
		return 1;
	}
	lat = calloc((size_t)runs, sizeof(*lat));
	for (int i = 0; i < runs; i++) {
		if ((lat[i] = bench_agent_true(c)) < 0) {
			fprintf(stderr, "agentbench: exec failed\n");
			return 1;
		}
	}
	bench_sort(lat, runs);
	exec_p50 = bench_pct(lat, runs, 50);
	exec_p99 = bench_pct(lat, runs, 99);
	/* The same round trips with no process: what the transport alone costs. */
	for (int i = 0; i < runs; i++) {
		json_t *req = json_pack("{s:s}", "op", "info"), *res = NULL;
		double t0 = bench_now_ms();
		int failed = !req || agent_call(c, req, &res);

		lat[i] = bench_now_ms() - t0;
		json_decref(req);
		json_decref(res);
		if (failed) {
			fprintf(stderr, "agentbench: info failed\n");
			free(lat);
			agent_client_close(c);
			return 1;
		}
	}
	bench_sort(lat, runs);

	/* host -> guest: MIB MiB into the process's stdin, which throws it away */
	fd = mkstemp(tmp);
	unlink(tmp);
	memset(chunk, 'h', sizeof(chunk));
	for (int i = 0; i < mib; i++)
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			return 1;
	lseek(fd, 0, SEEK_SET);
	h2g = timed_exec(c, "cat >/dev/null", fd, -1);
	close(fd);
	/* guest -> host: MIB MiB of the process's stdout */
	snprintf(script, sizeof(script), "head -c %d /dev/zero", mib << 20);
	g2h = timed_exec(c, script, -1, devnull);
	if (h2g <= 0 || g2h <= 0) {
		fprintf(stderr, "agentbench: a transfer failed\n");
		return 1;
	}
	printf("exec_p50_ms=%.3f exec_p99_ms=%.3f info_p50_ms=%.3f h2g_mbs=%.1f g2h_mbs=%.1f\n",
	       exec_p50, exec_p99, bench_pct(lat, runs, 50), mib * 1.048576 / (h2g / 1e3),
	       mib * 1.048576 / (g2h / 1e3));
	free(lat);
	agent_client_close(c);
	return 0;
}
