// SPDX-License-Identifier: MIT
/*
 * The agent's listening socket: vsock port 52 in a guest, a Unix socket on
 * the host (tests). Every accepted connection is served by server.c.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "agent.h"
#include "evloop.h"

static void listener_event(void *ctx, uint32_t events)
{
	struct agent *a = ctx;
	int fd;

	(void)events;
	while ((fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		/* Out of memory or loop slots: this one is dropped, the next may fit. */
		if (conn_adopt(a, fd, NULL))
			continue;
	}
}

static int agent_listen_fd(struct agent *a, int fd)
{
	if (listen(fd, 128) < 0 || evloop_add(a->loop, fd, EPOLLIN, listener_event, a)) {
		int e = errno ? errno : ENOMEM;

		close(fd);
		return -e;
	}
	a->listen_fd = fd;
	return 0;
}

int agent_listen_unix(struct agent *a, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return agent_listen_fd(a, fd);
}

int agent_listen_vsock(struct agent *a, unsigned port)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return agent_listen_fd(a, fd);
}
