// SPDX-License-Identifier: MIT
/*
 * husk fs: files in a sandbox (API.md §5.3). ls, mkdir, rm, rmdir,
 * download and upload are one request each; cp is in cli_fs_cp.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

int fs_tar(char *const argv[], int in_fd, int out_fd)
{
	posix_spawn_file_actions_t fa;
	int rc, status;
	pid_t pid;

	if (posix_spawn_file_actions_init(&fa))
		return -ENOMEM;
	if (in_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int fs_ls(struct cli *c, int argc, char **argv)
{
	bool lng = false;
	const struct opt opts[] = {{"long", 'l', OPT_FLAG, &lng}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	json_t *env = NULL, *files, *f;
	struct args a;
	size_t i;
	int rc;

	c->usage = "husk fs ls ID [PATH] [-l] [--json]\n"
		   "Lists one directory (default: the workspace); -l with mode, size and time.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID [PATH]", &a));
	sandbox_path(&t, "/fs/list", a.pos[0], NULL);
	sb_query(&t, "path", a.npos > 1 ? a.pos[1] : ".");
	rc = cli_call(c, "GET", t.s, NULL, &env);
	files = json_object_get(json_object_get(env, "data"), "files");
	if (!rc && c->json)
		out_data(env);
	else if (!rc && !json_array_size(files))
		printf("(empty)\n");
	json_array_foreach(c->json || rc ? NULL : files, i, f)
	{
		const char *name = json_string_value(json_object_get(f, "path"));
		bool dir = json_is_true(json_object_get(f, "isDir"));
		char size[32], mode[16], when[64];

		if (lng)
			printf("%s %10s  %s  ", out_cell(f, "mode", mode, sizeof(mode)),
			       out_cell(f, "size", size, sizeof(size)),
			       out_cell(f, "modTime", when, sizeof(when)));
		printf("%s%s\n", name ? name : "?", dir ? "/" : "");
	}
	json_decref(env);
	sb_free(&t);
	return rc;
}

/* mkdir, rm, rmdir: POST /fs/OP/ID {path[, recursive]}. */
static int fs_simple(struct cli *c, int argc, char **argv, const char *op, const char *flag)
{
	bool recursive = false;
	const struct opt opts[] = {{flag ? flag : "", flag ? flag[0] : 0, OPT_FLAG, &recursive},
	                           {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	json_t *body, *env = NULL;
	struct args a;
	int rc;

	ARGS_OR_RETURN(args_parse(c, argc, argv, flag ? opts : NULL, "ID PATH", &a));
	body = json_pack("{ss}", "path", a.pos[1]);
	if (!body)
		return args_bad(c, "PATH must be valid UTF-8");
	if (flag)
		json_object_set_new(body, "recursive", json_boolean(recursive));
	sb_printf(&t, "/fs/%s", op);
	sb_seg(&t, a.pos[0]);
	rc = cli_call(c, "POST", t.s, body, &env);
	if (!rc && c->json)
		out_data(env);
	else if (!rc && json_is_false(json_object_get(env, "found")))
		fprintf(stderr, "husk: %s was not there\n", a.pos[1]);
	json_decref(body);
	json_decref(env);
	sb_free(&t);
	return rc;
}

static int fs_mkdir(struct cli *c, int argc, char **argv)
{
	c->usage = "husk fs mkdir ID PATH [-p] [--json]\n-p: make missing parents too.\n";
	return fs_simple(c, argc, argv, "mkdir", "parents");
}

static int fs_rm(struct cli *c, int argc, char **argv)
{
	c->usage = "husk fs rm ID PATH [--json]\nRemoves a file (a missing one is not an "
		   "error).\n";
	return fs_simple(c, argc, argv, "rm", NULL);
}

static int fs_rmdir(struct cli *c, int argc, char **argv)
{
	c->usage = "husk fs rmdir ID PATH [-r] [--json]\n-r: with everything in it.\n";
	return fs_simple(c, argc, argv, "rmdir", "recursive");
}

int fs_write_fd(void *arg, const void *data, size_t len)
{
	int fd = *(int *)arg;
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

const char *volatile cli_partial_file;

int fs_get_to_file(struct cli *c, const char *target, const char *out, size_t *bytes)
{
	char *tmp = NULL;
	struct cli_resp r;
	int fd, rc;
	off_t size;

	/* Into a temporary file beside out, renamed at the end: a failure leaves no half file. */
	if (asprintf(&tmp, "%s.husk-XXXXXX", out) < 0)
		return 1;
	fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "husk: cannot write %s: %s\n", out, strerror(errno));
		free(tmp);
		return 1;
	}
	cli_partial_file = tmp;
	rc = cli_raw(c, "GET", target, NULL, NULL, 0, fs_write_fd, &fd, 330000, &r);
	cli_partial_file = NULL;
	size = lseek(fd, 0, SEEK_END);
	if (!rc && (fchmod(fd, 0644) || close(fd) || rename(tmp, out))) {
		fprintf(stderr, "husk: cannot write %s: %s\n", out, strerror(errno));
		rc = 1;
	} else if (rc) {
		close(fd);
	}
	if (rc)
		unlink(tmp);
	else if (bytes)
		*bytes = size > 0 ? (size_t)size : 0;
	cli_resp_free(&r);
	free(tmp);
	return rc;
}

static int fs_download(struct cli *c, int argc, char **argv)
{
	static const char *const formats[] = {"tar.gz", "zip", NULL};
	const char *path = NULL, *format = NULL;
	const struct opt opts[] = {
		{"path", 0, OPT_STR, &path}, {"format", 0, OPT_STR, &format}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	size_t bytes = 0;
	int rc;

	c->usage = "husk fs download ID OUTPUT [--path DIR] [--format tar.gz|zip] [--json]\n"
		   "Saves a directory of the sandbox (default: the workspace) as an archive.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID OUTPUT", &a));
	if (format && args_enum(c, "format", format, formats))
		return EXIT_USAGE;
	sandbox_path(&t, "/fs/download", a.pos[0], NULL);
	sb_query(&t, "path", path);
	sb_query(&t, "format", format);
	rc = fs_get_to_file(c, t.s, a.pos[1], &bytes);
	if (!rc && c->json) {
		json_t *j = json_pack("{sssI}", "output", a.pos[1], "bytes", (json_int_t)bytes);

		out_json(j);
		json_decref(j);
	} else if (!rc) {
		printf("%s: %zu bytes\n", a.pos[1], bytes);
	}
	sb_free(&t);
	return rc;
}

