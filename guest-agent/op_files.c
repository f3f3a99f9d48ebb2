// SPDX-License-Identifier: MIT
/*
 * File operations. Writes go to a temporary file beside the target and are
 * renamed over it only once complete and synced, so a reader never sees half
 * a file and a dropped connection leaves the old file intact. Reads stream
 * in chunks as fast as the connection drains.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fsutil.h"
#include "user.h"

#define READ_CHUNK 65536

struct write_req {
	struct req r;
	int fd;
	char *path, *tmp;
	mode_t mode;
	uint64_t size;
	bool failed; /* an error was sent; swallow data until END */
	bool owned;  /* "user": the file is given to uid:gid */
	uid_t uid;
	gid_t gid;
};

struct read_req {
	struct req r;
	int fd;
	uint64_t left, size;
};

static const char *req_path(struct conn *c, uint32_t id, json_t *req)
{
	const char *p = json_string_value(json_object_get(req, "path"));

	if (!p || !*p) {
		conn_send_error(c, id, "bad_request", "path must be a non-empty string");
		return NULL;
	}
	return p;
}

static void write_free(struct write_req *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
	}
	free(w->path);
	free(w->tmp);
	free(w);
}

static void write_fail(struct write_req *w, int e, const char *what)
{
	conn_send_error(w->r.conn, w->r.id, errno_code(e), "%s '%s': %s", what, w->path,
	                strerror(e));
	close(w->fd);
	unlink(w->tmp);
	w->fd = -1;
	w->failed = true;
}

static void write_frame(struct req *r, const struct frame *f)
{
	struct write_req *w = (struct write_req *)r;

	if (f->type == FRAME_CANCEL) {
		req_unregister(r);
		if (!w->failed)
			conn_send_error(r->conn, r->id, "cancelled", "write of '%s' cancelled",
			                w->path);
		write_free(w);
		return;
	}
	if (f->type != FRAME_DATA)
		return;
	for (uint32_t off = 0; !w->failed && off < f->len;) {
		ssize_t n = write(w->fd, f->payload + off, f->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			write_fail(w, errno, "cannot write");
			break;
		}
		off += (uint32_t)n;
		w->size += (uint64_t)n;
	}
	if (!(f->flags & FRAME_F_END))
		return;
	req_unregister(r);
	if (!w->failed) {
		if ((w->owned && fchown(w->fd, w->uid, w->gid) < 0) || fchmod(w->fd, w->mode) < 0 ||
		    fsync(w->fd) < 0)
			write_fail(w, errno, "cannot finish");
		else if (rename(w->tmp, w->path) < 0)
			write_fail(w, errno, "cannot replace");
		else {
			close(w->fd);
			w->fd = -1;
			conn_send_json(r->conn, FRAME_RESULT, r->id,
			               json_pack("{s:s, s:I}", "path", w->path, "size",
			                         (json_int_t)w->size));
		}
	}
	write_free(w);
}

static void write_conn_lost(struct req *r)
{
	write_free((struct write_req *)r);
}

static const struct req_ops write_ops = {.on_frame = write_frame, .on_conn_lost = write_conn_lost};

static void file_write(struct conn *c, uint32_t id, json_t *req)
{
	const char *path = req_path(c, id, req);
	json_t *mode = json_object_get(req, "mode"), *mk = json_object_get(req, "mkdirs");
	const char *user = json_string_value(json_object_get(req, "user")), *why = NULL;
	struct run_as as = {0};
	struct write_req *w;
	char *dir_copy;
	int ret;

	if (!path)
		return;
	if (user && user_resolve(user, &as, &why)) {
		conn_send_error(c, id, "bad_request", "user '%.64s': %s", user, why);
		return;
	}
	if (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
	             json_integer_value(mode) > 07777)) {
		conn_send_error(c, id, "bad_request", "mode must be an integer from 0 to 07777");
		return;
	}
	if (!json_is_false(mk) && (ret = fs_mkdirs_parent(path, 0755))) {
		conn_send_error(c, id, errno_code(-ret),
		                "cannot create the directories of '%s': %s", path, strerror(-ret));
		return;
	}
	w = calloc(1, sizeof(*w));
	dir_copy = strdup(path);
	if (!w || !dir_copy || !(w->path = strdup(path)) ||
	    asprintf(&w->tmp, "%s/.husk-write-XXXXXX", dirname(dir_copy)) < 0) {
		free(dir_copy);
		if (w)
			free(w->path);
		free(w);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	free(dir_copy);
	w->mode = mode ? (mode_t)json_integer_value(mode) : 0644;
	w->owned = user != NULL;
	w->uid = as.uid;
	w->gid = as.gid;
	w->fd = mkostemp(w->tmp, O_CLOEXEC);
	if (w->fd < 0) {
		ret = errno;
		conn_send_error(c, id, errno_code(ret), "cannot write '%s': %s", path,
		                strerror(ret));
		free(w->path);
		free(w->tmp);
		free(w);
		return;
	}
	req_register(c, &w->r, id, &write_ops);
}

static void read_free(struct read_req *rd)
{
	close(rd->fd);
	free(rd);
}

