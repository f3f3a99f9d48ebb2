// SPDX-License-Identifier: MIT
/*
 * The fake guest's file system, in memory: a list of files and of the
 * directories file.mkdir made; every ancestor of an entry is a directory
 * too. Paths are kept normalised and absolute.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define DIR_SIZE 4096

struct blob *blob_new(size_t len)
{
	struct blob *b = malloc(sizeof(*b) + len);

	if (b) {
		b->refs = 1;
		b->len = len;
	}
	return b;
}

void blob_put(struct blob *b)
{
	if (b && !--b->refs)
		free(b);
}

void fs_entry_free(struct fentry *e)
{
	blob_put(e->blob);
	free(e->path);
	free(e);
}

char *fs_path_norm(const char *p)
{
	size_t n = strlen(p), len = 0;
	char *out = malloc(n + 2);

	if (!out)
		return NULL;
	while (*p) {
		size_t seg;

		while (*p == '/')
			p++;
		seg = strcspn(p, "/");
		if (seg == 0 || (seg == 1 && p[0] == '.')) {
			/* nothing */
		} else if (seg == 2 && p[0] == '.' && p[1] == '.') {
			while (len && out[len - 1] != '/')
				len--;
			if (len)
				len--;
		} else {
			out[len++] = '/';
			memcpy(out + len, p, seg);
			len += seg;
		}
		p += seg;
	}
	if (!len)
		out[len++] = '/';
	out[len] = '\0';
	return out;
}

bool fs_below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return strcmp(path, "/") != 0;
	return !strncmp(path, dir, n) && path[n] == '/';
}

struct fentry *fs_find(struct guest *g, const char *path)
{
	for (struct fentry *e = g->files; e; e = e->next)
		if (!strcmp(e->path, path))
			return e;
	return NULL;
}

bool fs_is_file(struct guest *g, const char *path)
{
	struct fentry *e = fs_find(g, path);

	return e && !e->dir;
}

bool fs_is_dir(struct guest *g, const char *path)
{
	struct fentry *e = fs_find(g, path);

	if (!strcmp(path, "/") || (e && e->dir))
		return true;
	for (e = g->files; e; e = e->next)
		if (fs_below(e->path, path))
			return true;
	return false;
}

int fs_check_ancestors(struct guest *g, const char *path, bool must_exist)
{
	char *p = strdup(path), *slash;
	int ret = 0;

	if (!p)
		return ENOMEM;
	while ((slash = strrchr(p, '/')) && slash != p) {
		*slash = '\0';
		if (fs_is_file(g, p)) {
			ret = ENOTDIR;
		} else if (must_exist && !fs_is_dir(g, p) && !ret) {
			ret = ENOENT;
		}
		must_exist = false; /* only the parent must exist */
	}
	free(p);
	return ret;
}

int fs_add(struct guest *g, const char *path, bool dir, unsigned mode, struct blob *b)
{
	struct fentry *e = calloc(1, sizeof(*e));

	if (!e || !(e->path = strdup(path))) {
		free(e);
		blob_put(b);
		return -ENOMEM;
	}
	e->dir = dir;
	e->mode = mode;
	e->mtime_ms = wall_ms();
	e->blob = b;
	e->next = g->files;
	g->files = e;
	return 0;
}

void fs_remove(struct guest *g, const char *path, bool below_too)
{
	char *parent = strdup(path), *slash;

	for (struct fentry **pp = &g->files; *pp;) {
		struct fentry *e = *pp;

		if (!strcmp(e->path, path) || (below_too && fs_below(e->path, path))) {
			*pp = e->next;
			if (!e->dir)
				g->stored -= e->blob->len;
			fs_entry_free(e);
			continue;
		}
		pp = &e->next;
	}
	slash = parent ? strrchr(parent, '/') : NULL;
	if (slash && slash != parent) {
		*slash = '\0';
		if (!fs_find(g, parent) && fs_add(g, parent, true, 0755, NULL))
			fprintf(stderr, "fake-agent: out of memory\n");
	}
	free(parent);
}

json_t *fs_entry_json(const char *name, const struct fentry *f, int64_t mtime_ms)
{
	bool dir = !f || f->dir;

	return json_pack("{s:s, s:I, s:i, s:I, s:s}", "name", name, "size",
	                 (json_int_t)(dir ? DIR_SIZE : f->blob->len), "mode",
	                 (int)(f ? f->mode : 0755), "mtime_ms",
	                 (json_int_t)(f ? f->mtime_ms : mtime_ms), "type", dir ? "dir" : "file");
}
