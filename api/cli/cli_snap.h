/* SPDX-License-Identifier: MIT */
#ifndef HUSK_CLI_SNAP_H
#define HUSK_CLI_SNAP_H

/*
 * husk snapshot build, in pieces: the build file read into a checked JSON
 * spec (cli_snap_spec.c, YAML through cli_snap_yaml.c), the files its
 * patterns select with their hashes and the upload archive
 * (cli_snap_files.c), and the command that sends API.md §5.8 (38)-(40)
 * (cli_snap_build.c).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* SnapshotInfo as field lines (cli_snap.c); build prints the finished one with it. */
extern const struct col snap_fields[];

/*
 * YAML text (len bytes) into *out: mappings become objects, sequences arrays,
 * plain scalars that are integers, true/false or null those types, every
 * other scalar a string. 0, or -EINVAL with "line L, column C: why" in err.
 */
int snap_yaml_parse(const char *text, size_t len, json_t **out, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * The build file: file (under dir unless absolute) or
 * dir/agentuity-snapshot.{yaml,yml,json}; ${NAME} in its strings replaced
 * from vars (an object of strings); checked and normalized into *spec:
 * version 1, runtime, name?, description?, and always dependencies and
 * files (string arrays), env and metadata (objects of strings). 0, or
 * EXIT_USAGE after saying what is wrong.
 */
int snap_spec_load(struct cli *c, const char *dir, const char *file, json_t *vars, json_t **spec);

/* One selected file: path relative to the build directory. */
struct snap_file {
	char *path;
	uint64_t size;
	unsigned mode; /* permission bits, st_mode & 07777 */
	char sha256[65];
	const char *ctype;
};

struct snap_files {
	struct snap_file *v;
	size_t n;
	uint64_t bytes; /* sizes summed */
};

/*
 * The regular files under dir that one of patterns (a JSON array of
 * strings; "!pattern" excludes) selects, hashed, sorted by path. Symbolic
 * links are never followed. 0, or 1 after printing why (an unreadable file),
 * or EXIT_USAGE after a bad pattern or a missing dir.
 */
int snap_files_select(struct cli *c, const char *dir, json_t *patterns, struct snap_files *out);
void snap_files_free(struct snap_files *f);
/* The files as the finalize body lists them: [{path, size, sha256, contentType, mode}]. */
json_t *snap_files_json(const struct snap_files *f);
/*
 * Writes a tar.gz of the files (names relative to dir) to out_fd with the
 * system's tar. 0, or 1 after printing why.
 */
int snap_files_archive(const char *dir, const struct snap_files *f, int out_fd);
/* SHA-256 of len bytes as 64 hex digits and a NUL. 0 or -ENOMEM. */
int snap_sha256_hex(const void *data, size_t len, char hex[65]) __attribute__((warn_unused_result));

#endif
