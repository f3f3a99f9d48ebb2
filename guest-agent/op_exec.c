// SPDX-License-Identifier: MIT
/*
 * exec: run a process, stream its output as it comes, feed it stdin, and
 * end with its exit status. A timeout or a CANCEL sends SIGTERM to its
 * process group and SIGKILL after the grace period.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "evloop.h"
#include "exec_opts.h"
#include "proc.h"

/* Stdin bytes held for a slow process before the connection stops being read. */
#define STDIN_HOLD (1U << 20)
/* After the process exits, how long output pipes held open by its children count. */
#define LINGER_MS 1000

enum phase { RUNNING, TERMINATING, KILLED, LINGERING };

struct exec_req {
	struct req r;
	struct agent *a;
	const struct exec_mode *mode;
	struct child *ch;
	uint64_t bytes; /* data bytes streamed, for a data-mode RESULT */
	char err[512];  /* stderr kept for a data-mode ERROR */
	size_t err_len;
	int timer_fd;
	enum phase phase;
	uint64_t grace_ms;
	bool paused, held, timed_out, cancelled, stdin_eof;
	bool keep;   /* asked to outlive its connection */
	bool orphan; /* it did: no connection, its output read and dropped */
	uint8_t *in_buf;
	size_t in_len;
	const char *spawn_error;
};

static void exec_finish(struct exec_req *e);

static void arm(struct exec_req *e, uint64_t ms)
{
	struct itimerspec it = {.it_value = {.tv_sec = (time_t)(ms / 1000),
	                                     .tv_nsec = (long)(ms % 1000) * 1000000}};

	if (!ms)
		it.it_value.tv_nsec = 1;
	timerfd_settime(e->timer_fd, 0, &it, NULL);
}

static void watch(struct exec_req *e, int fd, uint32_t ev)
{
	if (fd >= 0 && evloop_mod(e->a->loop, fd, ev))
		return;
}

static void set_output_paused(struct exec_req *e, bool paused)
{
	if (e->paused == paused)
		return;
	e->paused = paused;
	watch(e, e->ch->out_fd, paused ? 0 : EPOLLIN);
	watch(e, e->ch->err_fd, paused ? 0 : EPOLLIN);
}

static bool output_open(const struct exec_req *e)
{
	return e->ch->out_fd >= 0 || e->ch->err_fd >= 0;
}

static void close_fd(struct exec_req *e, int *fd)
{
	if (*fd < 0)
		return;
	evloop_del(e->a->loop, *fd);
	close(*fd);
	*fd = -1;
}

static void maybe_finish(struct exec_req *e)
{
	if (e->ch->exited && !output_open(e))
		exec_finish(e);
}

/* Reads one chunk of a stream and forwards it. */
static void pump_stream(struct exec_req *e, int *fd, uint8_t type)
{
	uint8_t buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* EOF, or EIO from a pty whose last user is gone. */
		close_fd(e, fd);
		maybe_finish(e);
		return;
	}
	if (e->orphan)
		return; /* read so that its writes never block; nobody is left to send them to */
	if (type == FRAME_STDERR && e->mode->data) {
		for (ssize_t i = 0; i < n && e->err_len < sizeof(e->err) - 1; i++)
			e->err[e->err_len++] = buf[i] == '\n' ? ' ' : (char)buf[i];
		return;
	}
	if (e->mode->data)
		e->bytes += (uint64_t)n;
	conn_send(e->r.conn, type == FRAME_STDOUT && e->mode->data ? FRAME_DATA : type, 0, e->r.id,
	          buf, (size_t)n);
	if (conn_queued(e->r.conn) >= OUTQ_HIGH)
		set_output_paused(e, true);
}

static void out_event(void *ctx, uint32_t events)
{
	struct exec_req *e = ctx;

	(void)events;
	pump_stream(e, &e->ch->out_fd, FRAME_STDOUT);
}

static void err_event(void *ctx, uint32_t events)
{
	struct exec_req *e = ctx;

	(void)events;
	pump_stream(e, &e->ch->err_fd, FRAME_STDERR);
}

static void flush_stdin(struct exec_req *e)
{
	struct child *ch = e->ch;

	while (e->in_len && ch->in_fd >= 0) {
		ssize_t n = write(ch->in_fd, e->in_buf, e->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) { /* the process closed its stdin: drop the rest */
			e->in_len = 0;
			close_fd(e, &ch->in_fd);
			break;
		}
		memmove(e->in_buf, e->in_buf + n, e->in_len - (size_t)n);
		e->in_len -= (size_t)n;
	}
	if (ch->in_fd >= 0) {
		if (!e->in_len && e->stdin_eof && !ch->pty)
			close_fd(e, &ch->in_fd);
		else
			watch(e, ch->in_fd, e->in_len ? EPOLLOUT : 0);
	}
	if (e->held && e->in_len < STDIN_HOLD / 2) {
		e->held = false;
		conn_hold_input(e->r.conn, false);
	}
}

