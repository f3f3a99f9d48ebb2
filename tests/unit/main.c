// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "unit.h"

#define MAX_TESTS 512

static struct {
	const char *name;
	unit_fn fn;
} tests[MAX_TESTS];
static int nr_tests;
static char failure[512];

void unit_register(const char *name, unit_fn fn)
{
	if (nr_tests < MAX_TESTS)
		tests[nr_tests++] = (typeof(tests[0])){name, fn};
}

void unit_fail(const char *file, int line, const char *expr)
{
	if (!failure[0])
		snprintf(failure, sizeof(failure), "%s:%d: %s", file, line, expr);
}

int unit_failed(void)
{
	return failure[0] != 0;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;

	/* Tests feed malformed input on purpose; its warnings are noise here. */
	log_max_level = LOG_ERR;

	for (int i = 0; i < nr_tests; i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		failure[0] = '\0';
		tests[i].fn();
		if (failure[0]) {
			printf("FAIL unit/%s: %s\n", tests[i].name, failure);
			failed++;
		} else {
			printf("PASS unit/%s\n", tests[i].name);
			passed++;
		}
		fflush(stdout);
	}
	printf("unit: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
