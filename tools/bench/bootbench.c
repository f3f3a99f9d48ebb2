// SPDX-License-Identifier: MIT
/*
 * bootbench: starts a VMM, timestamps the first console line containing a
 * readiness marker, and reports what the VMM cost at that moment.
 *
 * usage: bootbench --ready TEXT --mem-mib N [--timeout S] -- VMM ARGS...
 *
 * Prints one line of key=value pairs:
 *   ready_ms      process start to the readiness line
 *   peak_rss_kib  peak RSS of the VMM over its whole life (wait4)
 *   rss_kib       RSS at readiness
 *   guest_kib     resident part of guest RAM at readiness: the largest
 *                 mapping of at least N MiB in /proc/PID/smaps
 *   overhead_kib  rss_kib - guest_kib: what the VMM itself occupies
 *   guest_ms      the guest's own uptime in the readiness line ("guest uptime
 *                 S s", the agent's), -1 without one
 *   before_ms     ready_ms - guest_ms (-1 without guest_ms): the VMM's start
 *                 and loading, then the guest kernel's setup until its clock
 *                 started
 *   exits         KVM's own exit counter for the VM at readiness
 *                 (debugfs kvm/PID-FD/exits), -1 if unavailable
 *   status        the VMM's exit status (or 128+signal)
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * Total RSS from smaps_rollup: exact, unlike VmRSS in /proc/PID/status,
 * which the kernel updates lazily per thread.
 */
static long rollup_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Rss:", 4))
			v = strtol(line + 4, NULL, 10);
	fclose(f);
	return v;
}

/* Rss of the largest mapping whose size is at least min_kib. */
static long guest_rss_kib(pid_t pid, long min_kib)
{
	char path[64], line[512];
	long size = 0, best_size = 0, best_rss = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Size:", 5))
			size = strtol(line + 5, NULL, 10);
		else if (!strncmp(line, "Rss:", 4) && size >= min_kib && size > best_size) {
			best_size = size;
			best_rss = strtol(line + 4, NULL, 10);
		}
	}
	fclose(f);
	return best_rss;
}

static long long kvm_exits(pid_t pid)
{
	char prefix[32], path[512];
	long long total = -1;
	struct dirent *d;
	DIR *dir = opendir("/sys/kernel/debug/kvm");

	if (!dir)
		return -1;
	snprintf(prefix, sizeof(prefix), "%d-", (int)pid);
	while ((d = readdir(dir))) {
		long long v;
		FILE *f;

		if (strncmp(d->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%s/exits", d->d_name);
		f = fopen(path, "r");
		if (f && fscanf(f, "%lld", &v) == 1)
			total = (total < 0 ? 0 : total) + v;
		if (f)
			fclose(f);
	}
	closedir(dir);
	return total;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"ready", required_argument, NULL, 'r'},
		{"mem-mib", required_argument, NULL, 'm'},
		{"timeout", required_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	const char *ready = NULL;
	long mem_mib = 0, rss = -1, guest = -1;
	long long exits = -1;
	double t0, t_ready = -1, guest_ms = -1, deadline;
	int timeout_s = 120, c, pfd[2], status = 0;
	char buf[65536], line[4096];
	size_t line_len = 0;
	struct rusage ru;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'r')
			ready = optarg;
		else if (c == 'm')
			mem_mib = atol(optarg);
		else if (c == 't')
			timeout_s = atoi(optarg);
		else
			return 2;
	}
	if (!ready || mem_mib <= 0 || optind >= argc) {
		fprintf(stderr,
		        "usage: bootbench --ready TEXT --mem-mib N [--timeout S] -- VMM ARGS...\n");
		return 2;
	}
	if (pipe(pfd) < 0)
		return 1;
	t0 = now_ms();
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execvp(argv[optind], argv + optind);
		_exit(127);
	}
	close(pfd[1]);
	deadline = t0 + timeout_s * 1e3;
	for (;;) {
		ssize_t n = read(pfd[0], buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (line_len < sizeof(line) - 1)
				line[line_len++] = buf[i];
			if (buf[i] != '\n')
				continue;
			line[line_len] = '\0';
			line_len = 0;
			if (t_ready < 0 && strstr(line, ready)) {
				const char *up = strstr(line, "guest uptime ");
				double sec;

				t_ready = now_ms() - t0;
				if (up && sscanf(up, "guest uptime %lf s", &sec) == 1 && sec >= 0)
					guest_ms = sec * 1e3;
				rss = rollup_rss_kib(pid);
				guest = guest_rss_kib(pid, mem_mib * 1024);
				exits = kvm_exits(pid);
			}
		}
		if (now_ms() > deadline)
			break;
	}
	if (now_ms() > deadline || t_ready < 0)
		kill(pid, SIGKILL);
	if (wait4(pid, &status, 0, &ru) < 0)
		return 1;
	printf("ready_ms=%.1f guest_ms=%.1f before_ms=%.1f peak_rss_kib=%ld rss_kib=%ld "
	       "guest_kib=%ld overhead_kib=%ld exits=%lld status=%d\n",
	       t_ready, guest_ms, t_ready >= 0 && guest_ms >= 0 ? t_ready - guest_ms : -1,
	       ru.ru_maxrss, rss, guest, rss >= 0 && guest >= 0 ? rss - guest : -1, exits,
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return t_ready < 0;
}
