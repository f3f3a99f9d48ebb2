// SPDX-License-Identifier: MIT
/*
 * envd's filesystem.Filesystem (API.md §11.2) over the manager's file
 * requests: Stat, ListDir (to a depth), MakeDir (already_exists when it is
 * there, as envd answers), Remove (a file, or a folder and all in it) and
 * Move (the guest's mv, as a rename), WatchDir (the agent's file.watch,
 * streamed). The polled watchers (CreateWatcher ...) answer unimplemented.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"

/* A ListDir's depth at most, and its entries at most. */
#define LIST_DEPTH_MAX 16
#define LIST_ENTRIES_MAX 100000

/* Go's os.FileMode type bits, which envd's mode carries. */
#define GO_MODE_DIR 0x80000000u
#define GO_MODE_SYMLINK 0x08000000u

enum fs_op { FS_STAT, FS_LIST, FS_MKDIR, FS_REMOVE, FS_MOVE };

struct fs_call {
	struct routes *rt;
	struct http_req *r;
	enum fs_op op;
	char id[STORE_ID_LEN];
	char path[4096], dest[4096];
	/* ListDir: entries as they come, lists in flight, the first failure */
	json_t *entries;
	unsigned pending;
	bool failed;
	enum cx_code code;
	char err[512];
};

/* A manager entry {path: name, size, isDir, isSymlink, mode "0755", modTime} as EntryInfo. */
static json_t *entry_info(json_t *e, const char *full)
{
	bool dir = json_is_true(json_object_get(e, "isDir"));
	bool link = json_is_true(json_object_get(e, "isSymlink"));
	unsigned perm =
		(unsigned)strtoul(json_string_value(json_object_get(e, "mode")) ?: "0", NULL, 8);
	const char *slash = strrchr(full, '/');
	char perms[11] = "----------";

	perms[0] = dir ? 'd' : link ? 'l' : '-';
	for (int i = 0; i < 9; i++)
		if (perm & (0400u >> i))
			perms[1 + i] = "rwxrwxrwx"[i];
	return json_pack(
		"{sssssssIsIsssssssO}", "name", slash ? slash + 1 : full, "type",
		dir    ? "FILE_TYPE_DIRECTORY"
		: link ? "FILE_TYPE_SYMLINK"
		       : "FILE_TYPE_FILE",
		"path", full, "size", json_integer_value(json_object_get(e, "size")), "mode",
		(json_int_t)(perm | (dir ? GO_MODE_DIR : 0) | (link ? GO_MODE_SYMLINK : 0)),
		"permissions", perms, "owner", "", "group", "", "modifiedTime",
		json_object_get(e, "modTime") ?: json_string("1970-01-01T00:00:00Z"));
}

static void fail(struct sbx_err *e, enum sbx_fault fault, const char *fmt, const char *a,
                 const char *b)
{
	e->fault = fault;
	snprintf(e->msg, sizeof(e->msg), fmt, a, b);
}

static void call_end(struct fs_call *c, const struct sbx_err *err, json_t *msg)
{
	if (err)
		cx_error(c->r, cx_code_of(err), "%s", err->msg);
	else
		cx_reply(c->r, msg);
	json_decref(c->entries);
	free(c);
}

/* The answer {entry} of Stat, MakeDir and Move: the path as it is now. */
static void entry_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct fs_call *c = ctx;
	const char *full = json_string_value(json_object_get(reply ? reply->data : NULL, "path"));

	call_end(c, err, err ? NULL : json_pack("{so*}", "entry", entry_info(reply->data, full)));
}

/* ---- ListDir ---- */

static void list_one(struct fs_call *c, const char *dir, unsigned depth);
static void list_release(struct fs_call *c);

struct list_part {
	struct fs_call *c;
	unsigned depth;
	char dir[4096];
};

static void list_done(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct list_part *lp = ctx;
	struct fs_call *c = lp->c;
	char full[4096];
	json_t *e, *info;
	size_t i;

	if (err && !c->failed) {
		c->failed = true;
		c->code = cx_code_of(err);
		snprintf(c->err, sizeof(c->err), "%s", err->msg);
	}
	json_array_foreach(err ? NULL : json_object_get(reply->data, "files"), i, e)
	{
		if ((size_t)snprintf(
			    full, sizeof(full), "%s/%s", strcmp(lp->dir, "/") ? lp->dir : "",
			    json_string_value(json_object_get(e, "path")) ?: "") >= sizeof(full))
			continue; /* a path longer than the guest's PATH_MAX */
		if (json_array_size(c->entries) >= LIST_ENTRIES_MAX ||
		    !(info = entry_info(e, full)))
			break;
		json_array_append_new(c->entries, info);
		if (lp->depth > 1 && json_is_true(json_object_get(e, "isDir")) && !c->failed)
			list_one(c, full, lp->depth - 1);
	}
	free(lp);
	list_release(c);
}

