// SPDX-License-Identifier: MIT
/*
 * apibench: `true` run through huskd's API by a small C client, the requests
 * the published client makes (POST execute, then the execution's long-poll)
 * on one kept connection, as it keeps its own (and as the direct figure's
 * agentbench keeps its one connection to the agent), so that the figure is
 * huskd's cost and not a JavaScript client's.
 * With VSOCK (the sandbox's vsock.sock), each run also execs `true` straight
 * to the sandbox's agent, the two in turn (which first alternates): both
 * figures then come from the same minutes, under the same load and the same
 * CPU quota (run one after the other, a sandbox's throttled stretches made
 * the direct figure swing from 47 to 78 ms between runs of a minute).
 * usage: apibench URL KEY SANDBOX_ID [RUNS] [VSOCK]
 * Prints: capi_exec_p50_ms= capi_exec_p99_ms= [pair_exec_p50_ms= pair_exec_p99_ms=]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_agent.h"
#include "cli_http.h"

/* huskd, and the connection kept between requests. */
struct client {
	struct cli_url u;
	const char *key;
	struct cli_conn *conn;
};

/* One request whose answer must be 2xx JSON; *data is its "data". */
static int call(struct client *cl, const char *method, const char *target, const char *body,
                json_t **env, json_t **data)
{
	struct cli_req rq = {.method = method,
	                     .target = target,
	                     .key = cl->key,
	                     .ctype = body ? "application/json" : NULL,
	                     .body = body,
	                     .len = body ? strlen(body) : 0,
	                     .timeout_ms = 120000};
	struct cli_resp r = {0};
	int rc = cli_http_do_on(&cl->conn, &cl->u, &rq, &r);

	if (rc || r.status / 100 != 2) {
		fprintf(stderr, "apibench: %s %s: %s\n", method, target,
		        rc ? r.err : (r.body ? r.body : "no body"));
		cli_resp_free(&r);
		return -1;
	}
	*env = json_loads(r.body, 0, NULL);
	cli_resp_free(&r);
	*data = json_object_get(*env, "data");
	if (!json_is_object(*data)) {
		fprintf(stderr, "apibench: %s %s: no data in the answer\n", method, target);
		return -1;
	}
	return 0;
}

/* `true` through the API: ms, or -1. */
static double timed_exec(struct client *cl, const char *id)
{
	char target[512];
	json_t *env = NULL, *env2 = NULL, *data, *code;
	const char *eid, *status = NULL;
	double t0 = bench_now_ms(), t = -1;

	snprintf(target, sizeof(target), "/sandbox/%s/execute", id);
	if (call(cl, "POST", target, "{\"command\":[\"true\"]}", &env, &data))
		goto out;
	if (!(eid = json_string_value(json_object_get(data, "executionId"))))
		goto out;
	snprintf(target, sizeof(target), "/sandbox/execution/%s?wait=60s", eid);
	while (!status || !strcmp(status, "running") || !strcmp(status, "queued")) {
		json_decref(env2);
		if (call(cl, "GET", target, NULL, &env2, &data))
			goto out;
		status = json_string_value(json_object_get(data, "status"));
		if (!status)
			goto out;
	}
	code = json_object_get(data, "exitCode");
	if (strcmp(status, "completed") || json_integer_value(code) != 0) {
		fprintf(stderr, "apibench: true ended %s\n", status);
		goto out;
	}
	t = bench_now_ms() - t0;
out:
	json_decref(env);
	json_decref(env2);
	return t;
}

/* `true` straight to the agent: ms, or -1. */
static double timed_direct(struct agent_client *c)
{
	double t = bench_agent_true(c);

	if (t < 0)
		fprintf(stderr, "apibench: true straight to the agent failed\n");
	return t;
}

static void print_pcts(const char *name, double *ms, int runs)
{
	bench_sort(ms, runs);
	printf("%s_p50_ms=%.2f %s_p99_ms=%.2f", name, bench_pct(ms, runs, 50), name,
	       bench_pct(ms, runs, 99));
}

int main(int argc, char **argv)
{
	struct client cl = {.key = argc > 2 ? argv[2] : NULL};
	struct agent_client *agent = NULL;
	char err[256];
	int runs = argc > 4 ? atoi(argv[4]) : 50, ret;
	double *ms, *direct;

	if (argc < 4 || runs < 1 || runs > 100000) {
		fprintf(stderr, "usage: apibench URL KEY SANDBOX_ID [RUNS (1..100000)] [VSOCK]\n");
		return 2;
	}
	if (cli_url_parse(argv[1], &cl.u, err, sizeof(err))) {
		fprintf(stderr, "apibench: %s\n", err);
		return 2;
	}
	if (argc > 5 && (ret = agent_client_connect_vsock(argv[5], AGENT_VSOCK_PORT, &agent))) {
		fprintf(stderr, "apibench: cannot reach the agent at %s: %s\n", argv[5],
		        strerror(-ret));
		return 1;
	}
	ms = calloc((size_t)runs, sizeof(*ms));
	direct = calloc((size_t)runs, sizeof(*direct));
	if (!ms || !direct)
		return 1;
	/* The first of each warms up. */
	if (timed_exec(&cl, argv[3]) < 0 || (agent && timed_direct(agent) < 0))
		return 1;
	for (int i = 0; i < runs; i++) {
		if (agent && i % 2 && (direct[i] = timed_direct(agent)) < 0)
			return 1;
		if ((ms[i] = timed_exec(&cl, argv[3])) < 0)
			return 1;
		if (agent && !(i % 2) && (direct[i] = timed_direct(agent)) < 0)
			return 1;
	}
	cli_http_close(cl.conn);
	print_pcts("capi_exec", ms, runs);
	if (agent) {
		printf(" ");
		print_pcts("pair_exec", direct, runs);
		agent_client_close(agent);
	}
	printf("\n");
	free(ms);
	free(direct);
	return 0;
}
