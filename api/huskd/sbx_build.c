// SPDX-License-Identifier: MIT
/*
 * Declarative snapshot builds (API.md §5.8 (38)-(40), `husk snapshot build`):
 * init records the request under state/builds/<id> and answers the id (or
 * "unchanged" when a snapshot of that name:tag has the same content hash);
 * upload keeps the build context (a tar.gz); finalize boots a sandbox of
 * the runtime with the build's env, unpacks the context into its
 * workspace, installs the apt dependencies, and snapshots it (with its
 * memory) as that id, then destroys the build sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentop.h"
#include "handlers.h"
#include "json_resp.h"
#include "sbx_priv.h"

#define CONTEXT "context.tar.gz"
/* A build context passes through one HTTP body. */
#define CONTEXT_MAX (64u << 20)

struct build {
	struct huskd *d;
	struct http_req *r;
	char id[STORE_ID_LEN], sandbox[STORE_ID_LEN];
	char dir[4096];
	json_t *snap; /* what sbx_snapshot_take gets */
	json_t *deps;
	int64_t files;
};

static void build_dir(struct huskd *d, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/builds/%s", d->state, id);
}

static bool id_ok(const char *id)
{
	return !strncmp(id, "snp_", 4) && strlen(id) < STORE_ID_LEN &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(id);
}

/* The build's init request, or NULL after answering 404. */
static json_t *pending(struct huskd *d, struct http_req *r, const char *id, char *dir, size_t len)
{
	char path[4200];
	json_t *req;

	if (id_ok(id)) {
		build_dir(d, id, dir, len);
		snprintf(path, sizeof(path), "%s/request.json", dir);
		req = json_load_file(path, 0, NULL);
		if (req)
			return req;
	}
	api_error(r, 404, "SNAPSHOT_NOT_FOUND",
	          "no build %s is waiting; start one with POST /sandbox/snapshots/build", id);
	return NULL;
}

static void remove_build(const char *dir)
{
	static const char *const files[] = {"request.json", CONTEXT, CONTEXT ".tmp"};
	char path[4200];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
}

