// SPDX-License-Identifier: MIT
/*
 * husk fs cp: a file or (with -r) a directory to or from a sandbox, the
 * sandbox side written ID:/path. Like the reference CLI, missing parent
 * directories are made (and reported in --json's directoriesCreated)
 * unless --strict. A directory travels as a tar.gz (POST /fs/upload, GET
 * /fs/download), made and unpacked here by the system's tar (GNU's or
 * busybox's): no archive library is among our dependencies, and tar already
 * strips a leading '/' and refuses '..' in member names.
 */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"

struct cp {
	struct cli *c;
	const char *id; /* the sandbox */
	bool strict;
	json_t *created; /* directoriesCreated */
	size_t bytes, files;
};

/* The directory part of p ("." for a bare name, "/" at the top). */
static void parent_of(const char *p, char *out, size_t len)
{
	size_t n = strlen(p);
	const char *slash;

	while (n > 1 && p[n - 1] == '/')
		n--;
	snprintf(out, len, "%.*s", (int)n, p);
	slash = strrchr(out, '/');
	if (!slash)
		snprintf(out, len, ".");
	else if (slash == out)
		out[1] = '\0';
	else
		out[slash - out] = '\0';
}

static const char *base_of(const char *p)
{
	static char buf[4096];
	size_t n = strlen(p);
	const char *s;

	while (n > 1 && p[n - 1] == '/')
		n--;
	snprintf(buf, sizeof(buf), "%.*s", (int)n, p);
	s = strrchr(buf, '/');
	return s ? s + 1 : buf;
}