/* One list (or the call's hold on them) is over: the answer once none is left. */
static void list_release(struct fs_call *c)
{
	if (--c->pending)
		return;
	if (c->failed) {
		cx_error(c->r, c->code, "%s", c->err);
		json_decref(c->entries);
		free(c);
		return;
	}
	call_end(c, NULL, json_pack("{sO}", "entries", c->entries));
}

static void list_one(struct fs_call *c, const char *dir, unsigned depth)
{
	struct list_part *lp = calloc(1, sizeof(*lp));

	if (!lp) {
		if (!c->failed)
			snprintf(c->err, sizeof(c->err), "out of memory");
		c->failed = true;
		c->code = CX_UNAVAILABLE;
		return;
	}
	lp->c = c;
	lp->depth = depth;
	snprintf(lp->dir, sizeof(lp->dir), "%s", dir);
	c->pending++;
	sbx_fs_list(c->rt->m, c->id, dir, list_done, lp);
}

/* ---- MakeDir, Remove, Move ---- */

static void changed(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct fs_call *c = ctx;

	(void)reply;
	if (err || c->op == FS_REMOVE)
		call_end(c, err, json_object());
	else
		sbx_fs_stat(c->rt->m, c->id, c->op == FS_MOVE ? c->dest : c->path, entry_done, c);
}

/* MakeDir and Remove look first: envd's already_exists, and a file or a folder removed. */
static void looked(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct fs_call *c = ctx;
	struct sbx_err e;

	if (err && err->fault != SBX_NOT_FOUND) {
		call_end(c, err, NULL);
	} else if (c->op == FS_MKDIR && !err) {
		fail(&e, SBX_EXISTS, "%.400s exists already%s", c->path, "");
		call_end(c, &e, NULL);
	} else if (c->op == FS_MKDIR) {
		sbx_fs_mkdir(c->rt->m, c->id, c->path, true, changed, c);
	} else if (err) {
		call_end(c, err, NULL);
	} else {
		sbx_fs_rm(c->rt->m, c->id, c->path,
		          json_is_true(json_object_get(reply->data, "isDir")), true, changed, c);
	}
}

/* Move: the guest's own mv, as a rename (-T: the destination is the new name). */
static void moved(void *arg, json_t *result, const struct sbx_err *err)
{
	struct fs_call *c = arg;
	struct sbx_err e;

	if (!err && json_integer_value(json_object_get(result, "exit_code")) != 0) {
		fail(&e, SBX_STEP_FAILED, "cannot move %.300s: %.180s", c->path,
		     c->err[0] ? c->err : "mv failed");
		err = &e;
	}
	if (err)
		call_end(c, err, NULL);
	else
		changed(c, NULL, NULL);
}

static void mv_output(void *arg, int type, const void *p, size_t len)
{
	struct fs_call *c = arg;
	size_t have = strlen(c->err);

	(void)type;
	if (have + 1 < sizeof(c->err)) {
		len = len < sizeof(c->err) - have - 1 ? len : sizeof(c->err) - have - 1;
		memcpy(c->err + have, p, len);
		c->err[have + len] = '\0';
		c->err[strcspn(c->err, "\n")] = '\0';
	}
}

static const struct sbx_shell_ops mv_ops = {.output = mv_output, .ended = moved};

static void move(struct fs_call *c)
{
	json_t *argv = json_pack("[sssss]", "mv", "-T", "--", c->path, c->dest);
	struct sbx_shell_opts o = {.argv = argv, .no_stdin = true};
	struct sbx_shell *sh;
	struct sbx_err err;

	if (!argv || sbx_shell_spawn(c->rt->m, c->id, &o, &mv_ops, c, &sh, &err)) {
		if (!argv)
			fail(&err, SBX_UNAVAILABLE, "out of memory%s%s", "", "");
		call_end(c, &err, NULL);
	}
	json_decref(argv);
}

/* ---- WatchDir ---- */

struct fs_watch {
	struct http_req *r;
	struct sbx_watch *w;
};

static void watch_started(void *arg)
{
	struct fs_watch *fw = arg;

	if (cx_stream_send(fw->r, json_pack("{s{}}", "start")))
		log_debug(NULL, "a WatchDir's client went as it started");
}

