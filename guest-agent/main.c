// SPDX-License-Identifier: MIT
/*
 * husk-agent as PID 1 of the guest's initramfs: mounts the kernel file
 * systems, reports readiness on the console, runs the test command given
 * as husk.cmd="..." on the kernel command line, and powers the guest off
 * (or reboots it with husk.halt=reboot, for VMMs without ACPI power-off).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cmdline.h"

#define AGENT_VERSION "0.1.0"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n = snprintf(line, sizeof(line), "husk-agent: ");

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDOUT_FILENO, line, (size_t)n) < 0)
		return;
}

static void mount_one(const char *src, const char *dir, const char *type, unsigned long flags,
                      const char *data)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY)
		say("cannot mount %s on %s: %s", type, dir, strerror(errno));
}

static void init_system(void)
{
	int fd;

	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	/* The kernel gives init the console only if /dev/console existed. */
	if (fcntl(STDOUT_FILENO, F_GETFD) < 0) {
		fd = open("/dev/console", O_RDWR | O_NOCTTY);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			if (fd > STDERR_FILENO)
				close(fd);
		}
	}
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/root", 1);
	setenv("TERM", "linux", 1);
}

static double uptime_seconds(void)
{
	char buf[64] = "";
	int fd = open("/proc/uptime", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtod(buf, NULL) : -1;
}

static int read_cmdline(char *buf, size_t len)
{
	int fd = open("/proc/cmdline", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static void run_command(const char *cmd)
{
	int status;
	pid_t pid = fork(), w;

	if (pid < 0) {
		say("cannot fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		setsid();
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		say("cannot run /bin/sh: %s", strerror(errno));
		_exit(127);
	}
	/* As PID 1 we also reap orphans the command leaves behind. */
	while ((w = wait(&status)) != pid) {
		if (w < 0 && errno != EINTR) {
			say("wait failed: %s", strerror(errno));
			return;
		}
	}
	if (WIFEXITED(status))
		say("command exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		say("command killed by signal %d", WTERMSIG(status));
}

int main(void)
{
	static char cmdline[16384], cmd[16384];
	char halt[16] = "poweroff";

	if (getpid() == 1)
		init_system();
	say("version %s ready, guest uptime %.3f s", AGENT_VERSION, uptime_seconds());

	if (read_cmdline(cmdline, sizeof(cmdline)) == 0) {
		int n = cmdline_get(cmdline, "husk.cmd", cmd, sizeof(cmd));

		if (n == -2)
			say("husk.cmd is longer than %zu bytes; not running it", sizeof(cmd) - 1);
		else if (n >= 0)
			run_command(cmd);
		cmdline_get(cmdline, "husk.halt", halt, sizeof(halt));
	}
	if (getpid() != 1)
		return 0;
	/* Console output still queued in the tty would die with the guest. */
	tcdrain(STDOUT_FILENO);
	sync();
	reboot(strcmp(halt, "reboot") == 0 ? RB_AUTOBOOT : RB_POWER_OFF);
	say("cannot %s: %s", halt, strerror(errno));
	for (;;)
		pause();
}
