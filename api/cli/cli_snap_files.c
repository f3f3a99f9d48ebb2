// SPDX-License-Identifier: MIT
/*
 * The files a build file's patterns select, their SHA-256 (OpenSSL's EVP),
 * and the tar.gz that carries them to huskd.
 *
 * Patterns are relative to the build directory and matched one path
 * segment at a time with fnmatch(3): glob(3) has no "**" (any number of
 * path segments), which the format's examples use. In include patterns
 * "*" and "**" do not match names starting with '.', as in the glob
 * libraries the reference CLI's users know, so .git or .env go in only when
 * named; "!" patterns match them too, so an exclusion is never weaker than
 * it reads. A pattern without wildcards that names a directory
 * takes (or, with "!", leaves out) everything under it. A file is selected
 * when an include pattern matches it and no "!" pattern does, whatever
 * their order.
 *
 * The walk opens each directory below the top with O_NOFOLLOW and takes
 * only regular files: a symbolic link never leads it (or tar, which gets
 * the same names) outside the directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_snap.h"

#define WALK_MAX_DEPTH 64

struct walk {
	struct cli *c;
	const char **inc, **exc; /* patterns, "!" removed */
	size_t ninc, nexc;
	size_t *hits;      /* files each include pattern matched, to name those that matched none */
	bool hidden_named; /* an include pattern names something starting with '.' */
	struct snap_files *out;
	size_t cap;
	char rel[4096]; /* the path being walked, relative to the top */
};

static bool has_magic(const char *p)
{
	return strpbrk(p, "*?[") != NULL;
}

/*
 * Do the pattern's remaining segments pat match the path's remaining segments
 * path? With hidden false, wildcards do not match a name starting with '.'.
 */
static bool seg_match(const char *pat, const char *path, bool hidden)
{
	size_t pl = strcspn(pat, "/"), nl = strcspn(path, "/");
	char pseg[256], nseg[256];

	if (!*pat || !*path)
		return !*pat && !*path;
	if (pl == 2 && !strncmp(pat, "**", 2)) {
		if (!pat[2]) /* trailing "**": one or more segments */
			return hidden || (path[0] != '.' && !strstr(path, "/."));
		if (seg_match(pat + 3, path, hidden))
			return true;
		return (hidden || path[0] != '.') && path[nl] &&
		       seg_match(pat, path + nl + 1, hidden);
	}
	if (pl >= sizeof(pseg) || nl >= sizeof(nseg))
		return false;
	snprintf(pseg, sizeof(pseg), "%.*s", (int)pl, pat);
	snprintf(nseg, sizeof(nseg), "%.*s", (int)nl, path);
	if (fnmatch(pseg, nseg, hidden ? 0 : FNM_PERIOD))
		return false;
	if (!pat[pl] || !path[nl])
		return !pat[pl] && !path[nl];
	return seg_match(pat + pl + 1, path + nl + 1, hidden);
}

static bool pattern_match(const char *pat, const char *path, bool hidden)
{
	size_t n = strlen(pat);

	if (!has_magic(pat) && !strncmp(path, pat, n) && path[n] == '/')
		return true; /* a directory named outright */
	return seg_match(pat, path, hidden);
}

static bool excluded(const struct walk *w, const char *path)
{
	for (size_t i = 0; i < w->nexc; i++)
		if (pattern_match(w->exc[i], path, true))
			return true;
	return false;
}

static bool included(struct walk *w, const char *path)
{
	bool hit = false;

	for (size_t i = 0; i < w->ninc; i++)
		if (pattern_match(w->inc[i], path, false)) {
			w->hits[i]++;
			hit = true;
		}
	return hit;
}

/*
 * Can the walk skip the directory rel? When a "!" pattern leaves out all of
 * it (named outright, or DIR with a trailing "**" segment), or it is hidden and no include pattern
 * names a hidden thing: nothing under it could be selected (node_modules,
 * .git).
 */
static bool dir_skipped(const struct walk *w, const char *rel)
{
	const char *base = strrchr(rel, '/');

	if (!w->hidden_named && (base ? base[1] : rel[0]) == '.')
		return true;
	for (size_t i = 0; i < w->nexc; i++) {
		const char *p = w->exc[i];
		size_t n = strlen(p);
		char pre[4096];

		if (!has_magic(p) && !strcmp(p, rel))
			return true;
		if (n > 3 && n < sizeof(pre) && !strcmp(p + n - 3, "/**")) {
			snprintf(pre, sizeof(pre), "%.*s", (int)(n - 3), p);
			if (seg_match(pre, rel, true))
				return true;
		}
	}
	return false;
}

