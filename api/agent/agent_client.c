// SPDX-License-Identifier: MIT
#include "agent_client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536

struct agent_client {
	int fd;
	volatile sig_atomic_t cancel;
	uint32_t next_id;
	struct frame_reader rd;
	uint8_t buf[CHUNK];
	size_t buf_off, buf_len;
};

static int connect_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int client_new(int fd, struct agent_client **out)
{
	struct agent_client *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->next_id = 1;
	/* The agent sends data in chunks well under this; results are small. */
	frame_reader_init(&c->rd, FRAME_MAX_PAYLOAD);
	*out = c;
	return 0;
}

int agent_client_connect_unix(const char *path, struct agent_client **out)
{
	int fd = connect_unix(path);

	return fd < 0 ? fd : client_new(fd, out);
}

int agent_client_connect_vsock(const char *uds_path, uint32_t port, struct agent_client **out)
{
	char line[64];
	size_t n = 0;
	int fd = connect_unix(uds_path), len;

	if (fd < 0)
		return fd;
	len = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write(fd, line, (size_t)len) != len) {
		close(fd);
		return -EIO;
	}
	/* Read the reply a byte at a time: what follows it is protocol. */
	while (n < sizeof(line) - 1) {
		ssize_t r = read(fd, line + n, 1);

		if (r <= 0) {
			close(fd);
			return r == 0 ? -ECONNREFUSED : -errno;
		}
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	if (strncmp(line, "OK ", 3)) {
		close(fd);
		return -ECONNREFUSED;
	}
	return client_new(fd, out);
}

void agent_client_close(struct agent_client *c)
{
	if (!c)
		return;
	close(c->fd);
	frame_reader_free(&c->rd);
	free(c);
}

void agent_client_cancel(struct agent_client *c)
{
	c->cancel = 1;
}

uint32_t agent_client_next_id(struct agent_client *c)
{
	return c->next_id++;
}

int agent_client_fd(const struct agent_client *c)
{
	return c->fd;
}

/* To the agent: send() so a dead peer is an error, not SIGPIPE. */
static int send_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

int agent_client_send(struct agent_client *c, uint8_t type, uint8_t flags, uint32_t id,
                      const void *payload, size_t len)
{
	uint8_t hdr[FRAME_HDR_SIZE];
	int ret;

	if (len > FRAME_MAX_PAYLOAD)
		return -EMSGSIZE;
	frame_encode_hdr(hdr, type, flags, id, (uint32_t)len);
	ret = send_all(c->fd, hdr, sizeof(hdr));
	return ret || !len ? ret : send_all(c->fd, payload, len);
}

int agent_client_send_json(struct agent_client *c, uint8_t type, uint32_t id, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	int ret;

	if (!s)
		return -ENOMEM;
	ret = agent_client_send(c, type, 0, id, s, strlen(s));
	free(s);
	return ret;
}

