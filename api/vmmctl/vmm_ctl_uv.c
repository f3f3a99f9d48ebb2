// SPDX-License-Identifier: MIT
#include "vmm_ctl_uv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_LEN 512

struct vmm_ctl {
	uv_pipe_t pipe;
	uv_timer_t timer;
	uv_connect_t conn;
	uv_write_t wr;
	char *cmd;
	size_t cmd_len;
	char line[LINE_MAX_LEN];
	size_t got;
	vmm_ctl_fn fn;
	void *arg;
	int handles; /* still open: the ctl is freed when both have closed */
	bool answered;
};

static void handle_closed(uv_handle_t *h)
{
	struct vmm_ctl *c = h->data;

	if (--c->handles == 0) {
		/* A command may carry a key (husk-vmm's "key HEX"): not left in freed memory. */
		explicit_bzero(c->cmd, c->cmd_len);
		free(c->cmd);
		free(c);
	}
}

/* Answers once, then closes everything. */
static void finish(struct vmm_ctl *c, int rc, const char *reply)
{
	if (c->answered)
		return;
	c->answered = true;
	c->fn(c->arg, rc, reply);
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, handle_closed);
	uv_close((uv_handle_t *)&c->pipe, handle_closed);
}

static void fail(struct vmm_ctl *c, int rc, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-rc));
	finish(c, rc, msg);
}

static void on_timeout(uv_timer_t *t)
{
	struct vmm_ctl *c = t->data;

	finish(c, -ETIMEDOUT, "no answer from husk-vmm's control socket in time");
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct vmm_ctl *c = h->data;

	(void)hint;
	buf->base = c->line + c->got;
	buf->len = sizeof(c->line) - 1 - c->got;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct vmm_ctl *c = s->data;
	char *nl;

	(void)buf;
	if (n < 0) {
		fail(c, n == UV_EOF ? -ECONNRESET : (int)n, "husk-vmm's control socket");
		return;
	}
	c->got += (size_t)n;
	c->line[c->got] = '\0';
	nl = memchr(c->line, '\n', c->got);
	if (!nl) {
		if (c->got == sizeof(c->line) - 1)
			finish(c, -EPROTO, "husk-vmm's answer is too long");
		return;
	}
	*nl = '\0';
	if (!strncmp(c->line, "OK", 2))
		finish(c, 0, c->line[2] == ' ' ? c->line + 3 : c->line + 2);
	else
		finish(c, -EPROTO, !strncmp(c->line, "ERR ", 4) ? c->line + 4 : c->line);
}

static void on_written(uv_write_t *w, int status)
{
	struct vmm_ctl *c = w->data;

	if (status < 0)
		fail(c, status, "cannot write to husk-vmm's control socket");
}

static void on_connect(uv_connect_t *req, int status)
{
	struct vmm_ctl *c = req->data;
	uv_buf_t buf = uv_buf_init(c->cmd, (unsigned)c->cmd_len);
	int rc;

	if (c->answered)
		return;
	if (status < 0) {
		fail(c, status, "cannot reach husk-vmm's control socket");
		return;
	}
	c->wr.data = c;
	rc = uv_write(&c->wr, (uv_stream_t *)&c->pipe, &buf, 1, on_written);
	if (!rc)
		rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
	if (rc)
		fail(c, rc, "cannot talk to husk-vmm's control socket");
}

void vmm_ctl_abort(struct vmm_ctl *c)
{
	finish(c, -ECANCELED, "cancelled");
}

int vmm_ctl_send(uv_loop_t *loop, const char *path, const char *cmd, unsigned timeout_ms,
                 vmm_ctl_fn fn, void *arg, struct vmm_ctl **out)
{
	struct vmm_ctl *c = calloc(1, sizeof(*c));
	int rc;

	if (!c || asprintf(&c->cmd, "%s\n", cmd) < 0) {
		free(c);
		return -ENOMEM;
	}
	c->cmd_len = strlen(c->cmd);
	c->fn = fn;
	c->arg = arg;
	rc = uv_pipe_init(loop, &c->pipe, 0);
	if (rc) {
		free(c->cmd);
		free(c);
		return rc;
	}
	uv_timer_init(loop, &c->timer);
	c->pipe.data = c->timer.data = c->conn.data = c;
	c->handles = 2;
	uv_timer_start(&c->timer, on_timeout, timeout_ms, 0);
	uv_pipe_connect(&c->conn, &c->pipe, path, on_connect);
	if (out)
		*out = c;
	return 0;
}