static const char *content_type(const char *path)
{
	static const char *const types[][2] = {
		{"js", "text/javascript"},    {"mjs", "text/javascript"},
		{"cjs", "text/javascript"},   {"ts", "text/typescript"},
		{"json", "application/json"}, {"html", "text/html"},
		{"css", "text/css"},          {"txt", "text/plain"},
		{"md", "text/markdown"},      {"py", "text/x-python"},
		{"sh", "application/x-sh"},   {"yaml", "application/yaml"},
		{"yml", "application/yaml"},  {"xml", "application/xml"},
		{"csv", "text/csv"},          {"svg", "image/svg+xml"},
		{"png", "image/png"},         {"jpg", "image/jpeg"},
		{"jpeg", "image/jpeg"},       {"gif", "image/gif"},
		{"wasm", "application/wasm"}, {"pdf", "application/pdf"},
		{"gz", "application/gzip"},   {"zip", "application/zip"},
		{"tar", "application/x-tar"}};
	const char *base = strrchr(path, '/'), *dot;

	dot = strrchr(base ? base + 1 : path, '.');
	for (size_t i = 0; dot && dot[1] && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcasecmp(dot + 1, types[i][0]))
			return types[i][1];
	return "application/octet-stream";
}

/* Hashes the open file; its size is what was read, so both describe the same bytes. */
static int hash_fd(int fd, struct snap_file *f)
{
	unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned mdlen = 0;
	int rc = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? 0 : -ENOMEM;

	f->size = 0;
	while (!rc) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		f->size += (uint64_t)n;
		if (!EVP_DigestUpdate(ctx, buf, (size_t)n))
			rc = -ENOMEM;
	}
	if (!rc && !EVP_DigestFinal_ex(ctx, md, &mdlen))
		rc = -ENOMEM;
	for (unsigned i = 0; !rc && i < mdlen && i < 32; i++)
		snprintf(f->sha256 + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(ctx);
	return rc;
}

int snap_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -ENOMEM;
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* A selected regular file: opened without following a link, hashed, added. 0 or 1. */
static int add_file(struct walk *w, int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY), rc;
	struct stat st;
	struct snap_file f = {0};
	json_t *utf8 = json_string(w->rel);

	json_decref(utf8);
	if (!utf8) { /* JSON, and so the finalize request, carries only UTF-8 */
		fprintf(stderr, "husk: %s: the file name is not valid UTF-8\n", w->rel);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "husk: cannot read %s: %s\n", w->rel, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	f.mode = (unsigned)st.st_mode & 07777;
	rc = S_ISREG(st.st_mode) ? hash_fd(fd, &f) : -EINVAL;
	close(fd);
	if (rc) {
		fprintf(stderr, "husk: cannot read %s: %s\n", w->rel, strerror(-rc));
		return 1;
	}
	if (w->out->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct snap_file *v = realloc(w->out->v, cap * sizeof(*v));

		if (!v) {
			fprintf(stderr, "husk: out of memory\n");
			return 1;
		}
		w->out->v = v;
		w->cap = cap;
	}
	f.path = strdup(w->rel);
	f.ctype = content_type(w->rel);
	if (!f.path) {
		fprintf(stderr, "husk: out of memory\n");
		return 1;
	}
	w->out->v[w->out->n++] = f;
	w->out->bytes += f.size;
	return 0;
}

static int walk_dir(struct walk *w, int dfd, int depth);

/* The subdirectory name of dfd (w->rel names it), opened without following a link. */
static int walk_sub(struct walk *w, int dfd, const char *name, int depth)
{
	int sub;

	if (depth >= WALK_MAX_DEPTH) {
		fprintf(stderr, "husk: %s: more than %d directories deep\n", w->rel,
		        WALK_MAX_DEPTH);
		return 1;
	}
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		fprintf(stderr, "husk: cannot open %s: %s\n", w->rel, strerror(errno));
		return 1;
	}
	return walk_dir(w, sub, depth + 1);
}

/* Walks the directory dfd (w->rel names it, "" at the top; closes dfd): 0 or 1. */
static int walk_dir(struct walk *w, int dfd, int depth)
{
	size_t at = strlen(w->rel);
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		fprintf(stderr, "husk: cannot list %s: %s\n", at ? w->rel : ".", strerror(errno));
		close(dfd);
		return 1;
	}
	while (!rc && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (at + 1 + strlen(e->d_name) >= sizeof(w->rel)) {
			fprintf(stderr, "husk: %s/%s: the path is too long\n", w->rel, e->d_name);
			rc = 1;
			break;
		}
		snprintf(w->rel + at, sizeof(w->rel) - at, "%s%s", at ? "/" : "", e->d_name);
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			fprintf(stderr, "husk: cannot read %s: %s\n", w->rel, strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode)) {
			rc = dir_skipped(w, w->rel) ? 0 : walk_sub(w, dirfd(d), e->d_name, depth);
		} else if (included(w, w->rel) && !excluded(w, w->rel)) {
			if (S_ISREG(st.st_mode))
				rc = add_file(w, dirfd(d), e->d_name);
			else
				fprintf(stderr, "husk: %s is not a regular file; left out\n",
				        w->rel);
		}
		w->rel[at] = '\0';
	}
	closedir(d);
	return rc;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct snap_file *)a)->path, ((const struct snap_file *)b)->path);
}

