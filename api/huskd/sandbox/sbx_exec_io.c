// SPDX-License-Identifier: MIT
/*
 * An execution's streams: its output files (its own, or the user streams
 * stream.stdout / stream.stderr name), timestamps on their lines, and its
 * stdin read from a user stream as that stream is written (the session
 * asks for more as its write queue drains; the stream's writer wakes it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "outbuf.h"
#include "proto.h"
#include "sbx_exec_io.h"
#include "sbx_int.h"

static void stdin_drop(struct exec_io *io)
{
	if (!io->in)
		return;
	outbuf_unwatch(io->in, io);
	outbuf_unref(io->in);
	io->in = NULL;
	if (io->in_fd >= 0)
		close(io->in_fd);
	io->in_fd = -1;
}

/* The stdin stream grew or ended: the session asks stdin_read again. */
static void stdin_more(void *arg)
{
	struct exec_io *io = arg;

	if (io->call)
		agent_call_input_ready(io->call);
}

/* stream.stdin: the user stream the command reads, watched for more. */
static int open_stdin(struct exec_io *io, struct sandbox *sb, const char *id, struct sbx_err *err)
{
	int rc = sbx_streams_input(sb->m, sb->org, id, &io->in, err);

	if (rc)
		return sbx_fail(err, SBX_BAD_INPUT, rc, "stream.stdin: %s", err->msg);
	io->in_fd = open(outbuf_path(io->in), O_RDONLY | O_CLOEXEC);
	if (io->in_fd < 0 || outbuf_watch(io->in, stdin_more, io)) {
		rc = io->in_fd < 0 ? -errno : -ENOMEM;
		stdin_drop(io);
		return sbx_fail(err, SBX_UNAVAILABLE, rc, "cannot read stream %s: %s", id,
		                strerror(-rc));
	}
	return 0;
}

/*
 * Output stream which unless stream says "ignore": the user stream it names
 * (stderr naming stdout's shares it), else one of its own. Its URL goes in
 * info, its id in priv.
 */
static int open_output(struct sandbox *sb, int which, json_t *stream, const char *base,
                       struct outbuf *out[2], json_t *info, json_t *priv, struct sbx_err *err)
{
	static const char *const names[] = {"stdout", "stderr"};
	const char *want = json_string_value(json_object_get(stream, names[which]));
	const char *other = json_string_value(json_object_get(stream, "stdout"));
	char sid[STORE_ID_LEN], key[32];
	int rc;

	if (want && !strcmp(want, "ignore"))
		return 0;
	if (want && which == 1 && other && !strcmp(want, other) && out[0]) {
		outbuf_ref(out[0]);
		out[1] = out[0];
		snprintf(sid, sizeof(sid), "%s", want);
	} else if (want) {
		rc = sbx_streams_take(sb->m, sb->org, want, &out[which], err);
		if (rc)
			return sbx_fail(err, SBX_BAD_INPUT, rc, "stream.%s: %s", names[which],
			                err->msg);
		snprintf(sid, sizeof(sid), "%s", want);
	} else {
		rc = store_new_id("str_", sid);
		if (!rc)
			rc = outbuf_create(sb->m->streams, sid, sb->m->cfg.output_limit,
			                   &out[which]);
		if (rc)
			return sbx_fail(err, SBX_INTERNAL, rc, "cannot make an output stream: %s",
			                strerror(-rc));
	}
	snprintf(key, sizeof(key), "%sStreamUrl", names[which]);
	json_object_set_new(info, key, json_sprintf("%s/streams/%s", base, sid));
	snprintf(key, sizeof(key), "%sStream", names[which]);
	json_object_set_new(priv, key, json_string(sid));
	return 0;
}

