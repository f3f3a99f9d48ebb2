// SPDX-License-Identifier: MIT
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

enum log_level log_max_level = LOG_WARN;
static struct timespec log_start;

__attribute__((constructor)) static void log_init(void)
{
	clock_gettime(CLOCK_MONOTONIC, &log_start);
}

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void log_print(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > log_max_level)
		return;
	if (log_max_level >= LOG_DEBUG) {
		/* With -vv every line carries the time since the VMM started. */
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		n = snprintf(line, sizeof(line), "husk-vmm: [%8.3f ms] %s: ",
		             (double)(now.tv_sec - log_start.tv_sec) * 1e3 +
		                     (double)(now.tv_nsec - log_start.tv_nsec) / 1e6,
		             level_names[level]);
	} else {
		n = snprintf(line, sizeof(line), "husk-vmm: %s: ", level_names[level]);
	}
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line keeps lines from several threads whole. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

/*
 * Lines a guest can cause, in all: at ten a second per call site a guest
 * could still fill the host's disk over weeks. Past this the VMM says so
 * once and keeps its own messages only.
 */
#define GUEST_LINES_MAX 100000
static atomic_long guest_lines;

int log_ratelimit_ok(struct log_ratelimit *rl)
{
	long now = (long)time(NULL), total;

	if (atomic_exchange(&rl->window, now) != now)
		atomic_store(&rl->count, 0);
	if (atomic_fetch_add(&rl->count, 1) >= 10)
		return 0;
	total = atomic_fetch_add(&guest_lines, 1);
	if (total == GUEST_LINES_MAX)
		log_print(LOG_WARN, "%d lines about the guest's doings logged; no more of them",
		          GUEST_LINES_MAX);
	return total < GUEST_LINES_MAX;
}
