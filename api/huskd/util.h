/* SPDX-License-Identifier: MIT */
#ifndef HUSK_API_UTIL_H
#define HUSK_API_UTIL_H

#include <stddef.h>

/* Standard base64 (padding optional, no whitespace); NULL if it is not base64. Caller frees. */
unsigned char *base64_decode(const char *in, size_t *len);
/* A path as the sandbox sees it: relative ones are under workspace ("." is workspace itself). */
void workspace_path(const char *workspace, const char *path, char *out, size_t outlen);

#endif
