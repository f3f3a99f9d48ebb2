// SPDX-License-Identifier: MIT
/* Sandboxes and their events in the state store. */
#include <errno.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

/* The type and "to" of event i of a sandbox's event list. */
static const char *event_type(json_t *list, size_t i)
{
	return tstore_str(json_array_get(json_object_get(list, "events"), i), "type");
}

static size_t count_events(struct store *s, const char *id)
{
	json_t *list;
	size_t n;

	if (store_event_list(s, id, 0, false, &list) < 0)
		return (size_t)-1;
	n = json_array_size(json_object_get(list, "events"));
	json_decref(list);
	return n;
}

UNIT_TEST(store_sandbox_insert_get_update)
{
	struct store *s = tstore_open("sbx_crud.db");
	char id[STORE_ID_LEN];
	json_t *info, *out, *priv, *patch;

	CHECK(s);
	CHECK(store_new_id(STORE_PFX_SANDBOX, id) == 0);
	info = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}, s:{s:s}}", "sandboxId", id, "name",
	                 "dev", "runtime", "id", "srt_python313", "name", "python:3.13",
	                 "resources", "memory", "256Mi", "metadata", "owner", "me");
	priv = json_pack("{s:{s:s}}", "env", "A", "1");
	CHECK(store_sandbox_insert(s, info, priv, &out) == 0);
	/* The shape GET /sandbox/{id} answers with. */
	CHECK(!strcmp(tstore_str(out, "sandboxId"), id));
	CHECK(!strcmp(tstore_str(out, "status"), "creating"));
	CHECK(!strcmp(tstore_str(out, "createdAt"), "2026-05-01T12:00:00.000Z"));
	CHECK(json_is_integer(json_object_get(out, "executions")) &&
	      tstore_int(out, "executions") == 0);
	CHECK(!strcmp(tstore_str(json_object_get(out, "runtime"), "name"), "python:3.13"));
	CHECK(!json_object_get(out, "env"));
	json_decref(out);
	CHECK(store_sandbox_insert(s, info, NULL, NULL) == -EEXIST);
	json_decref(info);
	json_decref(priv);

	info = json_pack("{s:s}", "name", "no id");
	CHECK(store_sandbox_insert(s, info, NULL, NULL) == -EINVAL);
	json_decref(info);
	info = json_pack("{s:s, s:{s:s}}", "sandboxId", "sbx_badres", "resources", "cpu", "lots");
	CHECK(store_sandbox_insert(s, info, NULL, NULL) == -EINVAL);
	json_decref(info);
	CHECK(store_sandbox_get(s, "sbx_missing", &info, NULL) == -ENOENT);

	/* PATCH /sandbox/env: null deletes, strings set. */
	patch = json_pack("{s:s}", "name", "renamed");
	priv = json_pack("{s:{s:n, s:s}}", "env", "A", "B", "2");
	CHECK(store_sandbox_update(s, id, patch, priv, &out) == 0);
	CHECK(!strcmp(tstore_str(out, "name"), "renamed"));
	CHECK(!strcmp(tstore_str(json_object_get(out, "metadata"), "owner"), "me"));
	json_decref(out);
	json_decref(patch);
	json_decref(priv);
	CHECK(store_sandbox_get(s, id, NULL, &priv) == 0);
	CHECK(!json_object_get(json_object_get(priv, "env"), "A"));
	CHECK(!strcmp(tstore_str(json_object_get(priv, "env"), "B"), "2"));
	json_decref(priv);

	/* A status changes only with its event. */
	patch = json_pack("{s:s}", "status", "idle");
	CHECK(store_sandbox_update(s, id, patch, NULL, NULL) == -EINVAL);
	json_decref(patch);
	patch = json_pack("{s:s}", "name", "x");
	CHECK(store_sandbox_update(s, "sbx_missing", patch, NULL, NULL) == -ENOENT);
	json_decref(patch);
	CHECK(!tstore_log()[0]);
	store_close(s);
}

