// SPDX-License-Identifier: MIT
/* userfaultfd, the few operations a lazy restore needs (uffd.h). */
#include "uffd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096UL
/* Zero-progress EAGAINs (the address space changing under us) before giving up. */
#define MAX_STALLS 1000

int uffd_open(char *err, size_t errlen)
{
	struct uffdio_api api = {.api = UFFD_API};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK), e = errno;

#ifdef USERFAULTFD_IOC_NEW
	if (fd < 0 && e == EPERM) {
		/* Linux 6.1 and later: /dev/userfaultfd, for whom its file mode lets in. */
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev >= 0) {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
			close(dev);
		}
	}
#endif
	if (fd >= 0) {
		if (ioctl(fd, UFFDIO_API, &api) == 0)
			return fd;
		e = errno;
		close(fd);
		snprintf(err, errlen, "UFFDIO_API: %s", strerror(e));
		return -e;
	}
	if (e == EPERM)
		snprintf(err, errlen,
		         "userfaultfd is not allowed here (it needs root, CAP_SYS_PTRACE or "
		         "/proc/sys/vm/unprivileged_userfaultfd set to 1)");
	else
		snprintf(err, errlen, "no userfaultfd: %s", strerror(e));
	return -e;
}

int uffd_register(int uffd, void *start, size_t len)
{
	const uint64_t need = (1ULL << _UFFDIO_COPY) | (1ULL << _UFFDIO_ZEROPAGE);
	struct uffdio_register reg = {.range = {.start = (uintptr_t)start, .len = len},
	                              .mode = UFFDIO_REGISTER_MODE_MISSING};

	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	return (reg.ioctls & need) == need ? 0 : -EOPNOTSUPP;
}

int uffd_unregister(int uffd, void *start, size_t len)
{
	struct uffdio_range r = {.start = (uintptr_t)start, .len = len};

	return ioctl(uffd, UFFDIO_UNREGISTER, &r) < 0 ? -errno : 0;
}

void uffd_wake(int uffd, uint64_t addr, size_t len)
{
	struct uffdio_range r = {.start = addr, .len = len};

	/* Nobody may be waiting any more: nothing to do about a failure. */
	if (ioctl(uffd, UFFDIO_WAKE, &r) < 0)
		return;
}

/*
 * Places len bytes at dst: a copy of src, or zero pages when src is NULL.
 * A page found there already (EEXIST) is kept; partial progress and EAGAIN
 * (the address space changed meanwhile) go on from where the kernel stopped.
 */
int uffd_place(int uffd, uint8_t *dst, const uint8_t *src, size_t len)
{
	unsigned stalls = 0;

	while (len) {
		long long done;
		int rc;

		if (src) {
			struct uffdio_copy c = {
				.dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = len};

			rc = ioctl(uffd, UFFDIO_COPY, &c);
			done = c.copy;
		} else {
			struct uffdio_zeropage z = {.range = {.start = (uintptr_t)dst, .len = len}};

			rc = ioctl(uffd, UFFDIO_ZEROPAGE, &z);
			done = z.zeropage;
		}
		if (rc == 0)
			return 0;
		if (done <= 0) {
			if (errno == EEXIST)
				done = PAGE;
			else if (errno == EAGAIN && ++stalls < MAX_STALLS)
				continue;
			else
				return -errno;
		}
		if ((unsigned long long)done > len || done % PAGE)
			return -EIO;
		dst += done;
		if (src)
			src += done;
		len -= (size_t)done;
	}
	return 0;
}