static void in_event(void *ctx, uint32_t events)
{
	(void)events;
	flush_stdin(ctx);
}

static void stop_process(struct exec_req *e)
{
	if (e->phase != RUNNING)
		return;
	proc_signal_group(e->ch, SIGTERM);
	e->phase = TERMINATING;
	arm(e, e->grace_ms);
}

static void timer_event(void *ctx, uint32_t events)
{
	struct exec_req *e = ctx;
	uint64_t v;

	(void)events;
	if (read(e->timer_fd, &v, sizeof(v)) < 0)
		return;
	switch (e->phase) {
	case RUNNING: /* the timeout */
		e->timed_out = true;
		stop_process(e);
		break;
	case TERMINATING:
		proc_signal_group(e->ch, SIGKILL);
		e->phase = KILLED;
		break;
	case LINGERING: /* output held open by an orphan: stop waiting for it */
		close_fd(e, &e->ch->out_fd);
		close_fd(e, &e->ch->err_fd);
		maybe_finish(e);
		break;
	case KILLED:
		break;
	}
}

static void on_exit_cb(struct child *ch)
{
	struct exec_req *e = ch->owner;

	close_fd(e, &ch->in_fd);
	if (!output_open(e)) {
		exec_finish(e);
		return;
	}
	/* Timed-out and cancelled groups were signalled; others get a grace to flush. */
	e->phase = LINGERING;
	arm(e, LINGER_MS);
}

static void exec_frame(struct req *r, const struct frame *f)
{
	struct exec_req *e = (struct exec_req *)r;
	json_t *j;

	switch (f->type) {
	case FRAME_DATA:
	case FRAME_STDIN:
		if ((f->type == FRAME_DATA) != e->mode->data) {
			conn_send_error(r->conn, r->id, "bad_frame",
			                "%s frames do not go to this request",
			                frame_type_name(f->type));
			return;
		}
		if (e->ch->in_fd < 0 || e->stdin_eof)
			return;
		e->bytes += f->len;
		if (f->len) {
			uint8_t *nb = realloc(e->in_buf, e->in_len + f->len);

			if (!nb)
				return;
			e->in_buf = nb;
			memcpy(e->in_buf + e->in_len, f->payload, f->len);
			e->in_len += f->len;
		}
		if (f->flags & FRAME_F_END)
			e->stdin_eof = true;
		if (e->in_len >= STDIN_HOLD && !e->held) {
			e->held = true;
			conn_hold_input(r->conn, true);
		}
		flush_stdin(e);
		return;
	case FRAME_CANCEL:
		e->cancelled = true;
		stop_process(e);
		return;
	case FRAME_WINDOW:
		j = json_loadb((const char *)f->payload, f->len, 0, NULL);
		if (e->ch->pty && j) {
			struct winsize ws = {
				.ws_row = (unsigned short)json_integer_value(
					json_object_get(j, "rows")),
				.ws_col = (unsigned short)json_integer_value(
					json_object_get(j, "cols")),
			};

			if (ws.ws_row && ws.ws_col)
				ioctl(e->ch->out_fd, TIOCSWINSZ, &ws);
		}
		json_decref(j);
		return;
	default:
		conn_send_error(r->conn, r->id, "bad_frame",
		                "exec takes STDIN, CANCEL and WINDOW frames");
	}
}

static void exec_drain(struct req *r)
{
	struct exec_req *e = (struct exec_req *)r;

	if (conn_queued(r->conn) < OUTQ_LOW)
		set_output_paused(e, false);
}

static void exec_free(struct exec_req *e)
{
	close_fd(e, &e->ch->out_fd);
	close_fd(e, &e->ch->err_fd);
	close_fd(e, &e->ch->in_fd);
	e->ch->on_exit = NULL;
	proc_free(e->ch);
	close_fd(e, &e->timer_fd);
	free(e->in_buf);
	free(e);
}