int sbx_exec_io_outputs(struct sandbox *sb, json_t *stream, const char *base, struct outbuf *out[2],
                        json_t *info, json_t *priv, struct sbx_err *err)
{
	int rc = open_output(sb, 0, stream, base, out, info, priv, err);

	if (!rc)
		rc = open_output(sb, 1, stream, base, out, info, priv, err);
	if (rc)
		for (int i = 0; i < 2; i++) {
			/* A user stream taken for the output stays taken: it ends, empty. */
			if (out[i])
				outbuf_close(out[i]);
			outbuf_unref(out[i]);
			out[i] = NULL;
		}
	return rc;
}

int sbx_exec_io_open(struct exec_io *io, struct sandbox *sb, const struct sbx_exec_req *req,
                     json_t *info, json_t *priv, struct sbx_err *err)
{
	const char *in = json_string_value(json_object_get(req->stream, "stdin"));
	int rc = 0;

	*io = (struct exec_io){.in_fd = -1};
	io->stamps = json_is_true(json_object_get(req->stream, "timestamps"));
	if (in && strcmp(in, "ignore"))
		rc = open_stdin(io, sb, in, err);
	if (!rc)
		rc = sbx_exec_io_outputs(sb, req->stream, req->base, io->out, info, priv, err);
	if (rc)
		sbx_exec_io_free(io);
	return rc;
}

/* Output with "2026-11-28T03:40:01.123Z " (when huskd got it) at each line's start. */
static void append_stamped(struct exec_io *io, int which, const char *p, size_t len)
{
	struct outbuf *ob = io->out[which];
	struct timespec ts;
	struct tm tm;
	char stamp[40];
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = (int)strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(stamp + n, sizeof(stamp) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
	while (len) {
		const char *nl = memchr(p, '\n', len);
		size_t k = nl ? (size_t)(nl - p) + 1 : len;

		if (!io->mid[which])
			outbuf_append(ob, stamp, (size_t)n);
		outbuf_append(ob, p, k);
		io->mid[which] = !nl;
		p += k;
		len -= k;
	}
}

void sbx_exec_io_output(struct exec_io *io, uint8_t type, const void *p, size_t len)
{
	int which = type == FRAME_STDERR;

	if ((type != FRAME_STDOUT && type != FRAME_STDERR) || !io->out[which])
		return;
	/* Past the output limit outbuf keeps no more; the command runs on. */
	if (io->stamps)
		append_stamped(io, which, p, len);
	else
		outbuf_append(io->out[which], p, len);
}

/* The command's stdin from the stream: what is written so far; the end once it is closed. */
static long stdin_read(void *arg, void *buf, size_t cap, bool *end)
{
	struct exec_io *io = arg;
	ssize_t n = pread(io->in_fd, buf, cap, (off_t)io->in_off);

	if (n < 0)
		return -errno;
	io->in_off += (uint64_t)n;
	*end = !n && outbuf_closed(io->in);
	return (long)n;
}

/* The session needs no more of it (all sent, or the command ended first). */
static void stdin_sent(void *arg)
{
	stdin_drop(arg);
}

const struct agent_input *sbx_exec_io_input(struct exec_io *io, struct agent_input *buf)
{
	if (!io->in)
		return NULL;
	*buf = (struct agent_input){.type = FRAME_STDIN,
	                            .read = stdin_read,
	                            .read_arg = io,
	                            .release = stdin_sent,
	                            .release_arg = io};
	return buf;
}

void sbx_exec_io_end(struct exec_io *io)
{
	for (int i = 0; i < 2; i++)
		if (io->out[i])
			outbuf_close(io->out[i]);
}

bool sbx_exec_io_truncated(const struct exec_io *io)
{
	return (io->out[0] && outbuf_truncated(io->out[0])) ||
	       (io->out[1] && outbuf_truncated(io->out[1]));
}

void sbx_exec_io_free(struct exec_io *io)
{
	stdin_drop(io);
	for (int i = 0; i < 2; i++) {
		outbuf_unref(io->out[i]);
		io->out[i] = NULL;
	}
}
