// SPDX-License-Identifier: MIT
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

enum log_level log_max_level = LOG_WARN;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void log_print(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (level > log_max_level)
		return;
	n = snprintf(line, sizeof(line), "husk-vmm: %s: ", level_names[level]);
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

int log_ratelimit_ok(struct log_ratelimit *rl)
{
	long now = (long)time(NULL);

	if (atomic_exchange(&rl->window, now) != now)
		atomic_store(&rl->count, 0);
	return atomic_fetch_add(&rl->count, 1) < 10;
}
