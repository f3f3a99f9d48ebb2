/* SPDX-License-Identifier: MIT */
#ifndef HUSK_BENCH_H
#define HUSK_BENCH_H

/* What the C benchmarks share: a clock in ms and a qsort order for figures. */
#include <time.h>

static inline double bench_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#endif