/* A pattern must stay inside the directory: relative, no ".." segment. */
static bool pattern_ok(const char *p)
{
	size_t n = strlen(p);

	if (!*p || p[0] == '/' || !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") ||
	    (n >= 3 && !strcmp(p + n - 3, "/..")))
		return false;
	return true;
}

int snap_files_select(struct cli *c, const char *dir, json_t *patterns, struct snap_files *out)
{
	size_t n = json_array_size(patterns), i;
	struct walk w = {.c = c, .out = out};
	char **owned = calloc(n + 1, sizeof(*owned));
	int rc = 0, dfd;
	json_t *p;

	memset(out, 0, sizeof(*out));
	w.inc = calloc(n + 1, sizeof(*w.inc));
	w.exc = calloc(n + 1, sizeof(*w.exc));
	w.hits = calloc(n + 1, sizeof(*w.hits));
	if (!owned || !w.inc || !w.exc || !w.hits) {
		fprintf(stderr, "husk: out of memory\n");
		rc = 1;
	}
	json_array_foreach(patterns, i, p)
	{
		const char *s = json_string_value(p);
		bool neg = s[0] == '!';
		char *t;

		if (rc)
			break;
		s += neg;
		while (!strncmp(s, "./", 2))
			s += 2;
		t = owned[i] = strdup(s);
		for (size_t k = t ? strlen(t) : 0; k > 1 && t[k - 1] == '/'; k--)
			t[k - 1] = '\0'; /* "src/" is the directory src */
		if (!t || !pattern_ok(t))
			rc = args_bad(c, "file pattern '%s' must be relative to %s, without '..'",
			              json_string_value(p), dir);
		else if (neg)
			w.exc[w.nexc++] = t;
		else
			w.inc[w.ninc++] = t;
		if (!rc && !neg && (t[0] == '.' || strstr(t, "/.")))
			w.hidden_named = true;
	}
	dfd = rc ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!rc && dfd < 0)
		rc = args_bad(c, "cannot open the directory %s: %s", dir, strerror(errno));
	if (!rc && w.ninc)
		rc = walk_dir(&w, dfd, 0);
	else if (dfd >= 0)
		close(dfd);
	if (!rc && out->n)
		qsort(out->v, out->n, sizeof(*out->v), by_path);
	for (i = 0; !rc && i < w.ninc; i++)
		if (!w.hits[i])
			fprintf(stderr, "husk: file pattern '%s' matches no file under %s\n",
			        w.inc[i], dir);
	for (i = 0; i < n && owned; i++)
		free(owned[i]);
	free(owned);
	free(w.inc);
	free(w.exc);
	free(w.hits);
	if (rc)
		snap_files_free(out);
	return rc;
}

void snap_files_free(struct snap_files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].path);
	free(f->v);
	memset(f, 0, sizeof(*f));
}

json_t *snap_files_json(const struct snap_files *f)
{
	json_t *a = json_array();

	for (size_t i = 0; i < f->n; i++)
		json_array_append_new(a, json_pack("{sssIsssssI}", "path", f->v[i].path, "size",
		                                   (json_int_t)f->v[i].size, "sha256",
		                                   f->v[i].sha256, "contentType", f->v[i].ctype,
		                                   "mode", (json_int_t)f->v[i].mode));
	return a;
}

int snap_files_archive(const char *dir, const struct snap_files *f, int out_fd)
{
	char cdir[4200];
	char *argv[] = {"tar",
	                "--create",
	                "--gzip",
	                "--file=-",
	                cdir,
	                "--owner=0",
	                "--group=0",
	                "--numeric-owner",
	                "--no-recursion",
	                "--null",
	                "--verbatim-files-from",
	                "--files-from=-",
	                NULL};
	int list = memfd_create("husk-build-list", MFD_CLOEXEC), rc = list < 0 ? -errno : 0;

	snprintf(cdir, sizeof(cdir), "--directory=%s", dir);
	/* NUL-separated names: any byte but NUL may be in a file name. */
	for (size_t i = 0; !rc && i < f->n; i++)
		if (write(list, f->v[i].path, strlen(f->v[i].path) + 1) < 0)
			rc = -errno;
	if (!rc && lseek(list, 0, SEEK_SET) < 0)
		rc = -errno;
	if (!rc)
		rc = fs_tar(argv, list, out_fd);
	if (list >= 0)
		close(list);
	if (rc)
		fprintf(stderr, "husk: tar could not pack the files of %s (%s)\n", dir,
		        rc < 0 ? strerror(-rc) : "it said why above");
	return rc ? 1 : 0;
}