UNIT_TEST(store_sandbox_transitions_write_events)
{
	struct store *s = tstore_open("sbx_trans.db");
	struct store_transition t = {0};
	char id[STORE_ID_LEN];
	json_t *list, *ev, *out;

	CHECK(s);
	CHECK(tstore_sandbox(s, "life", id) == 0);
	tstore_now += 1000;
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == 0);
	CHECK(store_sandbox_set_status(s, id, "running", NULL) == 0);
	CHECK(store_sandbox_set_status(s, id, "running", NULL) == 0); /* no change, no event */
	CHECK(store_sandbox_set_status(s, id, "paused", NULL) == 0);
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == 0);
	t.status = "terminated";
	t.patch = json_pack("{s:i}", "exitCode", 3);
	t.event = json_pack("{s:s}", "reason", "idle timeout");
	CHECK(store_sandbox_transition(s, id, &t, &out) == 0);
	CHECK(tstore_int(out, "exitCode") == 3 && !strcmp(tstore_str(out, "status"), "terminated"));
	json_decref(out);
	json_decref(t.patch);
	json_decref(t.event);
	CHECK(store_sandbox_set_status(s, id, "running", NULL) == -EINVAL);
	CHECK(store_sandbox_set_status(s, id, "bogus", NULL) == -EINVAL);
	CHECK(store_sandbox_set_status(s, id, "deleted", "DELETE /sandbox") == 0);
	CHECK(store_sandbox_set_status(s, id, "deleted", NULL) == 0); /* idempotent */
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == -EINVAL);
	CHECK(store_sandbox_set_status(s, "sbx_missing", "idle", NULL) == -ENOENT);

	CHECK(store_event_list(s, id, 0, false, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "events")) == 7);
	CHECK(!strcmp(event_type(list, 0), "create"));
	CHECK(!strcmp(event_type(list, 1), "lifecycle:started"));
	CHECK(!strcmp(event_type(list, 2), "lifecycle:running"));
	CHECK(!strcmp(event_type(list, 3), "pause"));
	CHECK(!strcmp(event_type(list, 4), "resume"));
	CHECK(!strcmp(event_type(list, 5), "lifecycle:terminated"));
	CHECK(!strcmp(event_type(list, 6), "destroy"));
	ev = json_array_get(json_object_get(list, "events"), 5);
	CHECK(!strncmp(tstore_str(ev, "eventId"), "evt_", 4));
	CHECK(!strcmp(tstore_str(ev, "sandboxId"), id));
	CHECK(!strcmp(tstore_str(ev, "createdAt"), "2026-05-01T12:00:01.000Z"));
	CHECK(!strcmp(tstore_str(json_object_get(ev, "event"), "from"), "idle"));
	CHECK(!strcmp(tstore_str(json_object_get(ev, "event"), "to"), "terminated"));
	CHECK(!strcmp(tstore_str(json_object_get(ev, "event"), "reason"), "idle timeout"));
	json_decref(list);
	/* Deleted, and still readable (API.md §5.10). */
	CHECK(store_sandbox_get(s, id, &out, NULL) == 0);
	CHECK(!strcmp(tstore_str(out, "status"), "deleted"));
	json_decref(out);
	store_close(s);
}

UNIT_TEST(store_sandbox_transition_is_atomic)
{
	const char *path = tstore_path("sbx_atomic.db");
	struct store *s = tstore_reopen(path);
	struct store_transition t = {.status = "idle", .event_type = "boom"};
	char id[STORE_ID_LEN];
	json_t *out;

	CHECK(s);
	CHECK(tstore_sandbox(s, "atomic", id) == 0);
	/* Another connection makes the event's insert fail. */
	CHECK(tstore_sql(path,
	                 "CREATE TRIGGER no_boom BEFORE INSERT ON events "
	                 "WHEN NEW.type = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END") == 0);
	t.patch = json_pack("{s:s}", "name", "half-done");
	CHECK(store_sandbox_transition(s, id, &t, &out) < 0);
	CHECK(!out);
	json_decref(t.patch);
	CHECK(store_sandbox_get(s, id, &out, NULL) == 0);
	CHECK(!strcmp(tstore_str(out, "status"), "creating"));
	CHECK(!strcmp(tstore_str(out, "name"), "atomic"));
	json_decref(out);
	CHECK(count_events(s, id) == 1);
	/* Without the failure it goes through. */
	CHECK(store_sandbox_set_status(s, id, "idle", NULL) == 0);
	CHECK(count_events(s, id) == 2);
	store_close(s);
}

