// SPDX-License-Identifier: MIT
/* The fake HTTP transport (see test_http_fake.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test_http_fake.h"

static struct http_limits default_limits;

static int f_write(struct http_conn *c, char *buf, size_t len)
{
	struct fake_conn *f = (struct fake_conn *)c;

	if (f->fail_writes) {
		free(buf);
		return -EPIPE;
	}
	if (!f->out_keep && f->out_len + len + 1 > f->out_cap) {
		size_t cap = f->out_cap ? f->out_cap : 4096;
		char *p;

		while (cap < f->out_len + len + 1)
			cap *= 2;
		p = realloc(f->out, cap);
		if (!p) {
			free(buf);
			return -ENOMEM;
		}
		f->out = p;
		f->out_cap = cap;
	}
	if (!f->out_keep) {
		memcpy(f->out + f->out_len, buf, len);
		f->out[f->out_len + len] = '\0';
	}
	f->out_len += len;
	f->unsent += len;
	free(buf);
	return 0;
}

static void f_read_pause(struct http_conn *c, bool paused)
{
	((struct fake_conn *)c)->paused = paused;
}

static void f_timer(struct http_conn *c, int ms)
{
	((struct fake_conn *)c)->timer_ms = ms;
}

static void f_shutdown(struct http_conn *c)
{
	((struct fake_conn *)c)->shut = true;
}

static void f_close(struct http_conn *c)
{
	((struct fake_conn *)c)->closed = true;
}

static const struct http_transport_ops fake_ops = {
	.write = f_write,
	.read_pause = f_read_pause,
	.timer = f_timer,
	.shutdown = f_shutdown,
	.close = f_close,
};

void fake_init(struct fake_conn *f, const struct http_limits *lim, http_handler handler, void *ctx)
{
	size_t keep = f->out_keep;

	memset(f, 0, sizeof(*f));
	f->out_keep = keep;
	f->timer_ms = -1;
	if (!lim) {
		struct http_config cfg = {0};

		http_limits_init(&default_limits, &cfg);
		lim = &default_limits;
	}
	http_conn_init(&f->c, &fake_ops, lim, handler, ctx);
}

int fake_run(struct fake_conn *f)
{
	for (int i = 0; i < 10000; i++) {
		if (!f->hold && f->unsent) {
			size_t n = f->unsent;

			f->unsent = 0;
			http_conn_sent(&f->c, n, 0);
		} else if (f->timer_ms == 0 && !f->closed) {
			f->timer_ms = -1;
			http_conn_timer(&f->c);
		} else {
			return 0;
		}
	}
	return -1;
}

int fake_feed(struct fake_conn *f, const void *data, size_t len)
{
	if (!f->closed)
		http_conn_feed(&f->c, data, len);
	return fake_run(f);
}

int fake_feeds(struct fake_conn *f, const char *s)
{
	return fake_feed(f, s, strlen(s));
}

int fake_fire(struct fake_conn *f)
{
	if (f->timer_ms >= 0 && !f->closed) {
		f->timer_ms = -1;
		http_conn_timer(&f->c);
	}
	return fake_run(f);
}

void fake_clear(struct fake_conn *f)
{
	f->out_len = 0;
	if (f->out)
		f->out[0] = '\0';
}

void fake_free(struct fake_conn *f)
{
	if (!f->closed)
		http_conn_abort(&f->c);
	/* A deferred abort (inside a call) runs from the timer. */
	if (!f->closed)
		fake_fire(f);
	http_conn_release(&f->c);
	free(f->out);
	f->out = NULL;
}