static void exec_conn_lost(struct req *r)
{
	struct exec_req *e = (struct exec_req *)r;

	/*
	 * Kept (keep: true): a connection that drops with a pause or a restore
	 * ends with it, the process does not. It runs on with stdin at EOF, its
	 * output drained, until it exits or its timeout ends it.
	 */
	if (e->keep && !e->ch->exited) {
		e->orphan = true;
		e->held = false;
		e->r.conn = NULL;
		close_fd(e, &e->ch->in_fd);
		set_output_paused(e, false);
		return;
	}

	/* Nobody is listening: end the process tree; it is reaped as an orphan. */
	proc_signal_group(e->ch, SIGKILL);
	e->held = false;
	exec_free(e);
}

static const struct req_ops exec_ops = {
	.on_frame = exec_frame,
	.on_drain = exec_drain,
	.on_conn_lost = exec_conn_lost,
};

static void exec_finish(struct exec_req *e)
{
	struct child *ch = e->ch;
	json_t *res;
	int st = ch->status;

	if (e->orphan) {
		exec_free(e);
		return;
	}
	res = json_object();
	if (e->mode->data) {
		json_decref(res);
		if (e->held)
			conn_hold_input(e->r.conn, false);
		e->held = false;
		req_unregister(&e->r);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			conn_send_json(e->r.conn, FRAME_RESULT, e->r.id,
			               json_pack("{s:I}", "size", (json_int_t)e->bytes));
		else
			conn_send_error(e->r.conn, e->r.id, "io_error", "%s failed: %.*s",
			                e->mode->name, (int)e->err_len,
			                e->err_len ? e->err : "no message");
		exec_free(e);
		return;
	}

	if (WIFEXITED(st)) {
		json_object_set_new(res, "exit_code", json_integer(WEXITSTATUS(st)));
		json_object_set_new(res, "signal", json_null());
	} else {
		/* Killed: 128 + signal, as a shell reports it. */
		json_object_set_new(res, "exit_code", json_integer(128 + WTERMSIG(st)));
		json_object_set_new(res, "signal", json_integer(WTERMSIG(st)));
	}
	json_object_set_new(res, "duration_ms",
	                    json_integer((json_int_t)(ch->ended_ms - ch->started_ms)));
	json_object_set_new(res, "timed_out", json_boolean(e->timed_out));
	json_object_set_new(res, "cancelled", json_boolean(e->cancelled));
	if (e->held)
		conn_hold_input(e->r.conn, false);
	e->held = false;
	req_unregister(&e->r);
	conn_send_json(e->r.conn, FRAME_RESULT, e->r.id, res);
	exec_free(e);
}

void exec_start(struct conn *c, uint32_t id, struct exec_opts *o, const struct exec_mode *mode)
{
	struct agent *a = conn_agent(c);
	struct exec_req *e = calloc(1, sizeof(*e));
	int ret;

	if (!e) {
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	e->a = a;
	e->mode = mode;
	e->grace_ms = o->grace_ms;
	e->keep = o->keep && !mode->data;
	e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	ret = e->timer_fd < 0 ? -errno : proc_spawn(a, &o->spawn, &e->ch);
	if (ret) {
		if (e->timer_fd >= 0)
			close(e->timer_fd);
		free(e);
		if (mode->data)
			conn_send_error(c, id, errno_code(-ret), "cannot run %s: %s", mode->name,
			                strerror(-ret));
		else /* like a shell: a program that cannot run exits 127, and says why */
			exec_report_spawn_failure(c, id, o, -ret);
		return;
	}
	e->ch->owner = e;
	e->ch->on_exit = on_exit_cb;
	req_register(c, &e->r, id, &exec_ops);
	if (evloop_add(a->loop, e->ch->out_fd, EPOLLIN, out_event, e) ||
	    (e->ch->err_fd >= 0 && evloop_add(a->loop, e->ch->err_fd, EPOLLIN, err_event, e)) ||
	    (e->ch->in_fd >= 0 && evloop_add(a->loop, e->ch->in_fd, 0, in_event, e)) ||
	    evloop_add(a->loop, e->timer_fd, EPOLLIN, timer_event, e)) {
		req_unregister(&e->r);
		proc_signal_group(e->ch, SIGKILL);
		exec_free(e);
		conn_send_error(c, id, "io_error", "cannot watch the process");
		return;
	}
	if (o->timeout_ms)
		arm(e, o->timeout_ms);
	/* It may have exited already, with its SIGCHLD not read yet: that comes. */
}

void op_exec(struct conn *c, uint32_t id, json_t *req)
{
	static const struct exec_mode mode = {.name = "exec"};
	struct exec_opts o;
	const char *why = NULL;

	if (exec_opts_parse(conn_agent(c), req, &o, &why)) {
		conn_send_error(c, id, "bad_request", "%s", why);
		return;
	}
	exec_start(c, id, &o, &mode);
	exec_opts_free(&o);
}
