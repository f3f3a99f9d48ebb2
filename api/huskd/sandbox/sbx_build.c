// SPDX-License-Identifier: MIT
/*
 * Declarative snapshot builds (API.md §5.8 (38)-(40), `husk snapshot build`):
 * init records the request under state/builds/<id> and answers the id (or
 * "unchanged" when a snapshot of that name:tag has the same content hash);
 * upload keeps the build context (a tar.gz); finalize creates a sandbox of
 * the runtime with the build's env, unpacks the context into its
 * workspace, installs the apt dependencies, and snapshots it (with its
 * memory) as that id, then destroys the build sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "sbx_int.h"
#include "sbx_snap.h"

#define CONTEXT "context.tar.gz"
/* A build context passes through one HTTP body. */
#define CONTEXT_MAX (64u << 20)

struct build {
	struct sbx_mgr *m;
	sbx_done_fn done;
	void *ctx;
	char id[STORE_ID_LEN], sandbox[STORE_ID_LEN];
	char dir[4096];
	json_t *snap; /* what sbx_snap_take gets */
	json_t *deps;
	int64_t files;
	void *context; /* the uploaded context, mapped while it is unpacked */
	size_t context_len;
};

static void build_dir(struct sbx_mgr *m, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/builds/%s", m->cfg.state, id);
}

static bool id_ok(const char *id)
{
	return !strncmp(id, "snp_", 4) && strlen(id) < STORE_ID_LEN &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(id);
}

/* The build's init request, or NULL with err. */
static json_t *pending(struct sbx_mgr *m, const char *id, char *dir, size_t len,
                       struct sbx_err *err)
{
	char path[4200];
	json_t *req;

	if (id_ok(id)) {
		build_dir(m, id, dir, len);
		snprintf(path, sizeof(path), "%s/request.json", dir);
		req = json_load_file(path, 0, NULL);
		if (req)
			return req;
	}
	sbx_fail(err, SBX_NOT_FOUND, -ENOENT,
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

int sbx_build_init(struct sbx_mgr *m, json_t *body, json_t **out, struct sbx_err *err)
{
	json_t *rt = NULL, *old = NULL, *old_priv = NULL;
	const char *runtime, *name, *tag, *hash;
	char id[STORE_ID_LEN], dir[4096], path[4200], ref[200];
	int rc = 0;

	*out = NULL;
	runtime = json_string_value(json_object_get(body, "runtime"));
	if (!runtime || store_runtime_get(m->store, runtime, &rt, NULL))
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"runtime '%s' is not in the catalog; GET /sandbox/runtimes lists them",
			runtime ? runtime : "(missing)");
	json_decref(rt);
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
	    store_snapshot_find(m->store, sbx_info_org(body), ref, &old, &old_priv) == 0 &&
	    !strcmp(sbx_info_org(old), sbx_info_org(body)) &&
	    json_equal(json_object_get(old_priv, "contentHash"),
	               json_object_get(body, "contentHash"))) {
		*out = json_pack("{sbsOsOsO}", "unchanged", 1, "existingId",
		                 json_object_get(old, "snapshotId"), "existingName",
		                 json_object_get(old, "name"), "existingTag",
		                 json_object_get(old, "tag"));
		goto out;
	}
	if (store_new_id("snp_", id)) {
		rc = sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of ids");
		goto out;
	}
	build_dir(m, id, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/request.json", dir);
	if (mkdir(dir, 0700) < 0 || json_dump_file(body, path, 0) < 0) {
		rc = sbx_fail(err, SBX_INTERNAL, -errno, "cannot record build %s: %s", id,
		              strerror(errno));
		remove_build(dir);
		goto out;
	}
	log_info(NULL, "build %s: %s from %s", id, ref, runtime);
	*out = json_pack("{ss}", "snapshotId", id);
out:
	json_decref(old);
	json_decref(old_priv);
	return rc;
}

int sbx_build_upload(struct sbx_mgr *m, const char *build, const void *tgz, size_t len,
                     struct sbx_err *err)
{
	const unsigned char *body = tgz;
	char dir[4096], tmp[4200], path[4200];
	json_t *req = pending(m, build, dir, sizeof(dir), err);
	int fd, rc = 0;