HANDLER(h_snap_build_init)
{
	struct huskd *d = ctx;
	json_t *body = body_object(r), *rt = NULL, *old = NULL, *old_priv = NULL;
	const char *runtime, *name, *tag, *hash;
	char id[STORE_ID_LEN], dir[4096], path[4200], ref[200];

	(void)p;
	if (!body)
		return;
	runtime = json_string_value(json_object_get(body, "runtime"));
	if (!runtime || store_runtime_get(d->store, runtime, &rt, NULL)) {
		api_error(r, 400, "BAD_REQUEST",
		          "runtime '%s' is not in the catalog; GET /sandbox/runtimes lists them",
		          runtime ? runtime : "(missing)");
		goto out;
	}
	if (!json_is_string(json_object_get(body, "name"))) {
		time_t now = time(NULL);
		struct tm tm;

		gmtime_r(&now, &tm);
		strftime(ref, sizeof(ref), "build-%Y%m%d-%H%M%S", &tm);
		json_object_set_new(body, "name", json_string(ref));
	}
	if (!json_is_string(json_object_get(body, "tag")))
		json_object_set_new(body, "tag", json_string("latest"));
	name = json_string_value(json_object_get(body, "name"));
	tag = json_string_value(json_object_get(body, "tag"));
	hash = json_string_value(json_object_get(body, "contentHash"));
	snprintf(ref, sizeof(ref), "%s:%s", name, tag);
	if (hash && !json_is_true(json_object_get(body, "force")) &&
	    store_snapshot_find(d->store, ref, &old, &old_priv) == 0 &&
	    json_equal(json_object_get(old_priv, "contentHash"),
	               json_object_get(body, "contentHash"))) {
		api_ok(r, 200,
		       json_pack("{sbsOsOsO}", "unchanged", 1, "existingId",
		                 json_object_get(old, "snapshotId"), "existingName",
		                 json_object_get(old, "name"), "existingTag",
		                 json_object_get(old, "tag")));
		goto out;
	}
	snprintf(path, sizeof(path), "%s/builds", d->state);
	mkdir(path, 0700);
	if (store_new_id("snp_", id)) {
		api_error(r, 503, "UNAVAILABLE", "out of ids");
		goto out;
	}
	build_dir(d, id, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/request.json", dir);
	if (mkdir(dir, 0700) < 0 || json_dump_file(body, path, 0) < 0) {
		api_error(r, 500, "INTERNAL", "cannot record build %s: %s", id, strerror(errno));
		remove_build(dir);
		goto out;
	}
	huskd_log(NULL, "build %s: %s from %s", id, ref, runtime);
	api_ok(r, 200, json_pack("{ss}", "snapshotId", id));
out:
	json_decref(old);
	json_decref(old_priv);
	json_decref(rt);
	json_decref(body);
}

HANDLER(h_snap_build_upload)
{
	struct huskd *d = ctx;
	char dir[4096], tmp[4200], path[4200];
	size_t len = 0;
	const unsigned char *body = http_body(r, &len);
	json_t *req = pending(d, r, p[0], dir, sizeof(dir));
	int fd;

	if (!req)
		return;
	json_decref(req);
	if (len < 2 || body[0] != 0x1f || body[1] != 0x8b || len > CONTEXT_MAX) {
		api_error(r, len > CONTEXT_MAX ? 413 : 400, "BAD_REQUEST",
		          "the build context must be a tar.gz of at most %u MiB (%zu bytes came)",
		          CONTEXT_MAX >> 20, len);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s/" CONTEXT ".tmp", dir);
	snprintf(path, sizeof(path), "%s/" CONTEXT, dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, body, len) != (ssize_t)len || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		if (fd >= 0)
			close(fd);
		api_error(r, 500, "INTERNAL", "cannot keep the build context: %s", strerror(errno));
		return;
	}
	api_ok(r, 200, json_pack("{sbsb}", "success", 1, "scanned", 0));
}

static void build_free(struct build *b)
{
	json_decref(b->snap);
	json_decref(b->deps);
	free(b);
}

/* The build failed: say why, drop the build sandbox (its record says why too). */
static void fail(struct build *b, int status, const char *fmt, const char *why)
{
	struct sandbox *sb = sbx_find(b->d, b->sandbox);

	api_error(b->r, status, "BUILD_FAILED", fmt, b->id, why);
	huskd_log(b->sandbox, "build %s failed: %s", b->id, why);
	if (sb)
		sbx_end(sb, "failed", "its snapshot build failed", NULL);
	build_free(b);
}

static void built(struct sandbox *sb, json_t *rec, const char *err, void *arg)
{
	struct build *b = arg;

	if (!rec) {
		fail(b, 500, "build %s: cannot snapshot the build sandbox: %s", err);
		return;
	}
	api_ok(b->r, 200, json_incref(rec));
	huskd_log(sb->id, "build %s done", b->id);
	sbx_end(sb, "deleted", "its snapshot build finished", NULL);
	remove_build(b->dir);
	build_free(b);
}

/* 0 if the step's command ran and exited 0; else fails the build. */
static int step_failed(struct op *op, const char *what)
{
	struct build *b = op->arg;
	char why[300], msg[1024];

	if (op->rc) {
		snprintf(msg, sizeof(msg), "%s: the sandbox's agent failed (%s)", what,
		         op->err[0] ? op->err : strerror(op->rc < 0 ? -op->rc : EIO));
		fail(b, 500, "build %s: %s", msg);
		return -1;
	}
	if (json_integer_value(json_object_get(op->out, "exit_code")) == 0)
		return 0;
	op_stderr(op, why, sizeof(why));
	snprintf(msg, sizeof(msg), "%s failed (exit code %lld): %s", what,
	         (long long)json_integer_value(json_object_get(op->out, "exit_code")),
	         why[0] ? why : "no error output");
	fail(b, 422, "build %s: %s", msg);
	return -1;
}

/* A step could not even start (its request was answered): end the build quietly. */
static void dropped(void *arg)
{
	struct build *b = arg;
	struct sandbox *sb = sbx_find(b->d, b->sandbox);

	huskd_log(b->sandbox, "build %s stopped: its sandbox is gone", b->id);
	if (sb)
		sbx_end(sb, "failed", "its snapshot build failed", NULL);
	build_free(b);
}

/* Runs argv in the build sandbox (stdin from in_fd if >= 0), then next. */
static void step(struct build *b, json_t *argv, int in_fd, void (*next)(struct op *op))
{
	struct op *op = op_new(OP_EXEC, next);

	if (!op) {
		if (in_fd >= 0)
			close(in_fd);
		json_decref(argv);
		fail(b, 503, "build %s: %s", "out of memory");
		return;
	}
	op->arg = b;
	op->dropped = dropped;
	op->in_fd = in_fd;
	op->req = json_pack("{sssoss}", "op", "exec", "argv", argv, "cwd", "/");
	if (in_fd >= 0)
		json_object_set_new(op->req, "stdin", json_true());
	op_submit(b->d, b->r, b->sandbox, op);
}

static void synced(struct op *op)
{
	struct build *b = op->arg;
	struct sandbox *sb;
	int rc;

	if (step_failed(op, "sync"))
		return;
	sb = sbx_find(b->d, b->sandbox);
	rc = sb ? sbx_snapshot_take(sb, b->id, b->snap, b->files, built, b) : -ENOENT;
	if (rc)
		fail(b, 500, "build %s: cannot snapshot the build sandbox: %s", strerror(-rc));
}

static void installed(struct op *op)
{
	if (!step_failed(op, "installing the dependencies"))
		step(op->arg, json_pack("[s]", "sync"), -1, synced);
}

/* The context is in place: the dependencies, or straight to the sync. */
static void install(struct build *b)
{
	json_t *argv;

	if (!json_array_size(b->deps)) {
		step(b, json_pack("[s]", "sync"), -1, synced);
		return;
	}
	/* apt-get needs the network; without it this fails with apt's own message. */
	argv = json_pack("[sss]", "sh", "-c",
	                 "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install "
	                 "-y -qq --no-install-recommends \"$@\"");
	json_array_append_new(argv, json_string("sh"));
	json_array_extend(argv, b->deps);
	step(b, argv, -1, installed);
}

static void unpacked(struct op *op)
{
	if (!step_failed(op, "unpacking the build context"))
		install(op->arg);
}

static void ready(struct sandbox *sb, bool ok, void *arg)
{
	struct build *b = arg;
	char path[4200];
	int fd;

	if (!ok) {
		fail(b, 500, "build %s: %s", "the build sandbox did not start");
		return;
	}
	(void)sb;
	snprintf(path, sizeof(path), "%s/" CONTEXT, b->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		install(b); /* nothing uploaded: nothing to unpack */
		return;
	}
	step(b,
	     json_pack("[sssss]", "sh", "-c", "mkdir -p \"$1\" && tar -xzf - -C \"$1\"", "sh",
	               WORKSPACE),
	     fd, unpacked);
}

/* 400 naming the first field of the finalize body that has the wrong type, or 0. */
static int check_finalize(struct http_req *r, json_t *fin)
{
	static const struct {
		const char *key;
		int type;
	} fields[] = {{"files", JSON_ARRAY},      {"dependencies", JSON_ARRAY},
	              {"packages", JSON_ARRAY},   {"env", JSON_OBJECT},
	              {"metadata", JSON_OBJECT},  {"fileCount", JSON_INTEGER},
	              {"sizeBytes", JSON_INTEGER}};
	json_t *v;
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		v = json_object_get(fin, fields[i].key);
		if (v && !json_is_null(v) && (int)json_typeof(v) != fields[i].type) {
			api_error(r, 400, "BAD_REQUEST", "%s has the wrong type (see API.md (40))",
			          fields[i].key);
			return 400;
		}
	}
	json_array_foreach(json_object_get(fin, "dependencies"), i, v)
	{
		const char *s = json_string_value(v);
		/* Debian package names: what apt-get takes, and nothing a shell would read. */
		if (!s || !*s || s[0] == '-' ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.+-:=") != strlen(s)) {
			api_error(r, 400, "BAD_REQUEST",
			          "dependencies[%zu] is not a Debian package name (e.g. curl)", i);
			return 400;
		}
	}
	return 0;
}

