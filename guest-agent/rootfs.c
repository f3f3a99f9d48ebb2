// SPDX-License-Identifier: MIT
/*
 * Switching the guest's root from the initramfs onto the runtime disk. The
 * disk the VMM gives is the sandbox's own copy-on-write layer over a
 * read-only runtime base, so the guest mounts it read-write as a plain ext4
 * file system. The agent keeps running from the initramfs (its pages stay
 * in memory) and serves from inside the new root.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

/* From the kernel's fs/ext4/ext4.h; not in the UAPI headers of Linux 6.1. */
#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif

#define NEWROOT "/newroot"

/* Built-in drivers probe before init runs; a short wait covers a slow probe. */
static int wait_for_device(const char *dev)
{
	struct timespec tick = {0, 10 * 1000 * 1000};
	struct stat st;

	for (int i = 0; i < 500; i++) {
		if (stat(dev, &st) == 0)
			return S_ISBLK(st.st_mode) ? 0 : -ENOTBLK;
		nanosleep(&tick, NULL);
	}
	return -ENOENT;
}

/*
 * Grows the file system to fill the disk: the sandbox's disk size limit is
 * the layer's virtual size, larger than the runtime's file system. Online
 * resize is one ioctl; the kernel refuses to shrink, and does nothing when
 * the sizes already match.
 */
static int grow(const char *dev, const char *mnt, char *err, size_t errlen)
{
	struct statfs sf;
	uint64_t bytes = 0, blocks;
	int fd = open(dev, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &bytes) < 0 || statfs(mnt, &sf) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot read the size of %s: %s", dev, strerror(errno));
		goto out;
	}
	close(fd);
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	blocks = bytes / (uint64_t)sf.f_bsize;
	if (fd < 0 || ioctl(fd, EXT4_IOC_RESIZE_FS, &blocks) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot grow the file system on %s to %llu MiB: %s", dev,
		         (unsigned long long)(bytes >> 20), strerror(errno));
	}
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

int rootfs_switch(const char *dev, bool readonly, char *err, size_t errlen)
{
	static const char *const moved[] = {"/dev", "/proc", "/sys"};
	char path[64];
	int ret = wait_for_device(dev);

	if (ret) {
		snprintf(err, errlen, "root disk %s: %s (is a --disk given to husk-vmm?)", dev,
		         strerror(-ret));
		return ret;
	}
	mkdir(NEWROOT, 0755);
	/*
	 * noinit_itable: blocks the sandbox never wrote read as zeros from the
	 * layer, so inode tables added by growing need no zeroing pass, which
	 * would otherwise fill the layer with zeros in the background.
	 */
	if (mount(dev, NEWROOT, "ext4", MS_NOATIME | (readonly ? MS_RDONLY : 0), "noinit_itable") <
	    0) {
		ret = -errno;
		snprintf(err, errlen, "cannot mount %s as ext4: %s", dev, strerror(errno));
		return ret;
	}
	if (!readonly) {
		ret = grow(dev, NEWROOT, err, errlen);
		if (ret)
			goto err_umount;
	}
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		snprintf(path, sizeof(path), NEWROOT "%s", moved[i]);
		mkdir(path, 0755);
		if (mount(moved[i], path, NULL, MS_MOVE, NULL) < 0) {
			ret = -errno;
			snprintf(err, errlen, "cannot move %s into the new root: %s", moved[i],
			         strerror(errno));
			goto err_umount;
		}
	}
	if (chdir(NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot make %s the root: %s", dev, strerror(errno));
		return ret;
	}
	return 0;

err_umount:
	/* Moved mounts stay where they are; the guest powers off next anyway. */
	umount2(NEWROOT, MNT_DETACH);
	return ret;
}
