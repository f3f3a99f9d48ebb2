// SPDX-License-Identifier: MIT
/*
 * Image and file work off the loop thread (layers made, frozen, rebased):
 * libuv's thread pool runs it, the loop gets the result. The work function
 * may read the sandbox's fields that do not change while it is held in a
 * busy state (paths, base); it never touches the store or the loop.
 */
#include <errno.h>
#include <stdlib.h>

#include "sbx_int.h"

struct work {
	uv_work_t req;
	struct sandbox *sb;
	int (*work)(struct sandbox *sb, void *arg);
	void (*done)(struct sandbox *sb, int rc, void *arg);
	void *arg;
	int rc;
};

static void work_run(uv_work_t *req)
{
	struct work *w = req->data;

	w->rc = w->work(w->sb, w->arg);
}

static void work_after(uv_work_t *req, int status)
{
	struct work *w = req->data;
	struct sandbox *sb = w->sb;

	w->done(sb, status == UV_ECANCELED ? -ECANCELED : w->rc, w->arg);
	free(w);
	sbx_drop(sb);
}

int sbx_work(struct sandbox *sb, int (*work)(struct sandbox *sb, void *arg),
             void (*done)(struct sandbox *sb, int rc, void *arg), void *arg)
{
	struct work *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	*w = (struct work){.sb = sb, .work = work, .done = done, .arg = arg};
	w->req.data = w;
	rc = uv_queue_work(sb->m->loop, &w->req, work_run, work_after);
	if (rc) {
		free(w);
		return rc;
	}
	sbx_hold(sb);
	return 0;
}
