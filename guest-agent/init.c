// SPDX-License-Identifier: MIT
/* What the agent does as PID 1 of the guest: file systems, console, power. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "cmdline.h"

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

/* Programs in a sandbox expect localhost to work, network or not. */
static void loopback_up(void)
{
	struct ifreq ifr = {.ifr_name = "lo"};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			fprintf(stderr, "husk-agent: cannot bring up lo: %s\n", strerror(errno));
	}
	close(fd);
}

/*
 * With a network the kernel took its address by DHCP (ip=dhcp) and left
 * the resolver it was given in /proc/net/pnp: that becomes the root's
 * resolv.conf. Without one the file is left as the image made it.
 */
static void resolver_from_dhcp(void)
{
	char line[256],
		conf[2048] = "# Written by husk at boot from the sandbox network's DHCP answer.\n";
	size_t used = strlen(conf);
	bool any = false;
	FILE *in = fopen("/proc/net/pnp", "re"), *out;

	if (!in)
		return;
	while (fgets(line, sizeof(line), in)) {
		bool ns = !strncmp(line, "nameserver ", 11);

		if ((ns || !strncmp(line, "domain ", 7)) && used + strlen(line) < sizeof(conf)) {
			memcpy(conf + used, line, strlen(line) + 1);
			used += strlen(line);
			any |= ns;
		}
	}
	fclose(in);
	if (!any)
		return; /* no network, or no resolver offered: the image's file stays */
	out = fopen("/etc/resolv.conf.husk", "we");
	if (!out)
		return;
	fputs(conf, out);
	if (fclose(out) < 0 || rename("/etc/resolv.conf.husk", "/etc/resolv.conf") < 0)
		fprintf(stderr, "husk-agent: cannot write /etc/resolv.conf: %s\n", strerror(errno));
}

void init_system(const char *cmdline)
{
	char hostname[64] = "";
	int rc;

	mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	          "gid=5,mode=620,ptmxmode=666");
	mount_one("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mount_one("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (cmdline_get(cmdline, "husk.hostname", hostname, sizeof(hostname)) < 0 ||
	    !identity_hostname_valid(hostname)) {
		if (hostname[0])
			fprintf(stderr, "husk-agent: husk.hostname=%s is not a host name\n",
			        hostname);
		snprintf(hostname, sizeof(hostname), "sandbox");
	}
	rc = identity_set_hostname(hostname);
	if (rc)
		fprintf(stderr, "husk-agent: cannot set the host name: %s\n", strerror(-rc));
	loopback_up();
	resolver_from_dhcp();
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
