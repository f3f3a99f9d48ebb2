/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_CMDLINE_H
#define HUSK_AGENT_CMDLINE_H

#include <stddef.h>

/*
 * Finds key=value in a kernel command line, splitting and unquoting the way
 * the kernel does ("key=\"a b\"" gives "a b"). The last occurrence wins.
 * Copies the value into out (NUL-terminated). Returns the value's length,
 * -1 if the key is absent, or -2 if the value does not fit in outlen.
 */
int cmdline_get(const char *cmdline, const char *key, char *out, size_t outlen);

#endif