	if (!req)
		return -ENOENT;
	json_decref(req);
	if (len > CONTEXT_MAX)
		return sbx_fail(
			err, SBX_TOO_LARGE, -EFBIG,
			"the build context must be a tar.gz of at most %u MiB (%zu bytes came)",
			CONTEXT_MAX >> 20, len);
	if (len < 2 || body[0] != 0x1f || body[1] != 0x8b)
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"the build context must be a tar.gz of at most %u MiB (%zu bytes came)",
			CONTEXT_MAX >> 20, len);
	snprintf(tmp, sizeof(tmp), "%s/" CONTEXT ".tmp", dir);
	snprintf(path, sizeof(path), "%s/" CONTEXT, dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, body, len) != (ssize_t)len || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		rc = sbx_fail(err, SBX_INTERNAL, -errno, "cannot keep the build context: %s",
		              strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

static void build_free(struct build *b)
{
	if (b->context)
		munmap(b->context, b->context_len);
	json_decref(b->snap);
	json_decref(b->deps);
	free(b);
}

/* The build failed: say why, drop the build sandbox (its record says why too). */
static void fail(struct build *b, const struct sbx_err *err)
{
	struct sandbox *sb = sbx_find(b->m, b->sandbox);

	log_error(b->sandbox[0] ? b->sandbox : NULL, "build %s failed: %s", b->id, err->msg);
	if (sb)
		sbx_end(sb, "failed", "its snapshot build failed", NULL);
	b->done(b->ctx, err, NULL);
	build_free(b);
}

static void built(struct sandbox *sb, json_t *rec, const struct sbx_err *err, void *arg)
{
	struct build *b = arg;
	struct sbx_reply reply = {.data = rec};
	struct sbx_err e;

	if (!rec) {
		sbx_fail(&e, SBX_INTERNAL, -EIO, "build %s: cannot snapshot the build sandbox: %s",
		         b->id, err ? err->msg : "?");
		fail(b, &e);
		return;
	}
	log_info(sb->id, "build %s done", b->id);
	b->done(b->ctx, NULL, &reply);
	sbx_end(sb, "deleted", "its snapshot build finished", NULL);
	remove_build(b->dir);
	build_free(b);
}

/* 0 if the step's command ran and exited 0; else fails the build. */
static int step_failed(struct build *b, const struct sbx_err *err, const struct sbx_run_out *out,
                       const char *what)
{
	struct sbx_err e;

	if (err) {
		sbx_fail(&e, err->fault == SBX_ENDED ? SBX_ENDED : SBX_INTERNAL, -EIO,
		         "build %s: %s: %s", b->id, what, err->msg);
		fail(b, &e);
		return -1;
	}
	if (out->exit_code == 0)
		return 0;
	sbx_fail(&e, SBX_STEP_FAILED, -EIO, "build %s: %s failed (exit code %d): %s", b->id, what,
	         out->exit_code, out->err[0] ? out->err : "no error output");
	fail(b, &e);
	return -1;
}

static void synced(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                   void *arg)
{
	struct build *b = arg;
	struct sbx_err e;

	if (step_failed(b, err, out, "sync"))
		return;
	if (sbx_snap_take(sb, b->id, b->snap, b->files, built, b, &e)) {
		struct sbx_err e2;

		sbx_fail(&e2, SBX_INTERNAL, -EIO, "build %s: cannot snapshot the build sandbox: %s",
		         b->id, e.msg);
		fail(b, &e2);
	}
}

static void installed(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                      void *arg)
{
	if (!step_failed(arg, err, out, "installing the dependencies"))
		sbx_run(sb, json_pack("[s]", "sync"), NULL, 0, synced, arg);
}

/* The context is in place: the dependencies, or straight to the sync. */
static void install(struct sandbox *sb, struct build *b)
{
	json_t *argv;

	if (!json_array_size(b->deps)) {
		sbx_run(sb, json_pack("[s]", "sync"), NULL, 0, synced, b);
		return;
	}
	/* apt-get needs the network; without it this fails with apt's own message. */
	argv = json_pack("[sss]", "sh", "-c",
	                 "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y "
	                 "-qq --no-install-recommends \"$@\"");
	json_array_append_new(argv, json_string("sh"));
	json_array_extend(argv, b->deps);
	sbx_run(sb, argv, NULL, 0, installed, b);
}

static void unpacked(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                     void *arg)
{
	struct build *b = arg;

	if (b->context) {
		munmap(b->context, b->context_len);
		b->context = NULL;
	}
	if (!step_failed(b, err, out, "unpacking the build context"))
		install(sb, b);
}

/* The build sandbox is up: unpack the context (if one was uploaded). */
static void ready(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct build *b = arg;
	struct agent_input in = {.type = FRAME_STDIN};
	struct sbx_err e;
	char path[4200];
	struct stat st;
	int fd;

	if (err) {
		sbx_fail(&e, SBX_INTERNAL, -EIO, "build %s: the build sandbox did not start: %s",
		         b->id, err->msg);
		fail(b, &e);
		return;
	}
	snprintf(path, sizeof(path), "%s/" CONTEXT, b->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		install(sb, b); /* nothing uploaded: nothing to unpack */
		return;
	}
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		b->context = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (b->context == MAP_FAILED)
			b->context = NULL;
		else
			b->context_len = (size_t)st.st_size;
	}
	close(fd);
	in.data = b->context ? b->context : "";
	in.len = b->context_len;
	sbx_run(sb,
	        json_pack("[sssss]", "sh", "-c", "mkdir -p \"$1\" && tar -xzf - -C \"$1\"", "sh",
	                  WORKSPACE),
	        &in, 0, unpacked, b);
}

/* 0, or -EINVAL with err naming the first field of the finalize body that is wrong. */
static int check_finalize(json_t *fin, struct sbx_err *err)
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
		if (v && !json_is_null(v) && (int)json_typeof(v) != fields[i].type)
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "%s has the wrong type (see API.md (40))", fields[i].key);
	}
	json_array_foreach(json_object_get(fin, "dependencies"), i, v)
	{
		if (!sbx_deb_name(json_string_value(v)))
			return sbx_fail(
				err, SBX_BAD_INPUT, -EINVAL,
				"dependencies[%zu] is not a Debian package name (e.g. curl)", i);
	}
	return 0;
}

