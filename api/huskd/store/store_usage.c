// SPDX-License-Identifier: MIT
/*
 * Usage over a time window, from the history the store already keeps: every
 * status change is an event with the status it moved to, so a sandbox's
 * statuses form intervals [event, next event); the last one is still open.
 * Each interval and each execution counts only its part inside the window.
 * Allocated figures are the sandbox's size times its time alive; consumed
 * ones (cpuTimeMs, memoryByteSec: its cgroup's, kept in its record) are
 * shared out in proportion to its time alive inside the window.
 */
#include <errno.h>
#include <stdio.h>

#include "store_int.h"

/*
 * ?1 from, ?2 to, ?3 now. Candidates: sandboxes created before the window
 * ends that either changed status since it began or are alive now (a
 * sandbox whose last change came before the window has had one status all
 * through it, so if that status is not alive it contributes nothing).
 * lead() gives each status event the time of the next one.
 */
static const char usage_sql[] =
	"WITH c AS ("
	"  SELECT id FROM sandboxes"
	"  WHERE created_ms < ?2 AND (status_ms >= ?1 OR status IN ('idle', 'running'))"
	"    AND mode IS NOT 'template'"
	"), t AS ("
	"  SELECT e.sandbox_id AS sid, e.status AS st, e.created_ms AS a,"
	"    lead(e.created_ms) OVER (PARTITION BY e.sandbox_id ORDER BY e.seq) AS b"
	"  FROM events e JOIN c ON c.id = e.sandbox_id WHERE e.status IS NOT NULL"
	"), alive AS ("
	"  SELECT sid, sum(max(0, min(coalesce(b, ?3), ?2) - max(a, ?1))) AS ms,"
	"    sum(max(0, coalesce(b, ?3) - a)) AS all_ms"
	"  FROM t WHERE st IN ('idle', 'running') GROUP BY sid"
	"), ex AS ("
	"  SELECT sandbox_id AS sid, sum(started_ms >= ?1) AS n,"
	"    sum(max(0, min(coalesce(completed_ms, ?3), ?2) - max(started_ms, ?1))) AS ms"
	"  FROM executions"
	"  WHERE started_ms < ?2 AND (started_ms >= ?1 OR coalesce(completed_ms, ?3) > ?1)"
	"  GROUP BY sandbox_id"
	"), ids AS (SELECT sid FROM alive UNION SELECT sid FROM ex)"
	" SELECT ids.sid, coalesce(alive.ms, 0), coalesce(ex.n, 0), coalesce(ex.ms, 0),"
	"   s.cpu_millis, s.memory_bytes, coalesce(alive.all_ms, 0),"
	"   coalesce(json_extract(s.data, '$.cpuTimeMs'), 0),"
	"   coalesce(json_extract(s.data, '$.memoryByteSec'), 0)"
	" FROM ids LEFT JOIN alive USING (sid) LEFT JOIN ex USING (sid)"
	"   JOIN sandboxes s ON s.id = ids.sid"
	" WHERE (coalesce(alive.ms, 0) > 0 OR coalesce(ex.n, 0) > 0 OR coalesce(ex.ms, 0) > 0)"
	"   AND (?4 IS NULL OR s.org_id = ?4)"
	" ORDER BY ids.sid";

struct usage {
	int64_t alive_ms, executions, exec_ms, cpu_ms, mem_byte_sec;
	int64_t cpu_used_ms, mem_used_byte_sec; /* consumed (the cgroup's figures) */
};

/* a × b / 1000 without overflow, saturated: bytes × ms can pass 2^63. */
static int64_t per_second(int64_t a, int64_t b)
{
	__int128 v = (__int128)a * b / 1000;

	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/*
 * The part of a sandbox's consumption (over its whole life) that falls in the
 * window: in proportion to its time alive there (consumption is recorded as
 * running totals, not per interval).
 */
static int64_t share(int64_t used, int64_t in_ms, int64_t all_ms)
{
	if (used <= 0 || in_ms <= 0 || all_ms <= 0)
		return 0;
	if (in_ms >= all_ms)
		return used;
	return (int64_t)((__int128)used * in_ms / all_ms);
}

static json_t *usage_json(const struct usage *u)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "aliveMs", (json_int_t)u->alive_ms,
	                 "executions", (json_int_t)u->executions, "execMs", (json_int_t)u->exec_ms,
	                 "cpuAllocatedMs", (json_int_t)u->cpu_ms, "memoryAllocatedByteSec",
	                 (json_int_t)u->mem_byte_sec, "cpuTimeMs", (json_int_t)u->cpu_used_ms,
	                 "memoryByteSec", (json_int_t)u->mem_used_byte_sec);
}

/* Adds one row of usage_sql to list and to the total. */
static int usage_row(sqlite3_stmt *st, json_t *list, struct usage *total)
{
	struct usage u = {
		.alive_ms = sqlite3_column_int64(st, 1),
		.executions = sqlite3_column_int64(st, 2),
		.exec_ms = sqlite3_column_int64(st, 3),
	};
	json_t *row;

	u.cpu_ms = per_second(sqlite3_column_int64(st, 4), u.alive_ms);
	u.mem_byte_sec = per_second(sqlite3_column_int64(st, 5), u.alive_ms);
	u.cpu_used_ms = share(sqlite3_column_int64(st, 7), u.alive_ms, sqlite3_column_int64(st, 6));
	u.mem_used_byte_sec =
		share(sqlite3_column_int64(st, 8), u.alive_ms, sqlite3_column_int64(st, 6));
	total->alive_ms += u.alive_ms;
	total->executions += u.executions;
	total->exec_ms += u.exec_ms;
	total->cpu_ms += u.cpu_ms;
	total->mem_byte_sec += u.mem_byte_sec;
	total->cpu_used_ms += u.cpu_used_ms;
	total->mem_used_byte_sec += u.mem_used_byte_sec;
	row = usage_json(&u);
	if (!row || json_object_set_new(row, "sandboxId", json_string(store_col_text(st, 0))) ||
	    json_array_append_new(list, row)) {
		json_decref(row);
		return -ENOMEM;
	}
	return 0;
}

int store_usage(struct store *s, const char *org, int64_t from_ms, int64_t to_ms, json_t **out)
{
	struct usage total = {0};
	char from[STORE_ISO_LEN], to[STORE_ISO_LEN];
	json_t *list, *tot;
	sqlite3_stmt *st;
	int ret;

	*out = NULL;
	if (to_ms < from_ms)
		return -EINVAL;
	list = json_array();
	if (!list)
		return -ENOMEM;
	store_lock(s);
	ret = store_prepare(s, usage_sql, &st);
	if (ret == 0) {
		ret = store_bind(st, "iiit", from_ms, to_ms, store_clock(s), org);
		while (ret == 0 && (ret = store_step(s, st)) == 1)
			ret = usage_row(st, list, &total);
		store_reset(st);
	}
	store_unlock(s);
	tot = ret == 0 ? usage_json(&total) : NULL;
	if (tot &&
	    json_object_set_new(tot, "sandboxes", json_integer((json_int_t)json_array_size(list))))
		ret = -ENOMEM;
	if (ret == 0 && tot)
		*out = json_pack("{s:s, s:s, s:O, s:O}", "from", store_iso8601(from_ms, from), "to",
		                 store_iso8601(to_ms, to), "sandboxes", list, "total", tot);
	json_decref(list);
	json_decref(tot);
	return ret < 0 ? ret : *out ? 0 : -ENOMEM;
}
