// SPDX-License-Identifier: MIT
#include "kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"

static const struct {
	int cap;
	const char *name;
	const char *why;
} required_caps[] = {
	{KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY", "guest RAM"},
	{KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP", "in-kernel interrupt controllers"},
	{KVM_CAP_IRQ_ROUTING, "KVM_CAP_IRQ_ROUTING", "interrupt routing"},
	{KVM_CAP_PIT2, "KVM_CAP_PIT2", "in-kernel PIT"},
	{KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR", "the TSS region"},
	{KVM_CAP_SET_IDENTITY_MAP_ADDR, "KVM_CAP_SET_IDENTITY_MAP_ADDR", "the identity map page"},
	{KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID", "CPUID setup"},
	{KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE", "SMP bring-up"},
	{KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT", "stopping vCPUs"},
	{KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD", "virtio notifications"},
	{KVM_CAP_IRQFD, "KVM_CAP_IRQFD", "virtio interrupts"},
};

int kvm_open(const char *path)
{
	int fd, ver;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			log_err("cannot open %s: no such device; this host has no KVM: enable "
			        "virtualization and load kvm_intel or kvm_amd, or run through "
			        "tools/husk-kvm-run, which provides a nested KVM host",
			        path);
		else if (e == EACCES || e == EPERM)
			log_err("cannot open %s: permission denied; add this user to the 'kvm' "
			        "group or run as root",
			        path);
		else
			log_err("cannot open %s: %s", path, strerror(e));
		return -e;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver != KVM_API_VERSION) {
		log_err("%s speaks KVM API version %d, husk-vmm needs %d; use a newer host kernel",
		        path, ver, KVM_API_VERSION);
		close(fd);
		return -ENODEV;
	}
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(required_caps[0]); i++) {
		if (ioctl(fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0) {
			log_err("KVM on this host lacks %s (needed for %s); use a host kernel "
			        "of 4.11 or later with KVM built in",
			        required_caps[i].name, required_caps[i].why);
			close(fd);
			return -ENODEV;
		}
	}
	/*
	 * Some hosts offer /dev/kvm without VT-x/AMD-V (e.g. the kvm_pvm module);
	 * an ordinary guest kernel then runs by instruction emulation, a
	 * thousand times slower. Say so rather than look hung (where /sys can
	 * be seen at all: not in husk-jail).
	 */
	if (access("/sys/module", F_OK) == 0 && access("/sys/module/kvm_intel", F_OK) &&
	    access("/sys/module/kvm_amd", F_OK))
		log_warn("%s is not backed by VT-x or AMD-V (no kvm_intel or kvm_amd module); "
		         "the guest will run very slowly; tools/husk-kvm-run provides a nested "
		         "KVM host instead",
		         path);
	return fd;
}

int kvm_max_vcpus(int kvm_fd)
{
	int n = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);

	if (n <= 0)
		n = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	return n > 0 ? n : 4; /* the API says: assume 4 if neither cap exists */
}
