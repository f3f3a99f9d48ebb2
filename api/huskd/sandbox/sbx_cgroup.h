/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_CGROUP_H
#define HUSK_SBX_CGROUP_H

/* A sandbox's cgroup v2 folder: its cpu quota, memory, process and disk limits. */
#include <stdint.h>

/* Writes dir/cpu.max: millis millicores (of 100 ms periods), or no limit (0). 0 or -errno. */
int cgroup_cpu_max(const char *dir, int64_t millis) __attribute__((warn_unused_result));

/*
 * What a guest's VMM may hold besides guest RAM: its own heap and libraries,
 * libslirp, snapshot buffers, and the page cache of its disk and snapshot
 * writes (charged to it; reclaimed under the limit), plus an eighth of RAM.
 */
#define CGROUP_VMM_OVERHEAD_MIB 128
uint64_t cgroup_memory_for(uint64_t guest_mib);

/*
 * memory.max (cgroup_memory_for), no swap, the group killed as one on OOM,
 * pids.max. 0 or -errno with *what naming the file that refused.
 */
int cgroup_limits(const char *dir, uint64_t guest_mib, unsigned pids, const char **what)
	__attribute__((warn_unused_result));

/* A block device's "MAJ:MIN". */
#define CGROUP_DISK_LEN 24
/* The whole disk the file system holding path is on; -ENODEV for none (tmpfs, overlay). */
int cgroup_disk_of(const char *path, char out[CGROUP_DISK_LEN]) __attribute__((warn_unused_result));

struct cgroup_io_limits {
	char disk[CGROUP_DISK_LEN]; /* the state folder's disk; "" for none */
	uint64_t bps;               /* bytes per second each way, 0: no limit */
	uint64_t iops;              /* operations per second each way, 0: no limit */
};
/*
 * io.weight in proportion to vcpus (where the kernel weighs I/O), and
 * io.max on the disk when a limit is given. 0 or -errno, *what naming the file.
 */
int cgroup_io(const char *dir, const struct cgroup_io_limits *io, unsigned vcpus, const char **what)
	__attribute__((warn_unused_result));

#endif
