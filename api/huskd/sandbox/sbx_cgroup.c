// SPDX-License-Identifier: MIT
#include "sbx_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int cgroup_cpu_max(const char *dir, int64_t millis)
{
	char file[4200], val[64];
	int fd, n, rc = 0;

	snprintf(file, sizeof(file), "%s/cpu.max", dir);
	if (millis)
		n = snprintf(val, sizeof(val), "%lld 100000\n", (long long)millis * 100);
	else
		n = snprintf(val, sizeof(val), "max 100000\n");
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}
