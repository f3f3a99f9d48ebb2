// SPDX-License-Identifier: MIT
/*
 * One store shared by threads (the loop thread and workers), and a second
 * connection reading the same file meanwhile (WAL: readers do not block).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

#define ROUNDS 40

struct worker {
	struct store *s;
	int failures;
};

static int one_round(struct store *s)
{
	char id[STORE_ID_LEN], eid[STORE_ID_LEN];
	json_t *e, *list;
	int ret;

	ret = tstore_sandbox(s, "threaded", id);
	if (!ret)
		ret = store_sandbox_set_status(s, id, "idle", NULL);
	if (!ret)
		ret = store_new_id(STORE_PFX_EXECUTION, eid);
	e = json_pack("{s:s, s:s, s:s}", "executionId", eid, "sandboxId", id, "status", "running");
	if (!ret)
		ret = store_execution_insert(s, e, NULL);
	json_decref(e);
	if (!ret)
		ret = store_execution_update(s, eid, "completed", NULL, NULL, NULL);
	if (!ret && (ret = store_event_list(s, id, 0, true, &list)) == 0) {
		if (json_array_size(json_object_get(list, "events")) != 2)
			ret = -1;
		json_decref(list);
	}
	if (!ret &&
	    (ret = store_sandbox_list(s, &(struct store_sandbox_filter){.limit = 5}, &list)) == 0)
		json_decref(list);
	return ret;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < ROUNDS; i++)
		if (one_round(w->s) < 0)
			w->failures++;
	return NULL;
}

static void *read_other(void *arg)
{
	struct worker *w = arg;
	json_t *list, *u;

	for (int i = 0; i < ROUNDS; i++) {
		if (store_sandbox_list(w->s, &(struct store_sandbox_filter){0}, &list) < 0)
			w->failures++;
		else
			json_decref(list);
		if (store_usage(w->s, NULL, 0, INT64_MAX, &u) < 0)
			w->failures++;
		else
			json_decref(u);
	}
	return NULL;
}

UNIT_TEST(store_is_shared_by_threads)
{
	const char *path = tstore_path("threads.db");
	struct worker w[3] = {{tstore_reopen(path), 0}, {NULL, 0}, {tstore_reopen(path), 0}};
	pthread_t t[3];
	json_t *list, *sbx;
	size_t i;

	CHECK(w[0].s && w[2].s);
	w[1].s = w[0].s;
	CHECK(pthread_create(&t[0], NULL, work, &w[0]) == 0);
	CHECK(pthread_create(&t[1], NULL, work, &w[1]) == 0);
	CHECK(pthread_create(&t[2], NULL, read_other, &w[2]) == 0);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	CHECK(w[0].failures == 0 && w[1].failures == 0 && w[2].failures == 0);

	CHECK(store_sandbox_list(w[2].s, &(struct store_sandbox_filter){0}, &list) == 0);
	CHECK(tstore_int(list, "total") == 2 * ROUNDS);
	json_array_foreach(json_object_get(list, "sandboxes"), i, sbx)
	{
		CHECK(!strcmp(tstore_str(sbx, "status"), "idle"));
		CHECK(tstore_int(sbx, "executions") == 1);
	}
	json_decref(list);
	CHECK(!tstore_log()[0]);
	store_close(w[0].s);
	store_close(w[2].s);
}
