// SPDX-License-Identifier: MIT
/*
 * A file read from the guest (file.read), answered as it comes: the answer
 * starts at the first DATA frame, whose bytes - and the rest's - go into an
 * unlinked file under state/streams that the HTTP reader follows (an
 * outbuf), so neither huskd's memory nor a whole-file wait bounds a read;
 * cfg.read_max does, and the disk. A read that breaks after its answer began
 * cannot change the status any more: the stream is marked failed and its
 * reader cuts the connection, so a client never takes part of a file for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbuf.h"
#include "proto.h"
#include "sbx_int.h"
#include "sbx_text.h"

struct rd {
	struct sandbox *sb;
	sbx_done_fn done;
	void *ctx;
	struct outbuf *ob; /* made at the first bytes (or at the end of an empty file) */
	int fd;            /* ob's file, to read by */
	uint64_t got;
	bool started; /* done() has had the answer */
	bool over;    /* past cfg.read_max: the agent was told to stop */
	bool broken;  /* the host could not keep the bytes */
};

/* The stream to answer with, made once; false if it cannot be. */
static bool rd_open(struct rd *r)
{
	if (r->ob)
		return true;
	if (outbuf_create_anon(r->sb->m->streams, UINT64_MAX, &r->ob, &r->fd)) {
		r->ob = NULL;
		r->broken = true;
		return false;
	}
	return true;
}

static void rd_answer(struct rd *r)
{
	struct sbx_reply reply = {.has_fd = true, .fd = r->fd, .live = r->ob};

	r->started = true;
	r->done(r->ctx, NULL, &reply);
}

static bool rd_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct rd *r = arg;

	if (type != FRAME_DATA)
		return false;
	/* Past the limit nothing more is kept, and the agent is told to stop sending. */
	if (r->over || r->broken)
		return true;
	if (len > r->sb->m->cfg.read_max - r->got) {
		r->over = true;
		return true;
	}
	if (!rd_open(r))
		return true;
	outbuf_append(r->ob, p, len);
	r->got += len;
	if (outbuf_truncated(r->ob)) { /* the host's disk is full */
		r->broken = true;
		return true;
	}
	if (!r->started)
		rd_answer(r);
	return false;
}

static void rd_done(void *arg, int rc, json_t *out, const struct sbx_err *err)
{
	struct rd *r = arg;
	struct sbx_err e;

	if (r->started) {
		if (rc || r->over || r->broken)
			outbuf_fail(r->ob);
		else
			outbuf_close(r->ob);
	} else if (r->over) { /* whatever the agent said to the cancel */
		sbx_fail(&e, SBX_TOO_LARGE, -EFBIG,
		         "the file has over %llu MiB; read big files with the archive download",
		         (unsigned long long)(r->sb->m->cfg.read_max >> 20));
		r->done(r->ctx, &e, NULL);
	} else if (rc > 0) {
		sbx_agent_error(out, &e, NULL);
		r->done(r->ctx, &e, NULL);
	} else if (rc) {
		r->done(r->ctx, err, NULL);
	} else if (r->broken || !rd_open(r)) {
		sbx_fail(&e, SBX_UNAVAILABLE, -EIO,
		         "cannot keep the file on the host while it is sent (is %s full?)",
		         r->sb->m->streams);
		r->done(r->ctx, &e, NULL);
	} else { /* an empty file: its stream ends at once */
		outbuf_close(r->ob);
		rd_answer(r);
	}
	if (r->ob) {
		outbuf_unref(r->ob);
		close(r->fd);
	}
	free(r);
}

static const struct sbx_call_ops rd_ops = {.data = rd_data, .done = rd_done};

void sbx_fs_read(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done, void *ctx)
{
	struct sbx_err err;
	struct sandbox *sb = sbx_lookup(m, id, &err);
	struct rd *r = sb ? calloc(1, sizeof(*r)) : NULL;
	char full[4096];
	json_t *req;

	if (!r) {
		if (sb)
			sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return;
	}
	*r = (struct rd){.sb = sb, .done = done, .ctx = ctx, .fd = -1};
	workspace_path(sbx_workspace(sb), path, full, sizeof(full));
	req = json_pack("{ssss}", "op", "file.read", "path", full);
	sbx_call(sb, req, NULL, &rd_ops, r);
	json_decref(req);
}
