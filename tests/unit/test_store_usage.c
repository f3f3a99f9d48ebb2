// SPDX-License-Identifier: MIT
/* Usage over a time window, from the store's events and executions. */
#include <errno.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

#define T(ms) (TSTORE_T0 + (ms))

static int status_at(struct store *s, const char *id, int64_t ms, const char *status)
{
	tstore_now = T(ms);
	return store_sandbox_set_status(s, id, status, NULL);
}

static int exec_at(struct store *s, const char *sbx, const char *id, int64_t start, int64_t end)
{
	json_t *e = json_pack("{s:s, s:s, s:s}", "executionId", id, "sandboxId", sbx, "status",
	                      "running");
	int ret;

	tstore_now = T(start);
	ret = store_execution_insert(s, e, NULL);
	json_decref(e);
	tstore_now = T(end);
	if (ret == 0 && end >= 0)
		ret = store_execution_update(s, id, "completed", NULL, NULL, NULL);
	return ret;
}

/* The usage row of a sandbox, or NULL. */
static json_t *row(json_t *usage, const char *id)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(usage, "sandboxes"), i,
	                   r) if (!strcmp(tstore_str(r, "sandboxId"), id)) return r;
	return NULL;
}

UNIT_TEST(store_usage_clips_to_the_window)
{
	struct store *s = tstore_open("usage.db");
	char a[STORE_ID_LEN], b[STORE_ID_LEN], c[STORE_ID_LEN], d[STORE_ID_LEN];
	json_t *u, *r, *tot;

	CHECK(s);
	/* a: up since before the window, still idle; an execution spans the window's start. */
	CHECK(tstore_sandbox(s, "a", a) == 0);
	CHECK(status_at(s, a, 1000, "idle") == 0);
	CHECK(status_at(s, a, 3000, "running") == 0);
	CHECK(exec_at(s, a, "exec_a1", 3000, 5000) == 0);
	CHECK(status_at(s, a, 5000, "idle") == 0);
	/* b: over before the window. */
	tstore_now = T(0);
	CHECK(tstore_sandbox(s, "b", b) == 0);
	CHECK(status_at(s, b, 500, "idle") == 0);
	CHECK(status_at(s, b, 2000, "terminated") == 0);
	/* c: starts inside, paused for a while. */
	tstore_now = T(6000);
	CHECK(tstore_sandbox(s, "c", c) == 0);
	CHECK(status_at(s, c, 7000, "idle") == 0);
	CHECK(exec_at(s, c, "exec_c1", 7200, 7800) == 0);
	CHECK(status_at(s, c, 8000, "paused") == 0);
	CHECK(status_at(s, c, 9000, "idle") == 0);
	/* a again: an execution still running at "now". */
	CHECK(exec_at(s, a, "exec_a2", 9500, -1) == 0);
	/* d: after the window. */
	tstore_now = T(20000);
	CHECK(tstore_sandbox(s, "d", d) == 0);
	CHECK(status_at(s, d, 20001, "idle") == 0);

	tstore_now = T(10000);
	/* What a consumed in its life (alive 1000-now: 9000 ms), as its cgroup's figures say. */
	u = json_pack("{sisi}", "cpuTimeMs", 900, "memoryByteSec", 9000);
	CHECK(store_sandbox_update(s, a, u, NULL, NULL) == 0);
	json_decref(u);
	CHECK(store_usage(s, NULL, T(4000), T(12000), &u) == 0);
	CHECK(!strcmp(tstore_str(u, "from"), "2026-05-01T12:00:04.000Z"));
	CHECK(json_array_size(json_object_get(u, "sandboxes")) == 2);
	r = row(u, a);
	CHECK(r);
	/* running 4000-5000, idle 5000-now */
	CHECK(tstore_int(r, "aliveMs") == 6000);
	CHECK(tstore_int(r, "executions") == 1);
	CHECK(tstore_int(r, "execMs") == 1000 + 500);
	CHECK(tstore_int(r, "cpuAllocatedMs") == 6000);
	CHECK(tstore_int(r, "memoryAllocatedByteSec") == 6ll * 512 * 1024 * 1024);
	/* Consumed: its share for 6000 of its 9000 ms alive. */
	CHECK(tstore_int(r, "cpuTimeMs") == 600 && tstore_int(r, "memoryByteSec") == 6000);
	r = row(u, c);
	CHECK(tstore_int(r, "cpuTimeMs") == 0); /* no figures recorded: none consumed known */
	CHECK(r);
	CHECK(tstore_int(r, "aliveMs") == 2000);
	CHECK(tstore_int(r, "executions") == 1 && tstore_int(r, "execMs") == 600);
	CHECK(!row(u, b) && !row(u, d));
	tot = json_object_get(u, "total");
	CHECK(tstore_int(tot, "sandboxes") == 2);
	CHECK(tstore_int(tot, "aliveMs") == 8000);
	CHECK(tstore_int(tot, "executions") == 2 && tstore_int(tot, "execMs") == 2100);
	CHECK(tstore_int(tot, "cpuAllocatedMs") == 8000);
	CHECK(tstore_int(tot, "cpuTimeMs") == 600);
	json_decref(u);

	/* A window in the past sees b, and a before its execution. */
	CHECK(store_usage(s, NULL, T(0), T(2000), &u) == 0);
	CHECK(tstore_int(row(u, a), "aliveMs") == 1000);
	CHECK(tstore_int(row(u, b), "aliveMs") == 1500);
	CHECK(tstore_int(json_object_get(u, "total"), "executions") == 0);
	json_decref(u);
	/* a has been idle since before this window: all of it counts. */
	CHECK(store_usage(s, NULL, T(6000), T(7000), &u) == 0);
	CHECK(tstore_int(row(u, a), "aliveMs") == 1000);
	json_decref(u);
	/* Empty and backwards windows. */
	CHECK(store_usage(s, NULL, T(4000), T(4000), &u) == 0);
	CHECK(json_array_size(json_object_get(u, "sandboxes")) == 0);
	json_decref(u);
	CHECK(store_usage(s, NULL, T(5), T(4), &u) == -EINVAL);
	CHECK(!tstore_log()[0]);
	store_close(s);
}
