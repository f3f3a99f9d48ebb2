/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_FSUTIL_H
#define HUSK_AGENT_FSUTIL_H

#include <jansson.h>
#include <sys/stat.h>
#include <sys/types.h>

/* mkdir -p: creates path and missing parents with mode. 0 or -errno. */
int fs_mkdirs(const char *path, mode_t mode) __attribute__((warn_unused_result));

/* Creates the parent directories of path. 0 or -errno. */
int fs_mkdirs_parent(const char *path, mode_t mode) __attribute__((warn_unused_result));

/* rm -r without following symlinks. 0 or -errno. */
int fs_remove_tree(const char *path) __attribute__((warn_unused_result));

/* {name, size, mode, mtime_ms, type} for an lstat() result. */
json_t *fs_entry_json(const char *name, const struct stat *st);

#endif
