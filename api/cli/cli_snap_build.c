// SPDX-License-Identifier: MIT
/*
 * husk snapshot build DIR: the declarative build of API.md §5.8 (38)-(40).
 * The build file and the files it selects give a content hash; huskd is
 * asked to start a build with it (38), and either says nothing changed or
 * names the new snapshot, which then gets the files as a tar.gz (39) and
 * is finished with the file list, dependencies, env and metadata (40).
 * --dry-run stops before the first request and shows what would go.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli_snap.h"

/* huskd may unpack a large archive before it answers the upload. */
#define UPLOAD_TIMEOUT_MS 600000

/*
 * The content hash: SHA-256 (hex) of compact JSON with sorted keys of what
 * ends up in the snapshot: runtime, dependencies, env (after ${NAME}),
 * metadata (the file's and --metadata) and the files as [path, mode,
 * sha256] sorted by path. Name, description and tag are left out: they
 * label a snapshot, they are not its content. "husk" versions this form,
 * so changing it changes every hash on purpose rather than by accident.
 */
static int content_hash(json_t *spec, json_t *meta, const struct snap_files *f, char hex[65])
{
	json_t *files = json_array(), *canon;
	char *text;
	int rc;

	for (size_t i = 0; i < f->n; i++)
		json_array_append_new(files, json_pack("[sIs]", f->v[i].path,
		                                       (json_int_t)f->v[i].mode, f->v[i].sha256));
	canon = json_pack("{sisOsOsOsOso}", "husk", 1, "runtime", json_object_get(spec, "runtime"),
	                  "dependencies", json_object_get(spec, "dependencies"), "env",
	                  json_object_get(spec, "env"), "metadata", meta, "files", files);
	text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	rc = text ? snap_sha256_hex(text, strlen(text), hex) : -ENOMEM;
	free(text);
	json_decref(canon);
	return rc;
}

/* What --dry-run shows: the files, the hash, and the two JSON requests. */
static void dry_run(struct cli *c, const struct snap_files *f, const char *hash, json_t *build,
                    json_t *fin)
{
	char size[32];
	json_t *j;

	if (c->json) {
		j = json_pack("{sssOsO}", "contentHash", hash, "build", build, "finalize", fin);
		out_json(j);
		json_decref(j);
		return;
	}
	for (size_t i = 0; i < f->n; i++)
		printf("%04o %12llu %s  %s  (%s)\n", f->v[i].mode, (unsigned long long)f->v[i].size,
		       f->v[i].sha256, f->v[i].path, f->v[i].ctype);
	printf("%zu file%s, %s\ncontent hash: %s\n\nPOST /sandbox/snapshots/build\n", f->n,
	       f->n == 1 ? "" : "s", out_bytes((double)f->bytes, size, sizeof(size)), hash);
	out_json(build);
	printf("\nthen PUT /sandbox/snapshots/ID/upload (a tar.gz of the files) and\n"
	       "POST /sandbox/snapshots/ID/finalize\n");
	out_json(fin);
}

/* PUT to the uploadUrl huskd gave, without our key (API.md (38)). 0 or 1. */
static int put_url(const char *url, const void *body, size_t len)
{
	struct cli_req rq = {.method = "PUT",
	                     .ctype = "application/gzip",
	                     .body = body,
	                     .len = len,
	                     .timeout_ms = UPLOAD_TIMEOUT_MS};
	const char *path = strncmp(url, "http://", 7) ? NULL : strchr(url + 7, '/');
	char base[512], err[512];
	struct cli_resp r = {0};
	struct cli_url u;
	int rc = 0;

	/* The CLI's client has no TLS: an https:// URL cannot be reached from here. */
	if (strncmp(url, "http://", 7)) {
		fprintf(stderr,
		        "husk: huskd gave the upload URL %s; husk uploads over http:// only\n",
		        url);
		return 1;
	}
	snprintf(base, sizeof(base), "%.*s", (int)(path ? path - url : (long)strlen(url)), url);
	rq.target = path ? path : "/";
	if (cli_url_parse(base, &u, err, sizeof(err))) {
		fprintf(stderr, "husk: the upload URL %s: %s\n", url, err);
		return 1;
	}
	if (cli_http_do(&u, &rq, &r) < 0) {
		fprintf(stderr, "husk: cannot upload to %s: %s\n", url, r.err);
		rc = 1;
	} else if (r.status < 200 || r.status > 299) {
		rc = cli_print_error(&r);
	}
	cli_resp_free(&r);
	return rc;
}