static void sandbox_created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct build *b = ctx;
	struct sandbox *sb;
	struct sbx_err e;

	if (err) {
		sbx_fail(&e, err->fault, -EIO, "build %s: cannot start its sandbox: %s", b->id,
		         err->msg);
		fail(b, &e);
		return;
	}
	snprintf(b->sandbox, sizeof(b->sandbox), "%s",
	         json_string_value(json_object_get(reply->data, "sandboxId")));
	sb = sbx_find(b->m, b->sandbox);
	if (!sb) {
		sbx_fail(&e, SBX_INTERNAL, -EIO, "build %s: its sandbox is gone", b->id);
		fail(b, &e);
		return;
	}
	log_info(b->sandbox, "building snapshot %s", b->id);
	sbx_when_ready(sb, ready, b);
}

void sbx_build_finalize(struct sbx_mgr *m, const char *build, json_t *fin, sbx_done_fn done,
                        void *ctx)
{
	struct build *b = NULL;
	json_t *req, *create;
	char dir[4096];
	struct sbx_err err = {0};

	req = pending(m, build, dir, sizeof(dir), &err);
	if (!req || check_finalize(fin, &err) || !(b = calloc(1, sizeof(*b)))) {
		if (req && !b && !err.msg[0])
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		json_decref(req);
		done(ctx, &err, NULL);
		return;
	}
	*b = (struct build){.m = m, .done = done, .ctx = ctx};
	snprintf(b->id, sizeof(b->id), "%s", build);
	snprintf(b->dir, sizeof(b->dir), "%s", dir);
	b->files = json_integer_value(json_object_get(fin, "fileCount"));
	b->deps = json_array();
	json_array_extend(b->deps, json_object_get(fin, "dependencies"));
	json_array_extend(b->deps, json_object_get(fin, "packages"));
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
	create = json_pack("{sOs{ss}sO*}", "runtime", json_object_get(req, "runtime"), "timeout",
	                   "idle", "0s", "org", json_object_get(req, "org"));
	if (json_is_object(json_object_get(fin, "env")))
		json_object_set(create, "env", json_object_get(fin, "env"));
	json_decref(req);
	sbx_create(m, create, sandbox_created, b);
	json_decref(create);
}