UNIT_TEST(store_events_append_and_page)
{
	struct store *s = tstore_open("events.db");
	char id[STORE_ID_LEN], eid[STORE_ID_LEN];
	json_t *payload, *list;

	CHECK(s);
	CHECK(tstore_sandbox(s, "ev", id) == 0);
	for (int i = 0; i < 5; i++) {
		payload = json_pack("{s:i}", "n", i);
		CHECK(store_event_append(s, id, "note", payload, eid) == 0);
		json_decref(payload);
	}
	CHECK(!strncmp(eid, "evt_", 4));
	CHECK(store_event_append(s, id, "bare", NULL, NULL) == 0);
	CHECK(store_event_append(s, "sbx_missing", "note", NULL, NULL) == -ENOENT);
	payload = json_string("not an object");
	CHECK(store_event_append(s, id, "note", payload, NULL) == -EINVAL);
	json_decref(payload);

	CHECK(store_event_list(s, id, 3, false, &list) == 0); /* oldest first */
	CHECK(json_array_size(json_object_get(list, "events")) == 3);
	CHECK(!strcmp(event_type(list, 0), "create"));
	CHECK(tstore_int(
		      json_object_get(json_array_get(json_object_get(list, "events"), 1), "event"),
		      "n") == 0);
	json_decref(list);
	CHECK(store_event_list(s, id, 2, true, &list) == 0); /* newest first */
	CHECK(!strcmp(event_type(list, 0), "bare"));
	CHECK(json_is_object(
		json_object_get(json_array_get(json_object_get(list, "events"), 0), "event")));
	CHECK(tstore_int(
		      json_object_get(json_array_get(json_object_get(list, "events"), 1), "event"),
		      "n") == 4);
	json_decref(list);
	CHECK(store_event_list(s, "sbx_missing", 0, false, &list) == -ENOENT);
	CHECK(!list);
	store_close(s);
}

/* The names of a list's sandboxes, comma-separated, and its total. */
static const char *names(struct store *s, const struct store_sandbox_filter *f, int *total)
{
	static char buf[256];
	json_t *list, *sbx;
	size_t i;

	buf[0] = '\0';
	*total = -1;
	if (store_sandbox_list(s, f, &list) < 0)
		return "error";
	json_array_foreach(json_object_get(list, "sandboxes"), i, sbx)
	{
		strcat(buf, i ? "," : "");
		strcat(buf, tstore_str(sbx, "name"));
	}
	*total = (int)tstore_int(list, "total");
	json_decref(list);
	return buf;
}