/* Sends chunks while the connection has room; RESULT at the end. */
static void read_pump(struct read_req *rd)
{
	struct conn *c = rd->r.conn;
	uint8_t buf[READ_CHUNK];

	while (conn_queued(c) < OUTQ_HIGH) {
		ssize_t n = read(rd->fd, buf, rd->left < sizeof(buf) ? rd->left : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			req_unregister(&rd->r);
			conn_send_error(c, rd->r.id, errno_code(e), "cannot read: %s", strerror(e));
			read_free(rd);
			return;
		}
		if (n == 0 || rd->left == 0) {
			req_unregister(&rd->r);
			conn_send_json(c, FRAME_RESULT, rd->r.id,
			               json_pack("{s:I}", "size", (json_int_t)rd->size));
			read_free(rd);
			return;
		}
		conn_send(c, FRAME_DATA, 0, rd->r.id, buf, (size_t)n);
		rd->size += (uint64_t)n;
		rd->left -= (uint64_t)n;
	}
}

static void read_drain(struct req *r)
{
	read_pump((struct read_req *)r);
}

static void read_frame(struct req *r, const struct frame *f)
{
	if (f->type == FRAME_CANCEL) {
		req_unregister(r);
		conn_send_error(r->conn, r->id, "cancelled", "read cancelled");
		read_free((struct read_req *)r);
	}
}

static void read_conn_lost(struct req *r)
{
	read_free((struct read_req *)r);
}

static const struct req_ops read_ops = {
	.on_frame = read_frame, .on_drain = read_drain, .on_conn_lost = read_conn_lost};

static void file_read(struct conn *c, uint32_t id, json_t *req)
{
	const char *path = req_path(c, id, req);
	json_t *off = json_object_get(req, "offset"), *len = json_object_get(req, "length");
	struct read_req *rd;
	struct stat st;
	int fd, e;

	if (!path)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		e = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : errno;
		if (fd >= 0)
			close(fd);
		conn_send_error(c, id, errno_code(e), "cannot read '%s': %s", path, strerror(e));
		return;
	}
	if (json_is_integer(off) && json_integer_value(off) > 0 &&
	    lseek(fd, (off_t)json_integer_value(off), SEEK_SET) < 0) {
		e = errno;
		close(fd);
		conn_send_error(c, id, "bad_request", "cannot seek in '%s': %s", path, strerror(e));
		return;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		close(fd);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	rd->fd = fd;
	rd->left = json_is_integer(len) && json_integer_value(len) >= 0
	                   ? (uint64_t)json_integer_value(len)
	                   : UINT64_MAX;
	req_register(c, &rd->r, id, &read_ops);
	read_pump(rd);
}

static void file_list(struct conn *c, uint32_t id, const char *path)
{
	json_t *entries = json_array();
	struct dirent *de;
	DIR *d = opendir(path);
	int e;

	if (!d) {
		e = errno;
		json_decref(entries);
		conn_send_error(c, id, errno_code(e), "cannot list '%s': %s", path, strerror(e));
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			json_array_append_new(entries, fs_entry_json(de->d_name, &st));
	}
	closedir(d);
	conn_send_json(c, FRAME_RESULT, id,
	               json_pack("{s:s, s:o}", "path", path, "entries", entries));
}

static void reply_errno(struct conn *c, uint32_t id, int ret, const char *what, const char *path)
{
	if (ret)
		conn_send_error(c, id, errno_code(-ret), "cannot %s '%s': %s", what, path,
		                strerror(-ret));
	else
		conn_send_json(c, FRAME_RESULT, id, json_pack("{s:s}", "path", path));
}

void op_file(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	const char *path;
	struct stat st;
	int ret;

	if (!strcmp(op, "file.write")) {
		file_write(c, id, req);
		return;
	}
	if (!strcmp(op, "file.read")) {
		file_read(c, id, req);
		return;
	}
	if (!strcmp(op, "file.watch")) {
		op_watch(c, id, req);
		return;
	}
	path = req_path(c, id, req);
	if (!path)
		return;
	if (!strcmp(op, "file.list")) {
		file_list(c, id, path);
	} else if (!strcmp(op, "file.stat")) {
		if (lstat(path, &st) < 0)
			reply_errno(c, id, -errno, "stat", path);
		else
			conn_send_json(c, FRAME_RESULT, id, fs_entry_json(path, &st));
	} else if (!strcmp(op, "file.mkdir")) {
		json_t *mode = json_object_get(req, "mode");
		mode_t m = json_is_integer(mode) ? (mode_t)json_integer_value(mode) & 07777 : 0755;

		if (json_is_false(json_object_get(req, "parents")))
			ret = mkdir(path, m) < 0 ? -errno : 0;
		else
			ret = fs_mkdirs(path, m);
		reply_errno(c, id, ret, "create directory", path);
	} else if (!strcmp(op, "file.rm")) {
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			ret = -EISDIR;
		else
			ret = unlink(path) < 0 ? -errno : 0;
		reply_errno(c, id, ret, "remove", path);
	} else if (!strcmp(op, "file.rmdir")) {
		if (json_is_true(json_object_get(req, "recursive")))
			ret = lstat(path, &st) < 0   ? -errno
			      : !S_ISDIR(st.st_mode) ? -ENOTDIR
			                             : fs_remove_tree(path);
		else
			ret = rmdir(path) < 0 ? -errno : 0;
		reply_errno(c, id, ret, "remove directory", path);
	} else {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
	}
}