int agent_client_recv(struct agent_client *c, struct frame *f)
{
	for (;;) {
		while (c->buf_off < c->buf_len) {
			size_t used;
			enum frame_status st = frame_reader_feed(&c->rd, c->buf + c->buf_off,
			                                         c->buf_len - c->buf_off, &used, f);

			c->buf_off += used;
			if (st == FRAME_OK)
				return 0;
			if (st != FRAME_NEED_MORE)
				return -EPROTO;
		}
		ssize_t n = read(c->fd, c->buf, sizeof(c->buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		c->buf_off = 0;
		c->buf_len = (size_t)n;
	}
}

/* To the caller's files and pipes. */
static int write_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (fd >= 0 && len) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A final frame for id: 0 RESULT / 1 ERROR with *out parsed; else not final. */
static int final_frame(const struct frame *f, json_t **out)
{
	if (f->type != FRAME_RESULT && f->type != FRAME_ERROR)
		return -1;
	*out = json_loadb((const char *)f->payload, f->len, 0, NULL);
	if (!*out)
		*out = json_pack("{s:s, s:s}", "code", "bad_json", "message", "unreadable reply");
	return f->type == FRAME_ERROR;
}

#define MORE 2

/*
 * Takes one received frame of request id: 0 or 1 when it is the final one
 * (see final_frame()), MORE when its bytes went to out_fd or err_fd (or it
 * belonged to another request), -errno when they could not be written.
 */
static int take_frame(const struct frame *f, uint32_t id, int out_fd, int err_fd, json_t **out)
{
	int ret;

	if (f->id != id)
		return MORE;
	ret = final_frame(f, out);
	if (ret >= 0)
		return ret;
	ret = write_all(f->type == FRAME_STDERR ? err_fd : out_fd, f->payload, f->len);
	return ret ? ret : MORE;
}

/* Reads frames for id, handing DATA/STDOUT/STDERR to fds, until the final one. */
static int collect(struct agent_client *c, uint32_t id, int out_fd, int err_fd, json_t **out)
{
	struct frame f;
	int ret;

	do {
		ret = agent_client_recv(c, &f);
		if (!ret)
			ret = take_frame(&f, id, out_fd, err_fd, out);
	} while (ret == MORE);
	return ret;
}

int agent_call(struct agent_client *c, json_t *req, json_t **out)
{
	uint32_t id = agent_client_next_id(c);
	int ret = agent_client_send_json(c, FRAME_REQUEST, id, req);

	return ret ? ret : collect(c, id, -1, -1, out);
}

int agent_stream_out(struct agent_client *c, json_t *req, int fd, json_t **out)
{
	uint32_t id = agent_client_next_id(c);
	int ret = agent_client_send_json(c, FRAME_REQUEST, id, req);

	return ret ? ret : collect(c, id, fd, -1, out);
}

int agent_get(struct agent_client *c, const char *remote, int fd, json_t **out)
{
	json_t *req = json_pack("{s:s, s:s}", "op", "file.read", "path", remote);
	int ret = agent_stream_out(c, req, fd, out);

	json_decref(req);
	return ret;
}

/* Sends fd's bytes as frames of type for id, the last one flagged END. */
static int send_fd(struct agent_client *c, uint8_t type, uint32_t id, int fd)
{
	uint8_t buf[CHUNK];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		int ret;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		ret = agent_client_send(c, type, n ? 0 : FRAME_F_END, id, buf, (size_t)n);
		if (ret || n == 0)
			return ret;
	}
}

int agent_stream_in(struct agent_client *c, json_t *req, int fd, json_t **out)
{
	uint32_t id = agent_client_next_id(c);
	int ret = agent_client_send_json(c, FRAME_REQUEST, id, req);

	/* An early ERROR (bad path) arrives while we send; it waits in the socket. */
	if (!ret)
		ret = send_fd(c, FRAME_DATA, id, fd);
	return ret && ret != -EPIPE ? ret : collect(c, id, -1, -1, out);
}

int agent_put(struct agent_client *c, const char *remote, int fd, int mode, json_t **out)
{
	json_t *req = json_pack("{s:s, s:s}", "op", "file.write", "path", remote);
	int ret;

	if (mode >= 0)
		json_object_set_new(req, "mode", json_integer(mode));
	ret = agent_stream_in(c, req, fd, out);
	json_decref(req);
	return ret;
}

int agent_exec(struct agent_client *c, json_t *req, int in_fd, int out_fd, int err_fd, json_t **out)
{
	uint32_t id = agent_client_next_id(c);
	int ret = agent_client_send_json(c, FRAME_REQUEST, id, req), cancel_sent = 0;
	struct frame f;

	if (ret)
		return ret;
	c->cancel = 0;
	/* Feed stdin while output comes back: one poll over both. */
	for (;;) {
		struct pollfd p[2] = {{c->fd, POLLIN, 0}, {in_fd, POLLIN, 0}};

		if (c->cancel && !cancel_sent) {
			ret = agent_client_send(c, FRAME_CANCEL, 0, id, NULL, 0);
			if (ret)
				return ret;
			cancel_sent = 1;
		}
		/* Frames already read into our buffer do not make the socket readable. */
		if (c->buf_off < c->buf_len)
			p[0].revents = POLLIN;
		else if (poll(p, in_fd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (in_fd >= 0 && p[1].revents) {
			uint8_t buf[CHUNK];
			ssize_t n = read(in_fd, buf, sizeof(buf));

			if (n < 0 && errno == EINTR)
				continue;
			ret = agent_client_send(c, FRAME_STDIN, n > 0 ? 0 : FRAME_F_END, id, buf,
			                        n > 0 ? (size_t)n : 0);
			if (ret)
				return ret;
			if (n <= 0)
				in_fd = -1;
		}
		if (!p[0].revents)
			continue;
		ret = agent_client_recv(c, &f);
		if (!ret)
			ret = take_frame(&f, id, out_fd, err_fd, out);
		if (ret != MORE)
			return ret;
	}
}

int agent_resumed(struct agent_client *c)
{
	unsigned char seed[32];
	char hex[2 * sizeof(seed) + 1];
	struct timespec ts;
	json_t *req, *out = NULL;
	int rc;

	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return -EIO;
	for (size_t i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	clock_gettime(CLOCK_REALTIME, &ts);
	req = json_pack("{sssIss}", "op", "resumed", "time_ns",
	                (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec, "seed", hex);
	rc = req ? agent_call(c, req, &out) : -ENOMEM;
	explicit_bzero(hex, sizeof(hex));
	explicit_bzero(seed, sizeof(seed));
	json_decref(req);
	json_decref(out);
	return rc;
}
