// SPDX-License-Identifier: MIT
/*
 * Files nobody will ask for again, so the state folder does not grow
 * without end: the output streams of a deleted sandbox once an hour has
 * passed (a client may still be reading its last command), any stream past
 * its age (cfg.stream_max_age), and snapshot builds that were begun and
 * never finalized; and warm VMMs of a snapshot no create took for an hour.
 * At start and then every quarter of an hour.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx_int.h"
#include "sbx_pool.h"

#define REAP_EVERY_MS (900 * 1000)
#define STREAM_MAX_AGE_S (7 * 24 * 3600)
#define STREAM_GRACE_MS (3600 * 1000)
/* A build's finalize is bound to well under this (its setup: 30 min). */
#define BUILD_MAX_AGE_S (24 * 3600)

/* An id as huskd makes them: a prefix, '_', lowercase letters and digits. */
static bool id_like(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 4 && n < STORE_ID_LEN && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* Entries of dir last changed before cutoff, removed by rm (a file or a build folder). */
static unsigned sweep(const char *dir, time_t cutoff, void (*rm)(const char *path))
{
	char path[4200];
	struct dirent *e;
	struct stat st;
	unsigned n = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d))) {
		if (!id_like(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) == 0 && st.st_mtime < cutoff) {
			rm(path);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static void rm_file(const char *path)
{
	unlink(path);
}

/* A build's folder holds its request and its context, nothing deeper. */
static void rm_build(const char *path)
{
	sbx_remove_dir(path);
}

/*
 * The streams of sandboxes deleted since the last sweep, up to an hour ago.
 * The first sweep after a start looks at every deleted sandbox.
 */
static unsigned sweep_deleted(struct sbx_mgr *m, time_t now)
{
	int64_t to = (int64_t)now * 1000 - STREAM_GRACE_MS;
	char path[4200];
	json_t *ids, *id;
	unsigned n = 0;
	size_t i;
	int rc;

	if (to <= m->reaped_to_ms)
		return 0;
	rc = store_streams_of_deleted(m->store, m->reaped_to_ms, to, &ids);
	if (rc) {
		log_warn(NULL, "cannot list the streams of deleted sandboxes: %s", strerror(-rc));
		return 0;
	}
	json_array_foreach(ids, i, id)
	{
		if (!id_like(json_string_value(id)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", m->streams, json_string_value(id));
		n += unlink(path) == 0;
	}
	json_decref(ids);
	m->reaped_to_ms = to;
	return n;
}

void sbx_reap(struct sbx_mgr *m, time_t now)
{
	uint64_t age = m->cfg.stream_max_age ? m->cfg.stream_max_age : STREAM_MAX_AGE_S;
	char builds[4200];
	unsigned d, s, b;

	snprintf(builds, sizeof(builds), "%s/builds", m->cfg.state);
	sbx_import_reap(m);
	sbx_pool_expire(m, now);
	d = sweep_deleted(m, now);
	s = sweep(m->streams, now - (time_t)age, rm_file);
	b = sweep(builds, now - BUILD_MAX_AGE_S, rm_build);
	if (d || s || b)
		log_info(NULL,
		         "removed %u output streams of deleted sandboxes, %u older than %llu s and "
		         "%u abandoned builds",
		         d, s, (unsigned long long)age, b);
}

static void reap_tick(uv_timer_t *t)
{
	sbx_reap(t->data, time(NULL));
}

static void reap_closed(uv_handle_t *h)
{
	free(h);
}

int sbx_reap_start(struct sbx_mgr *m)
{
	m->reaper = calloc(1, sizeof(*m->reaper));
	if (!m->reaper || uv_timer_init(m->loop, m->reaper)) {
		free(m->reaper);
		m->reaper = NULL;
		return -ENOMEM;
	}
	m->reaper->data = m;
	/* Housekeeping alone must not keep huskd's loop from ending. */
	uv_unref((uv_handle_t *)m->reaper);
	return uv_timer_start(m->reaper, reap_tick, 0, REAP_EVERY_MS);
}

void sbx_reap_stop(struct sbx_mgr *m)
{
	if (!m->reaper)
		return;
	uv_close((uv_handle_t *)m->reaper, reap_closed);
	m->reaper = NULL;
}
