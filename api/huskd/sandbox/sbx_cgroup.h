/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_CGROUP_H
#define HUSK_SBX_CGROUP_H

/* A sandbox's cgroup v2 folder: its cpu quota. */
#include <stdint.h>

/* Writes dir/cpu.max: millis millicores (of 100 ms periods), or no limit (0). 0 or -errno. */
int cgroup_cpu_max(const char *dir, int64_t millis) __attribute__((warn_unused_result));

#endif
