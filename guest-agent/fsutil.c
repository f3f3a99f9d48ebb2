// SPDX-License-Identifier: MIT
#include "fsutil.h"

#include <errno.h>
#define _XOPEN_SOURCE_EXTENDED 1
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fs_mkdirs(const char *path, mode_t mode)
{
	char *p = strdup(path);
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; ret == 0; s++) {
		char c = *s;

		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			ret = -errno;
		*s = c;
		if (!c)
			break;
	}
	if (!ret) {
		struct stat st;

		if (stat(path, &st) < 0)
			ret = -errno;
		else if (!S_ISDIR(st.st_mode))
			ret = -ENOTDIR;
	}
	free(p);
	return ret;
}

int fs_mkdirs_parent(const char *path, mode_t mode)
{
	char *p = strdup(path), *slash;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	slash = strrchr(p, '/');
	if (slash && slash != p) {
		*slash = '\0';
		ret = fs_mkdirs(p, mode);
	}
	free(p);
	return ret;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

int fs_remove_tree(const char *path)
{
	return nftw(path, remove_one, 32, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

json_t *fs_entry_json(const char *name, const struct stat *st)
{
	const char *type = S_ISREG(st->st_mode)   ? "file"
	                   : S_ISDIR(st->st_mode) ? "dir"
	                   : S_ISLNK(st->st_mode) ? "symlink"
	                                          : "other";

	return json_pack("{s:s, s:I, s:i, s:I, s:s}", "name", name, "size", (json_int_t)st->st_size,
	                 "mode", (int)(st->st_mode & 07777), "mtime_ms",
	                 (json_int_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000,
	                 "type", type);
}
