// SPDX-License-Identifier: MIT
/*
 * The host side of an agent that dials home (guest-agent/PROTOCOL.md,
 * "Dialling home"), for the tests. Listens on the Unix socket PATH (for a
 * guest: husk-vmm's PATH_PORT, where its dial to host port PORT lands) and
 * serves N dials in turn: reads the HELLO, asks info, runs `echo hi`, then
 * closes the connection (--then close) or waits for the agent's side to end
 * it (--then wait). One line on stdout per event, flushed at once so a test
 * can wait for it:
 *   listening PATH
 *   hello N dial=D protocol=P boot_id=B agent=A   (B: null if null)
 *   info N protocol=P
 *   exec N exit=E stdout=S
 *   closed N by host | ended N by agent
 *   error N WHAT
 * usage: dialhost PATH [--conns N] [--then close|wait] [--timeout SECONDS]
 * Exit status 0 once all N are done; 1 on an error or a wait that timed out.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "proto.h"

static int timeout_ms = 30000;

/* One accepted connection and what has been read from it. */
struct peer {
	int fd;
	unsigned n; /* 1 for the first dial served */
	struct frame_reader rd;
	uint8_t buf[65536];
	size_t off, len;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* 0 once fd has events, -ETIMEDOUT after timeout_ms. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n;