HANDLER(h_snap_build_finalize)
{
	struct huskd *d = ctx;
	json_t *fin = body_object(r), *req, *create = NULL, *info = NULL, *deps;
	struct sandbox *sb = NULL;
	struct build *b = NULL;
	char dir[4096], err[512];
	int status;

	if (!fin)
		return;
	req = pending(d, r, p[0], dir, sizeof(dir));
	if (!req || check_finalize(r, fin))
		goto out;
	b = calloc(1, sizeof(*b));
	if (!b) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		goto out;
	}
	b->d = d;
	b->r = r;
	snprintf(b->id, sizeof(b->id), "%s", p[0]);
	snprintf(b->dir, sizeof(b->dir), "%s", dir);
	b->files = json_integer_value(json_object_get(fin, "fileCount"));
	deps = json_array();
	json_array_extend(deps, json_object_get(fin, "dependencies"));
	json_array_extend(deps, json_object_get(fin, "packages"));
	b->deps = deps;
	b->snap = json_pack("{sOsOsbsbsb}", "name", json_object_get(req, "name"), "tag",
	                    json_object_get(req, "tag"), "public",
	                    json_is_true(json_object_get(req, "public")), "memory", 1, "keepPaused",
	                    1);
	for (const char *const *k =
	             (const char *const[]){"description", "message", "contentHash", NULL};
	     *k; k++)
		if (json_is_string(json_object_get(req, *k)))
			json_object_set(b->snap, *k, json_object_get(req, *k));
	if (json_is_object(json_object_get(fin, "metadata")))
		json_object_set(b->snap, "userMetadata", json_object_get(fin, "metadata"));
	if (json_is_array(json_object_get(fin, "files")))
		json_object_set(b->snap, "files", json_object_get(fin, "files"));
	if (json_is_object(json_object_get(fin, "env")))
		json_object_set(b->snap, "env", json_object_get(fin, "env"));
	/* The build runs with its env, so what it installs and runs sees it. */
	create = json_pack("{sOs{ss}}", "runtime", json_object_get(req, "runtime"), "timeout",
	                   "idle", "0s");
	if (json_is_object(json_object_get(fin, "env")))
		json_object_set(create, "env", json_object_get(fin, "env"));
	status = sbx_create(d, create, &info, &sb, err, sizeof(err));
	if (status) {
		api_error(r, status, status == 400 ? "BAD_REQUEST" : "INTERNAL",
		          "build %s: cannot start its sandbox: %s", b->id, err);
		build_free(b);
		goto out;
	}
	snprintf(b->sandbox, sizeof(b->sandbox), "%s", sbx_id(sb));
	huskd_log(b->sandbox, "building snapshot %s", b->id);
	sbx_when_ready(sb, ready, b);
out:
	json_decref(info);
	json_decref(create);
	json_decref(req);
	json_decref(fin);
}