/* PUT /sandbox/snapshots/ID/upload; its {success: false, message} is a failure too. 0 or 1. */
static int put_huskd(struct cli *c, const char *id, const void *body, size_t len)
{
	struct sbuf t = {0};
	struct cli_resp r;
	json_t *j, *data;
	int rc;

	sandbox_path(&t, "/sandbox/snapshots", id, "/upload");
	rc = cli_raw(c, "PUT", t.s, "application/gzip", body, len, NULL, NULL, UPLOAD_TIMEOUT_MS,
	             &r);
	sb_free(&t);
	if (rc)
		return rc;
	j = r.body ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	data = json_object_get(j, "data");
	if (json_is_false(json_object_get(j, "success")) ||
	    json_is_false(json_object_get(data, "success"))) {
		const char *m = json_string_value(json_object_get(data ? data : j, "message"));

		fprintf(stderr, "husk: huskd refused the upload%s%s\n", m ? ": " : "", m ? m : "");
		rc = 1;
	}
	json_decref(j);
	cli_resp_free(&r);
	return rc;
}

/* The tar.gz of the files, to uploadUrl or to huskd. 0 or 1. */
static int upload(struct cli *c, json_t *data, const char *id, const char *dir,
                  const struct snap_files *f)
{
	const char *url = json_string_value(json_object_get(data, "uploadUrl"));
	int fd = memfd_create("husk-build", MFD_CLOEXEC), rc;
	void *map = MAP_FAILED;
	char size[32];
	off_t len = 0;

	rc = fd < 0 ? 1 : snap_files_archive(dir, f, fd);
	if (!rc) {
		len = lseek(fd, 0, SEEK_END);
		map = len > 0 ? mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
		if (map == MAP_FAILED) {
			fprintf(stderr, "husk: cannot read the archive back: %s\n",
			        len > 0 ? strerror(errno) : "tar wrote nothing");
			rc = 1;
		}
	} else if (fd < 0) {
		fprintf(stderr, "husk: cannot make the archive: %s\n", strerror(errno));
	}
	if (!rc) {
		fprintf(stderr, "husk: uploading %s (tar.gz of %zu file%s)%s%s\n",
		        out_bytes((double)len, size, sizeof(size)), f->n, f->n == 1 ? "" : "s",
		        url && *url ? " to " : "", url && *url ? url : "");
		rc = url && *url ? put_url(url, map, (size_t)len)
		                 : put_huskd(c, id, map, (size_t)len);
	}
	if (map != MAP_FAILED)
		munmap(map, (size_t)len);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* (38) answered: unchanged, or upload and finalize. The exit status. */
static int go_on(struct cli *c, json_t *env, const char *dir, const struct snap_files *f,
                 json_t *fin)
{
	json_t *data = json_object_get(env, "data"), *done = NULL;
	const char *id = json_string_value(json_object_get(data, "snapshotId"));
	char a[256], b[256], t[256];
	struct sbuf path = {0};
	int rc;

	if (json_is_true(json_object_get(data, "unchanged"))) {
		if (c->json)
			return out_data(env);
		printf("unchanged: snapshot %s (%s:%s) has this content; --force builds again\n",
		       out_cell(data, "existingId", a, sizeof(a)),
		       out_cell(data, "existingName", b, sizeof(b)),
		       out_cell(data, "existingTag", t, sizeof(t)));
		return 0;
	}
	if (!id || !*id) {
		fprintf(stderr, "husk: huskd started the build but named no snapshotId\n");
		return 1;
	}
	/* An encrypted upload's format is the hosted service's; huskd is told to leave it out. */
	if (json_is_string(json_object_get(data, "publicKey"))) {
		fprintf(stderr, "husk: huskd asked for an encrypted upload (publicKey), which husk "
		                "does not make\n");
		return 1;
	}
	fprintf(stderr, "husk: build %s started\n", id);
	rc = upload(c, data, id, dir, f);
	if (!rc) {
		fprintf(stderr, "husk: finalizing %s\n", id);
		sandbox_path(&path, "/sandbox/snapshots", id, "/finalize");
		rc = cli_call(c, "POST", path.s, fin, &done);
	}
	if (rc)
		fprintf(stderr,
		        "husk: build %s is not finished (husk snapshot delete %s removes it)\n", id,
		        id);
	else if (c->json)
		out_data(done);
	else
		out_fields(json_object_get(done, "data"), snap_fields);
	json_decref(done);
	sb_free(&path);
	return rc;
}

int snap_build(struct cli *c, int argc, char **argv)
{
	const char *file = NULL, *tag = NULL, *name = NULL, *desc = NULL;
	struct strlist envs = {0}, metas = {0};
	bool force = false, pub = false, confirm = false, dry = false;
	const struct opt opts[] = {{"file", 0, OPT_STR, &file},
	                           {"tag", 0, OPT_STR, &tag},
	                           {"name", 0, OPT_STR, &name},
	                           {"description", 0, OPT_STR, &desc},
	                           {"env", 'e', OPT_LIST, &envs},
	                           {"metadata", 0, OPT_LIST, &metas},
	                           {"force", 0, OPT_FLAG, &force},
	                           {"public", 0, OPT_FLAG, &pub},
	                           {"confirm", 'y', OPT_FLAG, &confirm},
	                           {"dry-run", 0, OPT_FLAG, &dry},
	                           {NULL, 0, 0, NULL}};
	json_t *vars = json_object(), *meta = json_object(), *spec = NULL, *build = NULL,
	       *fin = NULL, *env = NULL;
	struct snap_files f = {0};
	char hash[65], size[32];
	struct args a;
	int rc;

	c->usage = "husk snapshot build DIR [--file F] [--tag T] [--name N] [--description D]\n"
		   "                    [--env K=V]... [--metadata K=V]... [--force] [--public "
		   "--confirm] [--dry-run]\n"
		   "Builds a snapshot from DIR/agentuity-snapshot.yaml (or .yml, .json, or --file "
		   "under DIR):\nits runtime, dependencies, env, metadata and the files under DIR "
		   "that its 'files'\npatterns select ('!' excludes). ${NAME} in the file comes "
		   "from --env NAME=VALUE.\n--dry-run prints the files, the content hash and the "
		   "requests without sending them.\n";
	rc = args_parse(c, argc, argv, opts, "DIR", &a);
	for (int i = 0; !rc && i < envs.n; i++)
		rc = args_keyval(c, "--env", envs.v[i], vars);
	for (int i = 0; !rc && i < metas.n; i++)
		rc = args_keyval(c, "--metadata", metas.v[i], meta);
	if (!rc && pub && !confirm)
		rc = args_bad(c, "--public publishes the snapshot to everyone: add --confirm");
	if (!rc)
		rc = snap_spec_load(c, a.pos[0], file, vars, &spec);
	if (!rc) /* --metadata wins over the file's */
		rc = json_object_update_missing(meta, json_object_get(spec, "metadata"));
	if (!rc)
		rc = snap_files_select(c, a.pos[0], json_object_get(spec, "files"), &f);
	if (!rc && content_hash(spec, meta, &f, hash)) {
		fprintf(stderr, "husk: out of memory\n");
		rc = 1;
	}
	if (!rc) {
		build = json_pack("{sOss}", "runtime", json_object_get(spec, "runtime"),
		                  "contentHash", hash);
		if (name || json_object_get(spec, "name"))
			json_object_set_new(build, "name",
			                    name ? json_string(name)
			                         : json_incref(json_object_get(spec, "name")));
		if (desc || json_object_get(spec, "description"))
			json_object_set_new(
				build, "description",
				desc ? json_string(desc)
				     : json_incref(json_object_get(spec, "description")));
		if (tag)
			json_object_set_new(build, "tag", json_string(tag));
		if (force)
			json_object_set_new(build, "force", json_true());
		if (pub)
			json_object_set_new(build, "public", json_true());
		fin = json_pack("{sIsIsosOsOsO}", "sizeBytes", (json_int_t)f.bytes, "fileCount",
		                (json_int_t)f.n, "files", snap_files_json(&f), "dependencies",
		                json_object_get(spec, "dependencies"), "env",
		                json_object_get(spec, "env"), "metadata", meta);
	}
	if (!rc && dry) {
		dry_run(c, &f, hash, build, fin);
	} else if (!rc) {
		fprintf(stderr, "husk: %zu file%s (%s), content hash %s\n", f.n,
		        f.n == 1 ? "" : "s", out_bytes((double)f.bytes, size, sizeof(size)), hash);
		rc = cli_call(c, "POST", "/sandbox/snapshots/build", build, &env);
		if (!rc)
			rc = go_on(c, env, a.pos[0], &f, fin);
	}
	snap_files_free(&f);
	json_decref(vars);
	json_decref(meta);
	json_decref(spec);
	json_decref(build);
	json_decref(fin);
	json_decref(env);
	free(envs.v);
	free(metas.v);
	return rc < 0 ? 0 : rc;
}
