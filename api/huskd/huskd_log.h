/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HUSKD_LOG_H
#define HUSK_HUSKD_LOG_H

/*
 * huskd's one logger: a line per message on stderr, "TIME LEVEL [sbx_…] text".
 * Every line about a sandbox names it, so `grep sbx_…` tells its whole story.
 * Messages below the level set by huskd_log_level() (default info) are
 * dropped; a line is written with one write(2), so lines never interleave.
 */
#include <stdbool.h>

enum huskd_log_level { HLOG_ERROR, HLOG_WARN, HLOG_INFO, HLOG_DEBUG };

void huskd_log(enum huskd_log_level level, const char *sandbox, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void huskd_log_set_level(enum huskd_log_level level);
/* "error", "warn", "info" or "debug": 0, else -EINVAL. */
int huskd_log_parse_level(const char *name, enum huskd_log_level *out)
	__attribute__((warn_unused_result));
bool huskd_log_enabled(enum huskd_log_level level);

/* sandbox: a sandbox id, or NULL for lines about huskd itself. */
#define log_error(sandbox, ...) huskd_log(HLOG_ERROR, sandbox, __VA_ARGS__)
#define log_warn(sandbox, ...) huskd_log(HLOG_WARN, sandbox, __VA_ARGS__)
#define log_info(sandbox, ...) huskd_log(HLOG_INFO, sandbox, __VA_ARGS__)
#define log_debug(sandbox, ...)                                      \
	do {                                                         \
		if (huskd_log_enabled(HLOG_DEBUG))                   \
			huskd_log(HLOG_DEBUG, sandbox, __VA_ARGS__); \
	} while (0)

#endif
