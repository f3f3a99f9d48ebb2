/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_TEXT_H
#define HUSK_SBX_TEXT_H

/* Small text helpers of the sandbox manager that no library of ours provides. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Standard base64 (padding optional, no whitespace); NULL if it is not base64. Caller frees. */
unsigned char *base64_decode(const char *in, size_t *len);
/* A path as the sandbox sees it: relative ones are under workspace ("." is workspace itself). */
void workspace_path(const char *workspace, const char *path, char *out, size_t outlen);

/* Bytes gathered from the agent, bounded before anything is allocated for them. */
struct sbx_buf {
	char *data;
	size_t len, alloc;
	bool over; /* more than the cap came (and was dropped), or memory ran out */
};
/* Appends len bytes unless that takes it past cap bytes (then over is set, nothing kept). */
void sbx_buf_add(struct sbx_buf *b, const void *p, size_t len, size_t cap);

#endif
