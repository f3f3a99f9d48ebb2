// SPDX-License-Identifier: MIT
/*
 * Directory transfer as a tar stream: tar.download streams `tar -c` of a
 * directory as DATA frames; tar.upload feeds DATA frames to `tar -x` in a
 * directory. The system's tar does the format (busybox or GNU); what it
 * says on stderr becomes the error message.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "evloop.h"
#include "fsutil.h"
#include "proc.h"

#define TAR_ERR_MAX 2048
#define TAR_IN_HOLD (1U << 20)

struct tar_req {
	struct req r;
	struct agent *a;
	struct child *ch;
	bool upload, paused, held, in_eof;
	uint64_t bytes;
	uint8_t *in_buf;
	size_t in_len;
	char err[TAR_ERR_MAX];
	size_t err_len;
};

static void tar_close(struct tar_req *t, int *fd)
{
	if (*fd < 0)
		return;
	evloop_del(t->a->loop, *fd);
	close(*fd);
	*fd = -1;
}

static void tar_free(struct tar_req *t)
{
	tar_close(t, &t->ch->out_fd);
	tar_close(t, &t->ch->err_fd);
	tar_close(t, &t->ch->in_fd);
	t->ch->on_exit = NULL;
	proc_free(t->ch);
	if (t->held)
		conn_hold_input(t->r.conn, false);
	free(t->in_buf);
	free(t);
}

static void tar_maybe_finish(struct tar_req *t)
{
	int st = t->ch->status;

	if (!t->ch->exited || t->ch->out_fd >= 0 || t->ch->err_fd >= 0)
		return;
	req_unregister(&t->r);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		conn_send_json(t->r.conn, FRAME_RESULT, t->r.id,
		               json_pack("{s:I}", "size", (json_int_t)t->bytes));
	else
		conn_send_error(t->r.conn, t->r.id, "io_error", "tar failed: %.*s", (int)t->err_len,
		                t->err_len ? t->err : "no message");
	tar_free(t);
}

static void tar_out_event(void *ctx, uint32_t ev)
{
	struct tar_req *t = ctx;
	uint8_t buf[65536];
	ssize_t n = read(t->ch->out_fd, buf, sizeof(buf));

	(void)ev;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		tar_close(t, &t->ch->out_fd);
		tar_maybe_finish(t);
		return;
	}
	/* Only a download has output worth sending. */
	if (!t->upload) {
		conn_send(t->r.conn, FRAME_DATA, 0, t->r.id, buf, (size_t)n);
		t->bytes += (uint64_t)n;
		if (conn_queued(t->r.conn) >= OUTQ_HIGH && !t->paused) {
			t->paused = true;
			if (evloop_mod(t->a->loop, t->ch->out_fd, 0))
				t->paused = false;
		}
	}
}

static void tar_err_event(void *ctx, uint32_t ev)
{
	struct tar_req *t = ctx;
	char buf[1024];
	ssize_t n = read(t->ch->err_fd, buf, sizeof(buf));

	(void)ev;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		tar_close(t, &t->ch->err_fd);
		tar_maybe_finish(t);
		return;
	}
	for (ssize_t i = 0; i < n && t->err_len < TAR_ERR_MAX - 1; i++)
		t->err[t->err_len++] = buf[i] == '\n' ? ' ' : buf[i];
}

static void tar_flush_in(struct tar_req *t)
{
	while (t->in_len && t->ch->in_fd >= 0) {
		ssize_t n = write(t->ch->in_fd, t->in_buf, t->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			t->in_len = 0;
			tar_close(t, &t->ch->in_fd);
			break;
		}
		memmove(t->in_buf, t->in_buf + n, t->in_len - (size_t)n);
		t->in_len -= (size_t)n;
	}
	if (t->ch->in_fd >= 0) {
		if (!t->in_len && t->in_eof)
			tar_close(t, &t->ch->in_fd);
		else if (evloop_mod(t->a->loop, t->ch->in_fd, t->in_len ? EPOLLOUT : 0))
			tar_close(t, &t->ch->in_fd);
	}
	if (t->held && t->in_len < TAR_IN_HOLD / 2) {
		t->held = false;
		conn_hold_input(t->r.conn, false);
	}
}

static void tar_in_event(void *ctx, uint32_t ev)
{
	(void)ev;
	tar_flush_in(ctx);
}

