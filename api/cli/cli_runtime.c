// SPDX-License-Identifier: MIT
/*
 * husk runtime import / delete: an OCI or Docker image made a runtime
 * (husk's own routes, API.md §6). import begins the import, uploads the
 * archive in parts (a folder is sent as its tar, made by tar(1)), then asks
 * huskd to convert it and prints each step as it comes.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* Parts of the upload: well under huskd's body limit, so each one goes in one request. */
#define PART (16u << 20)

static size_t read_full(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* tar of an OCI layout folder on *fd, written by tar(1) as pid. */
static int tar_folder(const char *dir, int *fd, pid_t *pid)
{
	char *const argv[] = {"tar", "-C", (char *)dir, "-cf", "-", ".", NULL};
	posix_spawn_file_actions_t fa;
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (posix_spawn_file_actions_init(&fa)) {
		close(p[0]);
		close(p[1]);
		return -ENOMEM;
	}
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	rc = posix_spawnp(pid, "tar", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc) {
		close(p[0]);
		return -rc;
	}
	*fd = p[0];
	return 0;
}

static int upload(struct cli *c, const char *id, int fd, uint64_t total)
{
	char *buf = malloc(PART), sz[32], of[32];
	struct cli_resp resp;
	uint64_t off = 0;
	size_t n;
	int rc = 0;

	if (!buf) {
		fprintf(stderr, "husk: out of memory\n");
		return 1;
	}
	while (!rc && !cli_interrupted && (n = read_full(fd, buf, PART)) > 0) {
		struct sbuf t = {0};

		sandbox_path(&t, "/sandbox/runtimes/import", id, NULL);
		snprintf(sz, sizeof(sz), "%llu", (unsigned long long)off);
		sb_query(&t, "offset", sz);
		memset(&resp, 0, sizeof(resp));
		rc = cli_raw(c, "PUT", t.s, "application/octet-stream", buf, n, NULL, NULL, 300000,
		             &resp);
		cli_resp_free(&resp);
		sb_free(&t);
		off += n;
		if (!rc)
			fprintf(stderr, "husk: uploaded %s%s%s\n",
			        out_bytes((double)off, sz, sizeof(sz)), total ? " of " : "",
			        total ? out_bytes((double)total, of, sizeof(of)) : "");
	}
	free(buf);
	if (!rc && !off) {
		fprintf(stderr, "husk: the image is empty\n");
		rc = 1;
	}
	return cli_interrupted ? 130 : rc;
}

struct progress {
	struct cli *c;
	struct sbuf line;
	json_t *runtime;
	char error[600];
};

static void progress_line(struct progress *p, const char *text)
{
	json_t *e = json_loads(text, 0, NULL), *err;

	if (!e)
		return;
	if (json_integer_value(json_object_get(e, "step")))
		fprintf(stderr, "husk: [%lld/%lld] %s\n",
		        (long long)json_integer_value(json_object_get(e, "step")),
		        (long long)json_integer_value(json_object_get(e, "of")),
		        json_string_value(json_object_get(e, "message")));
	else if (json_is_string(json_object_get(e, "detail")))
		fprintf(stderr, "husk:       %s\n",
		        json_string_value(json_object_get(e, "detail")));
	if (json_is_object(json_object_get(e, "runtime")))
		p->runtime = json_incref(json_object_get(e, "runtime"));
	err = json_object_get(e, "error");
	if (json_is_object(err))
		snprintf(p->error, sizeof(p->error), "%s",
		         json_string_value(json_object_get(err, "message")));
	json_decref(e);
}

static int progress_in(void *arg, const void *data, size_t len)
{
	struct progress *p = arg;
	char *nl;

	sb_append(&p->line, data, len);
	while (p->line.s && (nl = strchr(p->line.s, '\n'))) {
		*nl = '\0';
		progress_line(p, p->line.s);
		p->line.len -= (size_t)(nl + 1 - p->line.s);
		memmove(p->line.s, nl + 1, p->line.len + 1);
	}
	return 0;
}

static int convert(struct cli *c, const char *id)
{
	struct progress p = {.c = c};
	struct cli_resp resp = {0};
	struct sbuf t = {0};
	int rc;

	sandbox_path(&t, "/sandbox/runtimes/import", id, "/run");
	rc = cli_raw(c, "POST", t.s, NULL, NULL, 0, progress_in, &p, 0, &resp);
	sb_free(&t);
	cli_resp_free(&resp);
	if (!rc && p.runtime) {
		if (c->json)
			out_json(p.runtime);
		else
			printf("%s\n", json_string_value(json_object_get(p.runtime, "name")));
	} else if (!rc) {
		fprintf(stderr, "husk: the import failed: %s\n",
		        p.error[0] ? p.error : "huskd ended it without a word");
		rc = 1;
	}
	json_decref(p.runtime);
	sb_free(&p.line);
	return rc;
}

int runtime_import(struct cli *c, int argc, char **argv)
{
	const struct opt opts[] = {{NULL, 0, 0, NULL}};
	json_t *body, *env = NULL;
	struct args a;
	struct stat st;
	int fd = -1, rc;
	pid_t tar = -1;
	const char *src;
	char id[64] = "";

	c->usage = "husk runtime import NAME SOURCE [--json]\n"
		   "Makes an OCI or Docker image a runtime named NAME (NAME:TAG; :latest if no "
		   "tag).\nSOURCE: an OCI image layout folder, a tar of one, the output of docker "
		   "save,\nor docker://REGISTRY/IMAGE:TAG where huskd can reach a registry.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "NAME SOURCE", &a));
	src = a.pos[1];
	body = json_pack("{s:s}", "name", a.pos[0]);
	if (!strncmp(src, "docker://", 9)) {
		json_object_set_new(body, "source", json_string(src));
	} else if (stat(src, &st) < 0) {
		json_decref(body);
		return args_bad(c, "%s: %s", src, strerror(errno));
	} else if (S_ISDIR(st.st_mode)) {
		if (rc = tar_folder(src, &fd, &tar), rc) {
			json_decref(body);
			fprintf(stderr, "husk: cannot run tar for %s: %s\n", src, strerror(-rc));
			return 1;
		}
	} else if ((fd = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
		json_decref(body);
		return args_bad(c, "%s: %s", src, strerror(errno));
	} else {
		json_object_set_new(body, "size", json_integer((json_int_t)st.st_size));
	}
	rc = cli_call(c, "POST", "/sandbox/runtimes/import", body, &env);
	json_decref(body);
	if (!rc)
		snprintf(id, sizeof(id), "%s",
		         json_string_value(
				 json_object_get(json_object_get(env, "data"), "importId")));
	json_decref(env);
	if (!rc && fd >= 0)
		rc = upload(c, id, fd, S_ISDIR(st.st_mode) ? 0 : (uint64_t)st.st_size);
	if (fd >= 0)
		close(fd);
	if (tar > 0) {
		int status;

		while (waitpid(tar, &status, 0) < 0 && errno == EINTR)
			;
		if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
			fprintf(stderr, "husk: tar could not read all of %s\n", src);
			rc = 1;
		}
	}
	return rc ? rc : convert(c, id);
}

int runtime_delete(struct cli *c, int argc, char **argv)
{
	c->usage = "husk runtime delete NAME|ID [--confirm] [--json]\n"
		   "Deletes an imported runtime no sandbox or snapshot uses.\n";
	return delete_one(c, argc, argv, "/sandbox/runtimes", "runtime");
}