	while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* The next frame: 0, -ENODATA at EOF, or -errno. */
static int recv_frame(struct peer *p, struct frame *f)
{
	for (;;) {
		while (p->off < p->len) {
			size_t used;
			enum frame_status st = frame_reader_feed(&p->rd, p->buf + p->off,
			                                         p->len - p->off, &used, f);

			p->off += used;
			if (st == FRAME_OK)
				return 0;
			if (st != FRAME_NEED_MORE)
				return -EPROTO;
		}
		int ret = wait_fd(p->fd, POLLIN);
		ssize_t n = ret ? -1 : recv(p->fd, p->buf, sizeof(p->buf), 0);

		if (ret)
			return ret;
		if (n <= 0)
			return n == 0 ? -ENODATA : -errno;
		p->off = 0;
		p->len = (size_t)n;
	}
}

static int send_json(struct peer *p, uint8_t type, uint32_t id, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	size_t len = s ? strlen(s) : 0, done = 0;
	uint8_t hdr[FRAME_HDR_SIZE];
	int ret = 0;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	frame_encode_hdr(hdr, type, 0, id, (uint32_t)len);
	if (send(p->fd, hdr, sizeof(hdr), MSG_NOSIGNAL) != (ssize_t)sizeof(hdr))
		ret = -EPIPE;
	while (!ret && done < len) {
		ssize_t n = send(p->fd, s + done, len - done, MSG_NOSIGNAL);

		if (n <= 0)
			ret = -EPIPE;
		else
			done += (size_t)n;
	}
	free(s);
	return ret;
}

/* The HELLO must be the first frame and carry exactly the four fields. */
static int read_hello(struct peer *p)
{
	struct frame f;
	json_t *j, *boot;
	int ret = recv_frame(p, &f);

	if (ret) {
		say("error %u no HELLO: %s", p->n, strerror(-ret));
		return ret;
	}
	j = json_loadb((const char *)f.payload, f.len, JSON_REJECT_DUPLICATES, NULL);
	boot = json_object_get(j, "boot_id");
	if (f.type != FRAME_HELLO || f.id != 0 || !json_is_object(j) || json_object_size(j) != 4 ||
	    !json_is_integer(json_object_get(j, "protocol")) ||
	    !json_is_integer(json_object_get(j, "dial")) ||
	    !json_is_string(json_object_get(j, "agent")) ||
	    !(json_is_string(boot) || json_is_null(boot))) {
		say("error %u first frame is not the HELLO: type %u id %u: %.*s", p->n, f.type,
		    f.id, (int)(f.len > 300 ? 300 : f.len), (const char *)f.payload);
		json_decref(j);
		return -EPROTO;
	}
	say("hello %u dial=%lld protocol=%lld boot_id=%s agent=%s", p->n,
	    (long long)json_integer_value(json_object_get(j, "dial")),
	    (long long)json_integer_value(json_object_get(j, "protocol")),
	    json_is_null(boot) ? "null" : json_string_value(boot),
	    json_string_value(json_object_get(j, "agent")));
	json_decref(j);
	return 0;
}

/*
 * Sends req as request id and waits for its RESULT (into *out); STDOUT
 * frames for it are gathered in out_buf. 0, 1 for an ERROR, or -errno.
 */
static int call(struct peer *p, uint32_t id, json_t *req, json_t **out, char *out_buf,
                size_t out_len)
{
	size_t have = 0;
	struct frame f;
	int ret = send_json(p, FRAME_REQUEST, id, req);

	while (!ret && !(ret = recv_frame(p, &f))) {
		if (f.id != id)
			continue;
		if (f.type == FRAME_STDOUT && out_buf) {
			size_t n = f.len < out_len - 1 - have ? f.len : out_len - 1 - have;

			memcpy(out_buf + have, f.payload, n);
			have += n;
			out_buf[have] = '\0';
		} else if (f.type == FRAME_RESULT || f.type == FRAME_ERROR) {
			*out = json_loadb((const char *)f.payload, f.len, 0, NULL);
			return f.type == FRAME_ERROR;
		}
	}
	return ret;
}

static int serve(struct peer *p)
{
	char out[256] = "";
	json_t *r = NULL;
	int ret = read_hello(p);

	if (!ret) {
		ret = call(p, 1, json_pack("{s:s}", "op", "info"), &r, NULL, 0);
		if (ret)
			say("error %u info failed: %d", p->n, ret);
		else
			say("info %u protocol=%lld", p->n,
			    (long long)json_integer_value(json_object_get(r, "protocol")));
		json_decref(r);
		r = NULL;
	}
	if (!ret) {
		ret = call(p, 2, json_pack("{s:s, s:[s,s]}", "op", "exec", "argv", "echo", "hi"),
		           &r, out, sizeof(out));
		out[strcspn(out, "\n")] = '\0';
		if (ret)
			say("error %u exec failed: %d", p->n, ret);
		else
			say("exec %u exit=%lld stdout=%s", p->n,
			    (long long)json_integer_value(json_object_get(r, "exit_code")), out);
		json_decref(r);
	}
	return ret ? 1 : 0;
}

/* Until the agent's side ends the connection; anything it sends is dropped. */
static int wait_end(struct peer *p)
{
	struct frame f;
	int ret;

	while ((ret = recv_frame(p, &f)) == 0)
		;
	if (ret == -ETIMEDOUT) {
		say("error %u the agent's side never ended the connection", p->n);
		return 1;
	}
	say("ended %u by agent", p->n);
	return 0;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int main(int argc, char **argv)
{
	unsigned conns = 1;
	bool then_close = false;
	int lfd, failed = 0;

	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--conns"))
			conns = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--then"))
			then_close = !strcmp(argv[i + 1], "close");
		else if (!strcmp(argv[i], "--timeout"))
			timeout_ms = atoi(argv[i + 1]) * 1000;
	}
	if (argc < 2 || argc % 2 || !conns || timeout_ms <= 0) {
		fprintf(stderr, "usage: dialhost PATH [--conns N] [--then close|wait] "
		                "[--timeout SECONDS]\n");
		return 2;
	}
	lfd = listen_unix(argv[1]);
	if (lfd < 0) {
		say("error 0 cannot listen on %s: %s", argv[1], strerror(-lfd));
		return 1;
	}
	say("listening %s", argv[1]);
	for (unsigned n = 1; n <= conns && !failed; n++) {
		struct peer *p = calloc(1, sizeof(*p));
		int ret = p ? wait_fd(lfd, POLLIN) : -ENOMEM;

		if (!ret && (p->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			ret = -errno;
		if (ret) {
			say("error %u no dial arrived: %s", n, strerror(-ret));
			free(p);
			failed = 1;
			break;
		}
		p->n = n;
		frame_reader_init(&p->rd, FRAME_MAX_PAYLOAD);
		failed = serve(p);
		if (!failed && then_close)
			say("closed %u by host", n);
		else if (!failed)
			failed = wait_end(p);
		close(p->fd);
		frame_reader_free(&p->rd);
		free(p);
	}
	close(lfd);
	unlink(argv[1]);
	return failed;
}
