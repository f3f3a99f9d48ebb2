// SPDX-License-Identifier: MIT
/*
 * husk-agent: as PID 1 of the guest it sets the system up, then serves the
 * host over vsock (PROTOCOL.md). With husk.cmd="..." on the kernel command
 * line it instead runs that one command and powers off: the boot tests use
 * that. With husk.dial=PORT it also dials home to host port PORT (dial.c).
 * Outside a guest, --listen unix:PATH serves on a Unix socket and --dial
 * unix:PATH dials one.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "agent.h"
#include "cmdline.h"

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

static void run_test_command(const char *cmd)
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

static int read_cmdline(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cmdline", "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

/*
 * husk.root=DEV puts the root on a disk (husk.rootmode=ro mounts it
 * read-only). Without its disk a sandbox is no use: power off, saying why.
 */
static void switch_root(const char *cmdline)
{
	char dev[64], mode[8] = "rw", err[256];
	int n = cmdline_get(cmdline, "husk.root", dev, sizeof(dev));

	if (n == -1)
		return;
	cmdline_get(cmdline, "husk.rootmode", mode, sizeof(mode));
	if (n < 0)
		snprintf(err, sizeof(err), "husk.root is too long");
	else if (rootfs_switch(dev, !strcmp(mode, "ro"), err, sizeof(err)) == 0)
		return;
	say("cannot start the sandbox: %s", err);
	init_poweroff(false);
}

/* The sandbox's default environment starts as the agent's own basics. */
static void seed_env(struct agent *a)
{
	static const char *const keys[] = {"PATH", "HOME", "TERM", "LANG"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = getenv(keys[i]);

		if (v)
			json_object_set_new(a->env, keys[i], json_string(v));
	}
}

/*
 * husk.dial=PORT: dial the host (vsock CID 2) on that port. A bad value is
 * reported and ignored: the guest still serves port 52.
 */
static void dial_from_cmdline(const char *cmdline, char *spec, size_t len)
{
	char port[16] = "", *end;
	int n = cmdline_get(cmdline, "husk.dial", port, sizeof(port));
	unsigned long p = strtoul(port, &end, 10);

	if (n == -1)
		return;
	if (n < 0 || port[0] < '0' || port[0] > '9' || *end || p >= UINT32_MAX) {
		say("husk.dial=%s is not a port; not dialling home", n < 0 ? "(too long)" : port);
		return;
	}
	snprintf(spec, len, "vsock:%u:%lu", VMADDR_CID_HOST, p);
}

static int serve(const char *listen_spec, const char *dial_spec, bool pid1)
{
	struct agent *a = agent_create();
	int ret;

	if (!a) {
		say("cannot start: out of memory or file descriptors");
		return 1;
	}
	a->pid1 = pid1;
	seed_env(a);
	if (!strncmp(listen_spec, "unix:", 5))
		ret = agent_listen_unix(a, listen_spec + 5);
	else if (!strncmp(listen_spec, "vsock:", 6))
		ret = agent_listen_vsock(a, (unsigned)strtoul(listen_spec + 6, NULL, 10));
	else
		ret = -EINVAL;
	if (ret) {
		say("cannot listen on '%s': %s (use unix:PATH or vsock:PORT)", listen_spec,
		    strerror(-ret));
		agent_destroy(a);
		return 1;
	}
	ret = dial_spec[0] ? agent_dial(a, dial_spec) : 0;
	if (ret) {
		say("cannot dial '%s': %s (use unix:PATH or vsock:CID:PORT)", dial_spec,
		    strerror(-ret));
		agent_destroy(a);
		return 1;
	}
	say("version %s ready, guest uptime %.3f s", AGENT_VERSION, init_uptime());
	ret = agent_run(a);
	agent_destroy(a);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	static char cmdline[16384], cmd[16384];
	char halt[16] = "poweroff";
	char listen_spec[300], dial_spec[300] = "";
	bool pid1 = getpid() == 1;

	snprintf(listen_spec, sizeof(listen_spec), "vsock:%u", AGENT_VSOCK_PORT);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			snprintf(listen_spec, sizeof(listen_spec), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--dial") && i + 1 < argc) {
			snprintf(dial_spec, sizeof(dial_spec), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--version")) {
			printf("husk-agent %s (protocol %d)\n", AGENT_VERSION, PROTO_VERSION);
			return 0;
		} else if (!pid1) {
			fprintf(stderr, "usage: husk-agent [--listen unix:PATH|vsock:PORT] "
			                "[--dial unix:PATH|vsock:CID:PORT] [--version]\n");
			return 2;
		}
	}
	if (!pid1)
		return serve(listen_spec, dial_spec, false);

	init_early();
	if (read_cmdline(cmdline, sizeof(cmdline)) == 0)
		switch_root(cmdline);
	init_system(cmdline);
	if (cmdline[0]) {
		int n = cmdline_get(cmdline, "husk.cmd", cmd, sizeof(cmd));

		cmdline_get(cmdline, "husk.halt", halt, sizeof(halt));
		if (n == -2) {
			say("husk.cmd is longer than %zu bytes; not running it", sizeof(cmd) - 1);
		} else if (n >= 0) {
			say("version %s ready, guest uptime %.3f s", AGENT_VERSION, init_uptime());
			run_test_command(cmd);
			init_poweroff(!strcmp(halt, "reboot"));
		}
		dial_from_cmdline(cmdline, dial_spec, sizeof(dial_spec));
	}
	serve(listen_spec, dial_spec, true);
	/* PID 1 must not exit: that would panic the guest. */
	init_poweroff(false);
}
