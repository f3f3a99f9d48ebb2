// SPDX-License-Identifier: MIT
/* What the agent does as PID 1 of the guest: file systems, console, power. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"

static void mount_one(const char *src, const char *dir, const char *type, unsigned long flags,
                      const char *data)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY)
		fprintf(stderr, "husk-agent: cannot mount %s on %s: %s\n", type, dir,
		        strerror(errno));
}

void init_early(void)
{
	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	/* The kernel gives init the console only if /dev/console existed. */
	if (fcntl(STDOUT_FILENO, F_GETFD) < 0) {
		int fd = open("/dev/console", O_RDWR | O_NOCTTY);

		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			if (fd > STDERR_FILENO)
				close(fd);
		}
	}
}

void init_system(void)
{
	static const char hostname[] = "sandbox";

	mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	          "gid=5,mode=620,ptmxmode=666");
	mount_one("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mount_one("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (sethostname(hostname, sizeof(hostname) - 1) < 0)
		fprintf(stderr, "husk-agent: cannot set the host name: %s\n", strerror(errno));
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/root", 1);
	setenv("TERM", "linux", 1);
	setenv("LANG", "C.UTF-8", 1);
}

double init_uptime(void)
{
	char buf[64] = "";
	int fd = open("/proc/uptime", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtod(buf, NULL) : -1;
}

void init_poweroff(bool reboot_instead)
{
	/* Console output still queued in the tty would die with the guest. */
	tcdrain(STDOUT_FILENO);
	sync();
	reboot(reboot_instead ? RB_AUTOBOOT : RB_POWER_OFF);
	fprintf(stderr, "husk-agent: cannot power off: %s\n", strerror(errno));
	for (;;)
		pause();
}
