/* SPDX-License-Identifier: MIT */
#ifndef HUSK_KVM_STATS_H
#define HUSK_KVM_STATS_H

#include <stdint.h>

/*
 * KVM's own counters for a VM or vCPU (the binary statistics interface,
 * KVM_GET_STATS_FD, Linux 5.14+). fd is a VM or vCPU fd. Adds the value of
 * the counter called name (e.g. "exits") to *sum. Returns 0, -ENOENT if
 * there is no such counter, -ENOTTY if the kernel has no binary stats.
 */
int kvm_stats_add(int fd, const char *name, uint64_t *sum) __attribute__((warn_unused_result));

#endif
