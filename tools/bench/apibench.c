// SPDX-License-Identifier: MIT
/*
 * apibench: `true` run through huskd's API by a small C client, the requests
 * the published client makes (POST execute, then the execution's long-poll)
 * on one kept connection, as it keeps its own (and as the direct figure's
 * agentbench keeps its one connection to the agent), so that the figure is
 * huskd's cost and not a JavaScript client's.
 * usage: apibench URL KEY SANDBOX_ID [RUNS]
 * Prints: capi_exec_p50_ms= capi_exec_p99_ms=
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
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

int main(int argc, char **argv)
{
	struct client cl = {.key = argc > 2 ? argv[2] : NULL};
	char err[256];
	int runs = argc > 4 ? atoi(argv[4]) : 50;
	double *ms;

	if (argc < 4 || runs < 1 || runs > 100000) {
		fprintf(stderr, "usage: apibench URL KEY SANDBOX_ID [RUNS (1..100000)]\n");
		return 2;
	}
	if (cli_url_parse(argv[1], &cl.u, err, sizeof(err))) {
		fprintf(stderr, "apibench: %s\n", err);
		return 2;
	}
	if (!(ms = calloc((size_t)runs, sizeof(*ms))))
		return 1;
	if (timed_exec(&cl, argv[3]) < 0) /* the first one warms up */
		return 1;
	for (int i = 0; i < runs; i++)
		if ((ms[i] = timed_exec(&cl, argv[3])) < 0)
			return 1;
	cli_http_close(cl.conn);
	qsort(ms, (size_t)runs, sizeof(*ms), bench_cmp);
	printf("capi_exec_p50_ms=%.2f capi_exec_p99_ms=%.2f\n", ms[runs / 2],
	       ms[(runs * 99) / 100 < runs ? (runs * 99) / 100 : runs - 1]);
	free(ms);
	return 0;
}