UNIT_TEST(store_sandbox_list_filters_sorts_and_pages)
{
	static const char *const status[] = {"idle", "running", "terminated", "deleted", "idle"};
	struct store *s = tstore_open("sbx_list.db");
	struct store_sandbox_filter f = {0};
	char id[5][STORE_ID_LEN];
	json_t *list, *patch;
	int total;

	CHECK(s);
	for (int i = 0; i < 5; i++) {
		char name[8] = {(char)('a' + i), 0};

		tstore_now += 1000;
		CHECK(tstore_sandbox(s, name, id[i]) == 0);
		if (!strcmp(status[i], "deleted"))
			CHECK(store_sandbox_set_status(s, id[i], "terminated", NULL) == 0);
		CHECK(store_sandbox_set_status(s, id[i], status[i], NULL) == 0);
	}
	patch = json_pack("{s:{s:s, s:s}, s:s}", "runtime", "id", "srt_bun1", "name", "bun:1",
	                  "projectId", "proj_x");
	CHECK(store_sandbox_update(s, id[4], patch, NULL, NULL) == 0);
	json_decref(patch);

	/* Default: newest first, deleted hidden. */
	CHECK(!strcmp(names(s, &f, &total), "e,c,b,a") && total == 4);
	f.ascending = true;
	f.limit = 2;
	f.offset = 1;
	CHECK(!strcmp(names(s, &f, &total), "b,c") && total == 4);
	f = (struct store_sandbox_filter){.status = "idle", .sort = "name", .ascending = true};
	CHECK(!strcmp(names(s, &f, &total), "a,e") && total == 2);
	f = (struct store_sandbox_filter){.live = STORE_ONLY};
	CHECK(!strcmp(names(s, &f, &total), "e,b,a"));
	f = (struct store_sandbox_filter){.live = STORE_EXCLUDE};
	CHECK(!strcmp(names(s, &f, &total), "c"));
	f = (struct store_sandbox_filter){.deleted = STORE_DELETED_ONLY};
	CHECK(!strcmp(names(s, &f, &total), "d"));
	f = (struct store_sandbox_filter){.deleted = STORE_DELETED_INCLUDE};
	CHECK(!strcmp(names(s, &f, &total), "e,d,c,b,a") && total == 5);
	f = (struct store_sandbox_filter){.status = "deleted"};
	CHECK(!strcmp(names(s, &f, &total), "d"));
	f = (struct store_sandbox_filter){.runtime = "bun:1"};
	CHECK(!strcmp(names(s, &f, &total), "e"));
	f = (struct store_sandbox_filter){
		.project_id = "proj_x", .name = "e", .mode = "interactive"};
	CHECK(!strcmp(names(s, &f, &total), "e"));
	f = (struct store_sandbox_filter){.name = "a'; DROP TABLE sandboxes; --"};
	CHECK(!strcmp(names(s, &f, &total), "") && total == 0);
	f = (struct store_sandbox_filter){.sort = "status", .ascending = true, .limit = 1};
	CHECK(!strcmp(names(s, &f, &total), "a") && total == 4); /* idle < running < terminated */
	f = (struct store_sandbox_filter){.offset = 10};
	CHECK(!strcmp(names(s, &f, &total), "") && total == 4);

	f = (struct store_sandbox_filter){.sort = "id; DROP TABLE sandboxes"};
	CHECK(store_sandbox_list(s, &f, &list) == -EINVAL && !list);
	f = (struct store_sandbox_filter){.status = "sleeping"};
	CHECK(store_sandbox_list(s, &f, &list) == -EINVAL);
	CHECK(!tstore_log()[0]);
	store_close(s);
}

UNIT_TEST(store_sandbox_purge_takes_everything_with_it)
{
	struct store *s = tstore_open("sbx_purge.db");
	char id[STORE_ID_LEN], keep[STORE_ID_LEN];
	json_t *exec, *list, *ckpt;

	CHECK(s);
	CHECK(tstore_sandbox(s, "gone", id) == 0);
	CHECK(tstore_sandbox(s, "kept", keep) == 0);
	exec = json_pack("{s:s, s:s}", "executionId", "exec_purged", "sandboxId", id);
	CHECK(store_execution_insert(s, exec, NULL) == 0);
	json_decref(exec);
	ckpt = json_pack("{s:s, s:s}", "id", "ckpt_purged", "name", "c1");
	CHECK(store_checkpoint_insert(s, id, ckpt, NULL) == 0);
	json_decref(ckpt);

	CHECK(store_sandbox_purge(s, id) == 0);
	CHECK(store_sandbox_purge(s, id) == -ENOENT);
	CHECK(store_sandbox_get(s, id, &list, NULL) == -ENOENT);
	CHECK(store_execution_get(s, "exec_purged", &exec, NULL) == -ENOENT);
	CHECK(store_event_list(s, id, 0, false, &list) == -ENOENT);
	CHECK(count_events(s, keep) == 1);
	/* The id is free again, with no stale rows behind it. */
	ckpt = json_pack("{s:s, s:s}", "id", "ckpt_purged", "name", "c1");
	CHECK(store_checkpoint_insert(s, keep, ckpt, NULL) == 0);
	json_decref(ckpt);
	store_close(s);
}
