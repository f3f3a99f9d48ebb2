/* SPDX-License-Identifier: MIT */
#ifndef HUSK_BENCH_AGENT_H
#define HUSK_BENCH_AGENT_H

/* What agentbench and apibench share: `true` sent straight to an agent. */
#include "agent_client.h"
#include "bench.h"

/* One exec of `true` on c: its round trip in ms, or -1 if it failed or exited non-zero. */
static inline double bench_agent_true(struct agent_client *c)
{
	json_t *req = json_pack("{s:s, s:[s]}", "op", "exec", "argv", "true"), *res = NULL;
	double t0 = bench_now_ms(), t;
	int ret = agent_exec(c, req, -1, -1, -1, &res);

	t = bench_now_ms() - t0;
	if (ret || json_integer_value(json_object_get(res, "exit_code")))
		t = -1;
	json_decref(req);
	json_decref(res);
	return t;
}

#endif
