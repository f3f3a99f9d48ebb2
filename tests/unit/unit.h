/* SPDX-License-Identifier: MIT */
#ifndef HUSK_UNIT_H
#define HUSK_UNIT_H

/*
 * A tiny test runner: UNIT_TEST(name) registers a test; CHECK() fails it
 * with the file, line and expression. main.c runs every registered test and
 * prints "PASS unit/name" or "FAIL unit/name: why".
 */
typedef void (*unit_fn)(void);

void unit_register(const char *name, unit_fn fn);
void unit_fail(const char *file, int line, const char *expr);
int unit_failed(void);

#define UNIT_TEST(name)                                                \
	static void name(void);                                        \
	__attribute__((constructor)) static void register_##name(void) \
	{                                                              \
		unit_register(#name, name);                            \
	}                                                              \
	static void name(void)

#define CHECK(cond)                                           \
	do {                                                  \
		if (!(cond)) {                                \
			unit_fail(__FILE__, __LINE__, #cond); \
			return;                               \
		}                                             \
	} while (0)

#endif