static char *join(const char *dir, const char *name)
{
	char *s;
	size_t n = strlen(dir);

	if (asprintf(&s, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		exit(1);
	return s;
}

/* What path is in the sandbox: 1 a directory, 0 missing, 2 something else, -1 error (printed). */
static int remote_kind(struct cp *cp, const char *path)
{
	struct cli_req rq = {.method = "GET", .key = cp->c->key, .timeout_ms = 330000};
	struct sbuf t = {0};
	struct cli_resp r;
	int rc;

	sandbox_path(&t, "/fs/list", cp->id, NULL);
	sb_query(&t, "path", path);
	rq.target = t.s;
	rc = cli_http_do(&cp->c->url, &rq, &r);
	sb_free(&t);
	if (rc < 0) {
		cli_print_failure(cp->c, &r);
		rc = -1;
	} else if (r.status == 404 && r.body && strstr(r.body, "SANDBOX_NOT_FOUND")) {
		cli_print_error(&r); /* the sandbox is missing, not the directory */
		rc = -1;
	} else if (r.status == 200 || r.status == 404 || r.status == 400) {
		rc = r.status == 200 ? 1 : r.status == 404 ? 0 : 2;
	} else {
		cli_print_error(&r);
		rc = -1;
	}
	cli_resp_free(&r);
	return rc;
}

/* Makes the missing directories of dir (and dir itself if self) in the sandbox: 0 or 1. */
static int remote_parents(struct cp *cp, const char *path, bool self)
{
	char dir[4096], up[4096];
	json_t *missing = json_array(), *body, *env = NULL;
	struct sbuf t = {0};
	int rc = 0, k;

	if (self)
		snprintf(dir, sizeof(dir), "%s", path);
	else
		parent_of(path, dir, sizeof(dir));
	for (char *d = dir; strcmp(d, "/") && strcmp(d, ".");) {
		k = remote_kind(cp, d);
		if (k < 0 || k == 2) {
			if (k == 2)
				fprintf(stderr, "husk: %s:%s is not a directory\n", cp->id, d);
			json_decref(missing);
			return 1;
		}
		if (k == 1)
			break;
		json_array_insert_new(missing, 0, json_string(d));
		parent_of(d, up, sizeof(up));
		memmove(dir, up, strlen(up) + 1);
	}
	k = (int)json_array_size(missing) - (self ? 1 : 0);
	if (cp->strict && k > 0) {
		fprintf(stderr, "husk: %s:%s does not exist (--strict makes no directories)\n",
		        cp->id, json_string_value(json_array_get(missing, 0)));
		json_decref(missing);
		return 1;
	}
	if (json_array_size(missing)) {
		body = json_pack("{sOsb}", "path",
		                 json_array_get(missing, json_array_size(missing) - 1), "recursive",
		                 1);
		sandbox_path(&t, "/fs/mkdir", cp->id, NULL);
		rc = cli_call(cp->c, "POST", t.s, body, &env);
		json_decref(body);
		json_decref(env);
		sb_free(&t);
	}
	if (!rc)
		json_array_extend(cp->created, missing);
	json_decref(missing);
	return rc;
}

/* The same for a local path. */
static int local_parents(struct cp *cp, const char *path, bool self)
{
	char dir[4096], up[4096];
	json_t *missing = json_array(), *d;
	struct stat st;
	size_t i;
	int k;

	if (self)
		snprintf(dir, sizeof(dir), "%s", path);
	else
		parent_of(path, dir, sizeof(dir));
	while (strcmp(dir, "/") && strcmp(dir, ".") && stat(dir, &st) < 0 && errno == ENOENT) {
		json_array_insert_new(missing, 0, json_string(dir));
		parent_of(dir, up, sizeof(up));
		memmove(dir, up, strlen(up) + 1);
	}
	k = (int)json_array_size(missing) - (self ? 1 : 0);
	if (cp->strict && k > 0) {
		fprintf(stderr, "husk: %s does not exist (--strict makes no directories)\n",
		        json_string_value(json_array_get(missing, 0)));
		json_decref(missing);
		return 1;
	}
	json_array_foreach(missing, i, d)
	{
		if (mkdir(json_string_value(d), 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "husk: cannot make %s: %s\n", json_string_value(d),
			        strerror(errno));
			json_decref(missing);
			return 1;
		}
	}
	json_array_extend(cp->created, missing);
	json_decref(missing);
	return 0;
}

static int upload_file(struct cp *cp, const char *src, const char *dst, char **shown)
{
	char *target, *data, *b64;
	size_t len;
	json_t *body, *env = NULL;
	struct sbuf t = {0};
	int rc = cli_read_file(src, &data, &len), k;

	if (rc)
		return args_bad(cp->c, "cannot read %s: %s%s", src, strerror(-rc),
		                rc == -EISDIR ? " (copy directories with -r)" : "");
	k = !*dst || dst[strlen(dst) - 1] == '/' || !strcmp(dst, ".") ? 1 : remote_kind(cp, dst);
	target = k == 1 ? join(*dst ? dst : ".", base_of(src)) : strdup(dst);
	rc = k < 0 ? 1 : remote_parents(cp, target, false);
	if (!rc) {
		b64 = cli_base64(data, len);
		body = json_pack("{s[{ssss}]}", "files", "path", target, "content", b64);
		free(b64);
		rc = body ? 0 : args_bad(cp->c, "the path must be valid UTF-8");
		sandbox_path(&t, "/fs", cp->id, NULL);
		if (!rc)
			rc = cli_call(cp->c, "POST", t.s, body, &env);
		json_decref(body);
	}
	cp->bytes = len;
	cp->files = 1;
	free(data);
	json_decref(env);
	sb_free(&t);
	*shown = target;
	return rc;
}

static struct cp *walk_cp;

static int walk_count(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		walk_cp->files++;
		walk_cp->bytes += (size_t)st->st_size;
	}
	return 0;
}

/* The file behind fd, whole, into memory (malloc'd). */
static char *slurp_fd(int fd, size_t *len)
{
	off_t n = lseek(fd, 0, SEEK_END);
	char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;

	if (buf && pread(fd, buf, (size_t)n, 0) != n) {
		free(buf);
		buf = NULL;
	}
	*len = buf ? (size_t)n : 0;
	if (buf)
		buf[n] = '\0';
	return buf;
}

static int upload_dir(struct cp *cp, const char *src, const char *dst)
{
	char *argv[] = {"tar", "-czf", "-", "-C", (char *)src, ".", NULL}, *data = NULL;
	int fd = memfd_create("husk-cp", MFD_CLOEXEC), rc;
	struct sbuf t = {0};
	struct cli_resp r;
	size_t len = 0;

	rc = fd < 0 ? -errno : remote_parents(cp, dst, true) ? -EAGAIN : fs_tar(argv, -1, fd);
	if (rc == -EAGAIN) {
		close(fd);
		return 1;
	}
	if (rc || !(data = slurp_fd(fd, &len))) {
		fprintf(stderr, "husk: cannot pack %s with tar (%s)\n", src,
		        rc < 0 ? strerror(-rc) : "it failed");
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	walk_cp = cp;
	nftw(src, walk_count, 16, FTW_PHYS);
	sandbox_path(&t, "/fs/upload", cp->id, NULL);
	sb_query(&t, "path", *dst ? dst : ".");
	rc = cli_raw(cp->c, "POST", t.s, "application/octet-stream", data, len, NULL, NULL, 330000,
	             &r);
	cli_resp_free(&r);
	free(data);
	sb_free(&t);
	return rc;
}

static int download_file(struct cp *cp, const char *src, const char *dst, char **shown)
{
	struct stat st;
	struct sbuf t = {0};
	char *target;
	int rc;

	if (!*src)
		return args_bad(cp->c, "give the file to copy: %s:/path (directories with -r)",
		                cp->id);
	target = (dst[strlen(dst) - 1] == '/' || (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)))
	                 ? join(dst, base_of(src))
	                 : strdup(dst);
	rc = local_parents(cp, target, false);
	sandbox_path(&t, "/fs", cp->id, NULL);
	sb_query(&t, "path", src);
	if (!rc)
		rc = fs_get_to_file(cp->c, t.s, target, &cp->bytes);
	cp->files = !rc;
	sb_free(&t);
	*shown = target;
	return rc;
}

static int download_dir(struct cp *cp, const char *src, const char *dst)
{
	char *list_argv[] = {"tar", "-tzvf", "-", NULL};
	char *x_argv[] = {"tar", "-xzf", "-", "-C", (char *)dst, NULL}, *list, *save = NULL;
	int in = memfd_create("husk-cp", MFD_CLOEXEC), out = memfd_create("husk-cp", MFD_CLOEXEC);
	struct sbuf t = {0};
	struct cli_resp r;
	size_t len;
	int rc = in < 0 || out < 0 ? 1 : local_parents(cp, dst, true);

	sandbox_path(&t, "/fs/download", cp->id, NULL);
	sb_query(&t, "path", *src ? src : ".");
	sb_query(&t, "format", "tar.gz");
	if (!rc)
		rc = cli_raw(cp->c, "GET", t.s, NULL, NULL, 0, fs_write_fd, &in, 330000, &r);
	if (!rc) {
		cli_resp_free(&r);
		/* First the listing, for the counts (GNU and busybox tar print it alike). */
		rc = lseek(in, 0, SEEK_SET) || fs_tar(list_argv, in, out) ||
		     lseek(in, 0, SEEK_SET) || fs_tar(x_argv, in, -1);
		if (rc)
			fprintf(stderr, "husk: tar could not unpack the archive into %s\n", dst);
	}
	/* "-rw-r--r-- owner/group SIZE date time name" per regular file. */
	list = rc ? NULL : slurp_fd(out, &len);
	for (char *l = list ? strtok_r(list, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		char perm[16], owner[256];
		unsigned long long size;

		if (l[0] == '-' && sscanf(l, "%15s %255s %llu", perm, owner, &size) == 3) {
			cp->files++;
			cp->bytes += size;
		}
	}
	free(list);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	sb_free(&t);
	return rc ? 1 : 0;
}

/* "sbx_…:/path" is the sandbox side (sandbox ids start with sbx_, API.md §4.3). */
static bool remote_side(const char *s, char *id, size_t idlen, const char **path)
{
	const char *colon = strchr(s, ':');

	if (!colon || strncmp(s, "sbx_", 4) || memchr(s, '/', (size_t)(colon - s)) ||
	    (size_t)(colon - s) >= idlen)
		return false;
	snprintf(id, idlen, "%.*s", (int)(colon - s), s);
	*path = colon + 1;
	return true;
}

static void cp_timed_out(int sig)
{
	static const char msg[] = "\nhusk: fs cp did not finish within its --timeout; files "
				  "copied before it are in place, the one under way is not\n";

	(void)sig;
	if (cli_partial_file)
		unlink(cli_partial_file);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(124);
	_exit(124);
}

/* --timeout: the whole copy ends (exit 124, as timeout(1)) once ms have passed. */
static void cp_deadline(long long ms)
{
	struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000}};
	struct sigaction sa = {.sa_handler = cp_timed_out};

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

int fs_cp(struct cli *c, int argc, char **argv)
{
	bool recursive = false, strict = false;
	const char *timeout = NULL;
	long long ms = 0;
	const struct opt opts[] = {{"recursive", 'r', OPT_FLAG, &recursive},
	                           {"strict", 0, OPT_FLAG, &strict},
	                           {"timeout", 0, OPT_STR, &timeout},
	                           {NULL, 0, 0, NULL}};
	struct cp cp = {.c = c, .created = json_array()};
	const char *rsrc, *rdst;
	char sid[128], did[128], *shown = NULL;
	bool up, down;
	struct stat st;
	struct args a;
	int rc;

	c->usage = "husk fs cp [-r] [--strict] [--timeout 5m] [--json] SRC DST\n"
		   "One side is ID:/path in the sandbox, the other a local path. -r copies a\n"
		   "directory's contents into DST. Missing parents of DST are made unless "
		   "--strict.\n"
		   "--timeout bounds the whole copy (exit 124 when it runs out).\n";
	rc = args_parse(c, argc, argv, opts, "SRC DST", &a);
	if (!rc && timeout && !(rc = args_duration_ms(c, "timeout", timeout, &ms)) && ms <= 0)
		rc = args_bad(c, "--timeout '%s': give a duration longer than 0, e.g. 5m", timeout);
	if (!rc && ms > 0)
		cp_deadline(ms);
	up = !rc && remote_side(a.pos[1], did, sizeof(did), &rdst);
	down = !rc && remote_side(a.pos[0], sid, sizeof(sid), &rsrc);
	if (!rc && up == down)
		rc = args_bad(c, "exactly one of SRC and DST must be in a sandbox (sbx_ID:/path)");
	if (!rc && !*(up ? a.pos[0] : a.pos[1]))
		rc = args_bad(c, "the local path is empty");
	cp.id = up ? did : sid;
	cp.strict = strict;
	if (!rc && up && recursive && stat(a.pos[0], &st) == 0 && S_ISDIR(st.st_mode))
		rc = upload_dir(&cp, a.pos[0], rdst);
	else if (!rc && up)
		rc = upload_file(&cp, a.pos[0], rdst, &shown);
	else if (!rc && recursive)
		rc = download_dir(&cp, rsrc, a.pos[1]);
	else if (!rc)
		rc = download_file(&cp, rsrc, a.pos[1], &shown);
	if (!rc && c->json) {
		json_t *j = json_pack("{sssssIsIsO}", "source", a.pos[0], "destination", a.pos[1],
		                      "bytesTransferred", (json_int_t)cp.bytes, "filesTransferred",
		                      (json_int_t)cp.files, "directoriesCreated", cp.created);

		out_json(j);
		json_decref(j);
	} else if (!rc) {
		printf("%s -> %s%s%s: %zu file%s, %zu bytes\n", a.pos[0], up ? cp.id : "",
		       up ? ":" : "",
		       shown ? shown
		       : up  ? rdst
		             : a.pos[1],
		       cp.files, cp.files == 1 ? "" : "s", cp.bytes);
	}
	free(shown);
	json_decref(cp.created);
	return rc < 0 ? 0 : rc;
}
