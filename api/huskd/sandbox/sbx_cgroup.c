// SPDX-License-Identifier: MIT
#include "sbx_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int put(const char *dir, const char *name, const char *val)
{
	char file[4200];
	size_t n = strlen(val);
	int fd, rc = 0;

	snprintf(file, sizeof(file), "%s/%s", dir, name);
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, n) != (ssize_t)n)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}

int cgroup_cpu_max(const char *dir, int64_t millis)
{
	char val[64];

	if (millis)
		snprintf(val, sizeof(val), "%lld 100000\n", (long long)millis * 100);
	else
		snprintf(val, sizeof(val), "max 100000\n");
	return put(dir, "cpu.max", val);
}

uint64_t cgroup_memory_for(uint64_t guest_mib)
{
	return (guest_mib + CGROUP_VMM_OVERHEAD_MIB + guest_mib / 8) << 20;
}

int cgroup_limits(const char *dir, uint64_t guest_mib, unsigned pids, const char **what)
{
	char val[32];
	int rc;

	snprintf(val, sizeof(val), "%llu\n", (unsigned long long)cgroup_memory_for(guest_mib));
	*what = "memory.max";
	rc = put(dir, "memory.max", val);
	if (!rc) {
		*what = "memory.swap.max";
		rc = put(dir, "memory.swap.max", "0\n");
		/* Where swap is not accounted the file is missing: nothing to hold. */
		if (rc == -ENOENT)
			rc = 0;
	}
	/* Past memory.max the kernel kills the VMM, never a neighbour; the whole group. */
	if (!rc) {
		*what = "memory.oom.group";
		rc = put(dir, "memory.oom.group", "1\n");
	}
	if (!rc) {
		*what = "pids.max";
		snprintf(val, sizeof(val), "%u\n", pids);
		rc = put(dir, "pids.max", val);
	}
	return rc;
}
