// SPDX-License-Identifier: MIT
/*
 * Files nobody will ask for again, so the state folder does not grow
 * without end: output streams past their age (cfg.stream_max_age; a
 * destroyed sandbox's last command may still be read until then), and
 * snapshot builds that were begun and never finalized. At start and then
 * hourly.
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

#define REAP_EVERY_MS (3600 * 1000)
#define STREAM_MAX_AGE_S (7 * 24 * 3600)
/* A build's finalize is bound to well under this (its setup: 30 min). */
#define BUILD_MAX_AGE_S (24 * 3600)

/* An id as huskd makes them: a prefix, '_', lowercase letters and digits. */
static bool id_like(const char *s)
{
	size_t n = strlen(s);

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

void sbx_reap(struct sbx_mgr *m)
{
	time_t now = time(NULL);
	uint64_t age = m->cfg.stream_max_age ? m->cfg.stream_max_age : STREAM_MAX_AGE_S;
	char builds[4200];
	unsigned s, b;

	snprintf(builds, sizeof(builds), "%s/builds", m->cfg.state);
	s = sweep(m->streams, now - (time_t)age, rm_file);
	b = sweep(builds, now - BUILD_MAX_AGE_S, rm_build);
	if (s || b)
		log_info(NULL,
		         "removed %u output streams older than %llu s and %u abandoned builds", s,
		         (unsigned long long)age, b);
}

static void reap_tick(uv_timer_t *t)
{
	sbx_reap(t->data);
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
