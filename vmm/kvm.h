/* SPDX-License-Identifier: MIT */
#ifndef HUSK_KVM_H
#define HUSK_KVM_H

/*
 * Opens /dev/kvm and checks the API version and every capability husk-vmm
 * relies on. On failure prints one line naming the problem and what to do,
 * and returns -errno (-ENODEV for a missing capability). Returns the fd.
 */
int kvm_open(const char *path) __attribute__((warn_unused_result));

/* The most vCPUs one VM may have on this host. */
int kvm_max_vcpus(int kvm_fd);

#endif
