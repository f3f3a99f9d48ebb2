/* SPDX-License-Identifier: MIT */
#ifndef HUSK_LOG_H
#define HUSK_LOG_H

#include <stdatomic.h>
#include <time.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above this level are dropped; set once from the command line. */
extern enum log_level log_max_level;

/* Prints "husk-vmm: <level>: message" to stderr. Thread-safe (one write per line). */
void log_print(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_print(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_print(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_print(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_print(LOG_DEBUG, __VA_ARGS__)

/*
 * Anything a guest can trigger goes through this: at most 10 lines per call
 * site per second, so a hostile guest cannot flood the host's logs.
 */
struct log_ratelimit {
	_Atomic long window;
	atomic_int count;
};

int log_ratelimit_ok(struct log_ratelimit *rl);

#define log_guest(level, ...)                          \
	do {                                           \
		static struct log_ratelimit rl_;       \
		if (log_ratelimit_ok(&rl_))            \
			log_print(level, __VA_ARGS__); \
	} while (0)

#endif