static void tar_exited(struct child *ch)
{
	struct tar_req *t = ch->owner;

	tar_close(t, &ch->in_fd);
	tar_maybe_finish(t);
}

static void tar_frame(struct req *r, const struct frame *f)
{
	struct tar_req *t = (struct tar_req *)r;

	if (f->type == FRAME_CANCEL) {
		proc_signal_group(t->ch, SIGKILL);
		return;
	}
	if (f->type != FRAME_DATA || !t->upload || t->in_eof)
		return;
	if (f->len) {
		uint8_t *nb = realloc(t->in_buf, t->in_len + f->len);

		if (!nb) {
			proc_signal_group(t->ch, SIGKILL);
			return;
		}
		t->in_buf = nb;
		memcpy(t->in_buf + t->in_len, f->payload, f->len);
		t->in_len += f->len;
		t->bytes += f->len;
	}
	if (f->flags & FRAME_F_END)
		t->in_eof = true;
	if (t->in_len >= TAR_IN_HOLD && !t->held) {
		t->held = true;
		conn_hold_input(r->conn, true);
	}
	tar_flush_in(t);
}

static void tar_drain(struct req *r)
{
	struct tar_req *t = (struct tar_req *)r;

	if (t->paused && conn_queued(r->conn) < OUTQ_LOW && t->ch->out_fd >= 0 &&
	    !evloop_mod(t->a->loop, t->ch->out_fd, EPOLLIN))
		t->paused = false;
}

static void tar_conn_lost(struct req *r)
{
	struct tar_req *t = (struct tar_req *)r;

	proc_signal_group(t->ch, SIGKILL);
	t->held = false;
	tar_free(t);
}

static const struct req_ops tar_ops = {
	.on_frame = tar_frame, .on_drain = tar_drain, .on_conn_lost = tar_conn_lost};

void op_tar(struct conn *c, uint32_t id, const char *op, json_t *req)
{
	struct agent *a = conn_agent(c);
	const char *path = json_string_value(json_object_get(req, "path"));
	bool upload = !strcmp(op, "tar.upload");
	char *up[] = {"tar", "-C", (char *)path, "-xf", "-", NULL};
	char *down[] = {"tar", "-C", (char *)path, "-cf", "-", ".", NULL};
	struct spawn_opts so = {.argv = upload ? up : down, .stdin_pipe = upload};
	struct tar_req *t;
	struct stat st;
	char **env;
	const char *why;
	int ret;

	if (!upload && strcmp(op, "tar.download")) {
		conn_send_error(c, id, "unknown_op", "unknown operation '%.64s'", op);
		return;
	}
	if (!path || !*path) {
		conn_send_error(c, id, "bad_request", "path must be a non-empty string");
		return;
	}
	ret = upload                 ? fs_mkdirs(path, 0755)
	      : stat(path, &st) < 0  ? -errno
	      : !S_ISDIR(st.st_mode) ? -ENOTDIR
	                             : 0;
	if (ret) {
		conn_send_error(c, id, errno_code(-ret), "'%s': %s", path, strerror(-ret));
		return;
	}
	env = proc_build_env(a->env, NULL, &why);
	t = calloc(1, sizeof(*t));
	if (!env || !t) {
		proc_free_env(env);
		free(t);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	so.envp = env;
	ret = proc_spawn(a, &so, &t->ch);
	proc_free_env(env);
	if (ret) {
		free(t);
		conn_send_error(c, id, errno_code(-ret), "cannot run tar: %s", strerror(-ret));
		return;
	}
	t->a = a;
	t->upload = upload;
	t->ch->owner = t;
	t->ch->on_exit = tar_exited;
	req_register(c, &t->r, id, &tar_ops);
	if (evloop_add(a->loop, t->ch->out_fd, EPOLLIN, tar_out_event, t) ||
	    evloop_add(a->loop, t->ch->err_fd, EPOLLIN, tar_err_event, t) ||
	    (t->ch->in_fd >= 0 && evloop_add(a->loop, t->ch->in_fd, 0, tar_in_event, t))) {
		req_unregister(&t->r);
		proc_signal_group(t->ch, SIGKILL);
		tar_free(t);
		conn_send_error(c, id, "io_error", "cannot watch tar");
	}
}
