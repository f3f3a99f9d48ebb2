/* SPDX-License-Identifier: MIT */
#ifndef HUSK_BENCH_H
#define HUSK_BENCH_H

/* What the C benchmarks share: a clock in ms, a qsort order and percentiles of figures. */
#include <stdlib.h>
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

/* The p-th percentile (0-99) of v[0..n) once sorted (bench_sort). */
static inline double bench_pct(const double *v, int n, int p)
{
	int i = n * p / 100;

	return v[i < n ? i : n - 1];
}

static inline void bench_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp);
}

#endif
