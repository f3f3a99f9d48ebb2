// SPDX-License-Identifier: MIT
#include "sbx_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

/* First line of a sysfs file, without its newline. */
static int read_line(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	out[n] = 0;
	out[strcspn(out, "\n")] = 0;
	return 0;
}

int cgroup_disk_of(const char *path, char out[CGROUP_DISK_LEN])
{
	char sys[96], parent[128];
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	if (major(st.st_dev) == 0)
		return -ENODEV;
	snprintf(out, CGROUP_DISK_LEN, "%u:%u", major(st.st_dev), minor(st.st_dev));
	snprintf(sys, sizeof(sys), "/sys/dev/block/%s", out);
	if (access(sys, F_OK) < 0)
		return -ENODEV;
	/* io.max takes whole disks: a partition's limits are its disk's. */
	snprintf(parent, sizeof(parent), "%s/partition", sys);
	if (access(parent, F_OK) == 0) {
		snprintf(parent, sizeof(parent), "%s/../dev", sys);
		return read_line(parent, out, CGROUP_DISK_LEN);
	}
	return 0;
}

int cgroup_io(const char *dir, const struct cgroup_io_limits *io, unsigned vcpus, const char **what)
{
	char val[160];
	int rc;

	/* A share of the disk in proportion to the sandbox's vCPUs, as for CPU time. */
	snprintf(val, sizeof(val), "default %u\n",
	         vcpus ? (vcpus > 100 ? 10000 : vcpus * 100) : 100);
	*what = "io.weight";
	rc = put(dir, "io.weight", val);
	/* Only the BFQ scheduler or iocost weigh I/O; without them the file is missing. */
	if (rc == -ENOENT)
		rc = 0;
	if (rc || !io->disk[0] || (!io->bps && !io->iops))
		return rc;
	*what = "io.max";
	snprintf(val, sizeof(val), "%s", io->disk);
	if (io->bps)
		snprintf(val + strlen(val), sizeof(val) - strlen(val), " rbps=%llu wbps=%llu",
		         (unsigned long long)io->bps, (unsigned long long)io->bps);
	if (io->iops)
		snprintf(val + strlen(val), sizeof(val) - strlen(val), " riops=%llu wiops=%llu",
		         (unsigned long long)io->iops, (unsigned long long)io->iops);
	strcat(val, "\n");
	return put(dir, "io.max", val);
}
