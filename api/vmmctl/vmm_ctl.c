// SPDX-License-Identifier: MIT
#include "vmm_ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int vmm_ctl(const char *path, const char *cmd, char *reply, size_t len, int timeout_ms)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	long long until = mono_ms() + timeout_ms;
	char line[512];
	size_t got = 0;
	int fd, ret = 0;

	if (len)
		reply[0] = '\0';
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || dprintf(fd, "%s\n", cmd) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (!memchr(line, '\n', got)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = until - mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			ret = -ETIMEDOUT;
			break;
		}
		n = read(fd, line + got, sizeof(line) - 1 - got);
		if (n <= 0) {
			ret = n == 0 ? -ECONNRESET : -errno;
			if (ret == -EINTR)
				continue;
			break;
		}
		got += (size_t)n;
		if (got == sizeof(line) - 1) {
			ret = -EPROTO;
			break;
		}
	}
	close(fd);
	if (ret)
		return ret;
	line[strcspn(line, "\n")] = '\0';
	if (len)
		snprintf(reply, len, "%s",
		         strncmp(line, "OK ", 3) == 0    ? line + 3
		         : strncmp(line, "ERR ", 4) == 0 ? line + 4
		                                         : line);
	return strncmp(line, "OK", 2) == 0 ? 0 : -EPROTO;
}
