// SPDX-License-Identifier: MIT
#include "huskd_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum huskd_log_level threshold = HLOG_INFO;
static const char *const names[] = {"error", "warn", "info", "debug"};

void huskd_log_set_level(enum huskd_log_level level)
{
	threshold = level;
}

bool huskd_log_enabled(enum huskd_log_level level)
{
	return level <= threshold;
}

int huskd_log_parse_level(const char *name, enum huskd_log_level *out)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (name && !strcmp(name, names[i])) {
			*out = (enum huskd_log_level)i;
			return 0;
		}
	return -EINVAL;
}

void huskd_log(enum huskd_log_level level, const char *sandbox, const char *fmt, ...)
{
	char line[2048];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n, m;

	if (level > threshold)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s %s%s%s",
	             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	             (int)(tv.tv_usec / 1000), names[level], sandbox ? "[" : "",
	             sandbox ? sandbox : "", sandbox ? "] " : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += (size_t)m < sizeof(line) - (size_t)n - 1 ? m : (int)(sizeof(line) - (size_t)n - 2);
	line[n++] = '\n';
	/* One write: lines from the loop and from workers never interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
