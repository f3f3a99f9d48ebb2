// SPDX-License-Identifier: MIT
/*
 * Bounded files: a deleted sandbox's streams an hour after it went, streams
 * past their age and builds never finalized at the next sweep.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx_test.h"

static void touch(const char *path, time_t when, bool dir)
{
	struct timespec t[2] = {{.tv_sec = when}, {.tv_sec = when}};
	int fd;

	if (dir) {
		char file[600];

		mkdir(path, 0700);
		snprintf(file, sizeof(file), "%s/request.json", path);
		fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	} else {
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	}
	if (fd >= 0)
		close(fd);
	utimensat(AT_FDCWD, path, t, 0);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

void t_reaping(void)
{
	char err[256], path[600], old_s[600], new_s[600], old_b[600], new_b[600],
		job_path[600] = "";
	const char *id = t_create("{\"runtime\":\"base:latest\"}", NULL, err, sizeof(err));
	json_t *rec = id ? t_exec(id, "[\"echo\",\"kept until deleted\"]") : NULL;
	const char *url = json_string_value(json_object_get(rec, "stdoutStreamUrl"));
	char sandbox[64];
	time_t now = time(NULL);

	snprintf(path, sizeof(path), "%s/state/streams/%s", T.root,
	         url && strrchr(url, '/') ? strrchr(url, '/') + 1 : "none");
	t_check("stream_kept_while_sandbox_lives", url && exists(path), "%s: %s", err,
	        url ? path : "no stdoutStreamUrl");
	json_decref(rec);
	/* A job's output stream goes with the sandbox's too. */
	if (id) {
		json_t *argv = json_pack("[ss]", "echo", "a job's");
		struct t_done d = {0};

		sbx_job_create(T.m, id, argv, NULL, "http://h", t_done_cb, &d);
		json_decref(argv);
		if (t_wait_done(&d) && d.ok) {
			const char *jurl =
				json_string_value(json_object_get(d.data, "stdoutStreamUrl"));

			snprintf(job_path, sizeof(job_path), "%s/state/streams/%s", T.root,
			         jurl && strrchr(jurl, '/') ? strrchr(jurl, '/') + 1 : "none");
		}
		t_check("job_stream_made", exists(job_path), "%s: %s", d.msg, job_path);
		t_done_reset(&d);
		snprintf(sandbox, sizeof(sandbox), "%s", id);
		t_destroy(sandbox);
	}
	/* A client may still read a destroyed sandbox's last command: its output stays a while. */
	sbx_reap(T.m, now + 600);
	t_check("stream_outlives_destroy", url && exists(path), "%s gone", path);
	sbx_reap(T.m, now + 3700);
	t_check("stream_removed_an_hour_after_destroy", url && !exists(path) && !exists(job_path),
	        "%s or %s kept", path, job_path);

	snprintf(old_s, sizeof(old_s), "%s/state/streams/str_reapold", T.root);
	snprintf(new_s, sizeof(new_s), "%s/state/streams/str_reapnew", T.root);
	snprintf(old_b, sizeof(old_b), "%s/state/builds/snp_reapold", T.root);
	snprintf(new_b, sizeof(new_b), "%s/state/builds/snp_reapnew", T.root);
	touch(old_s, now - 8 * 24 * 3600, false);
	touch(new_s, now - 3600, false);
	touch(old_b, now - 2 * 24 * 3600, true);
	touch(new_b, now - 3600, true);
	sbx_reap(T.m, now);
	t_check("old_stream_and_build_reaped", !exists(old_s) && !exists(old_b),
	        "stream %s, build %s", exists(old_s) ? "kept" : "gone",
	        exists(old_b) ? "kept" : "gone");
	t_check("recent_stream_and_build_kept", exists(new_s) && exists(new_b),
	        "stream %s, build %s", exists(new_s) ? "kept" : "gone",
	        exists(new_b) ? "kept" : "gone");
}