static int fs_upload(struct cli *c, int argc, char **argv)
{
	static const char *const formats[] = {"tar.gz", "zip", NULL};
	const char *path = NULL, *format = NULL;
	const struct opt opts[] = {
		{"path", 0, OPT_STR, &path}, {"format", 0, OPT_STR, &format}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct cli_resp r;
	struct args a;
	char *data;
	size_t len;
	int rc;

	c->usage = "husk fs upload ID ARCHIVE [--path DIR] [--format tar.gz|zip] [--json]\n"
		   "Extracts a local archive into a directory of the sandbox (default: the "
		   "workspace).\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID ARCHIVE", &a));
	if (format && args_enum(c, "format", format, formats))
		return EXIT_USAGE;
	rc = cli_read_file(a.pos[1], &data, &len);
	if (rc)
		return args_bad(c, "cannot read %s: %s", a.pos[1], strerror(-rc));
	sandbox_path(&t, "/fs/upload", a.pos[0], NULL);
	sb_query(&t, "path", path);
	sb_query(&t, "format", format);
	rc = cli_raw(c, "POST", t.s, "application/octet-stream", data, len, NULL, NULL, 330000, &r);
	if (!rc && c->json) {
		json_t *j = json_pack("{sssI}", "archive", a.pos[1], "bytes", (json_int_t)len);

		out_json(j);
		json_decref(j);
	} else if (!rc) {
		printf("uploaded %s (%zu bytes)\n", a.pos[1], len);
	}
	cli_resp_free(&r);
	free(data);
	sb_free(&t);
	return rc;
}

int fs_main(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"cp|copy", fs_cp,
	         "copy to or from a sandbox: cp [-r] [--strict] SRC DST (ID:/path)"},
		{"ls|list", fs_ls, "list a directory: ls ID [PATH] [-l]"},
		{"mkdir", fs_mkdir, "make a directory: mkdir ID PATH [-p]"},
		{"rm", fs_rm, "remove a file: rm ID PATH"},
		{"rmdir", fs_rmdir, "remove a directory: rmdir ID PATH [-r]"},
		{"download|dl", fs_download,
	         "a directory as an archive: download ID OUT [--path P]"},
		{"upload|ul", fs_upload, "extract an archive: upload ID ARCHIVE [--path P]"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "fs", table, argc, argv);
}