static void watch_change(void *arg, const char *name, const char *type)
{
	static const char *const types[][2] = {{"create", "EVENT_TYPE_CREATE"},
	                                       {"write", "EVENT_TYPE_WRITE"},
	                                       {"remove", "EVENT_TYPE_REMOVE"},
	                                       {"rename", "EVENT_TYPE_RENAME"},
	                                       {"chmod", "EVENT_TYPE_CHMOD"}};
	struct fs_watch *fw = arg;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i][0], type) &&
		    cx_stream_send(fw->r, json_pack("{s{ssss}}", "filesystem", "name", name, "type",
		                                    types[i][1])))
			log_debug(NULL, "a WatchDir's client went");
}

static void watch_ended(void *arg, const struct sbx_err *err)
{
	struct fs_watch *fw = arg;

	http_on_close(fw->r, NULL, NULL);
	cx_stream_end(fw->r, err ? cx_code_of(err) : CX_INTERNAL, err ? err->msg : NULL);
	free(fw);
}

static const struct sbx_watch_ops watch_ops = {
	.started = watch_started, .event = watch_change, .ended = watch_ended};

static void watcher_gone(struct http_req *r, void *arg)
{
	struct fs_watch *fw = arg;

	sbx_watch_close(fw->w);
	http_stream_end(r);
	free(fw);
}

static void watch_dir(struct routes *rt, struct http_req *r, const char *id, json_t *msg)
{
	const char *path = json_string_value(json_object_get(msg, "path"));
	struct fs_watch *fw = calloc(1, sizeof(*fw));
	struct sbx_err err;

	cx_stream_begin(r);
	if (!fw) {
		cx_stream_end(r, CX_UNAVAILABLE, "out of memory");
		return;
	}
	fw->r = r;
	if (sbx_watch_start(rt->m, id, path, json_is_true(json_object_get(msg, "recursive")),
	                    &watch_ops, fw, &fw->w, &err)) {
		cx_stream_end(r, cx_code_of(&err), err.msg);
		free(fw);
		return;
	}
	http_on_close(r, watcher_gone, fw);
}

void e2b_fs_call(struct routes *rt, struct http_req *r, const char *id, const char *method)
{
	static const char *const ops[] = {[FS_STAT] = "Stat",
	                                  [FS_LIST] = "ListDir",
	                                  [FS_MKDIR] = "MakeDir",
	                                  [FS_REMOVE] = "Remove",
	                                  [FS_MOVE] = "Move"};
	json_t *msg = cx_request(r, !strcmp(method, "WatchDir"));
	const char *path, *dest;
	struct fs_call *c;
	json_int_t depth;
	size_t op;

	if (!msg)
		return;
	if (!strcmp(method, "WatchDir")) {
		watch_dir(rt, r, id, msg);
		json_decref(msg);
		return;
	}
	for (op = 0; op < sizeof(ops) / sizeof(ops[0]) && strcmp(ops[op], method); op++)
		;
	path = json_string_value(json_object_get(msg, op == FS_MOVE ? "source" : "path"));
	dest = json_string_value(json_object_get(msg, "destination"));
	depth = json_is_integer(json_object_get(msg, "depth"))
	                ? json_integer_value(json_object_get(msg, "depth"))
	                : 1;
	if (op == sizeof(ops) / sizeof(ops[0]))
		cx_error(
			r, CX_UNIMPLEMENTED,
			"filesystem.Filesystem/%s is not served by huskd (watching a folder is not "
			"supported yet)",
			method);
	else if (!path || !*path || strlen(path) >= sizeof(c->path) ||
	         (op == FS_MOVE && (!dest || !*dest || strlen(dest) >= sizeof(c->dest))))
		cx_error(r, CX_INVALID_ARGUMENT, "%s",
		         op == FS_MOVE ? "source and destination must be paths"
		                       : "path must be a path in the sandbox");
	else if (op == FS_LIST && (depth < 1 || depth > LIST_DEPTH_MAX))
		cx_error(r, CX_INVALID_ARGUMENT, "depth must be 1..%d", LIST_DEPTH_MAX);
	else if ((c = calloc(1, sizeof(*c))) == NULL)
		cx_error(r, CX_UNAVAILABLE, "out of memory");
	else {
		*c = (struct fs_call){.rt = rt, .r = r, .op = (enum fs_op)op};
		snprintf(c->id, sizeof(c->id), "%s", id);
		snprintf(c->path, sizeof(c->path), "%s", path);
		snprintf(c->dest, sizeof(c->dest), "%s", dest ? dest : "");
		if (op == FS_STAT) {
			sbx_fs_stat(rt->m, id, path, entry_done, c);
		} else if (op == FS_LIST) {
			c->entries = json_array();
			c->pending = 1; /* held until the first list has begun its children */
			list_one(c, path, (unsigned)depth);
			list_release(c);
		} else if (op == FS_MOVE) {
			move(c);
		} else {
			sbx_fs_stat(rt->m, id, path, looked, c);
		}
	}
	json_decref(msg);
}
