// SPDX-License-Identifier: MIT
#include "sbx_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

unsigned char *base64_decode(const char *in, size_t *len)
{
	size_t n = strlen(in), o = 0;
	unsigned char *out;
	uint32_t acc = 0;
	int bits = 0;

	while (n && in[n - 1] == '=')
		n--;
	out = malloc(n * 3 / 4 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value(in[i]);

		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	*len = o;
	return out;
}

void workspace_path(const char *workspace, const char *path, char *out, size_t outlen)
{
	if (path[0] == '/')
		snprintf(out, outlen, "%s", path);
	else if (!path[0] || !strcmp(path, "."))
		snprintf(out, outlen, "%s", workspace);
	else
		snprintf(out, outlen, "%s/%s", workspace,
		         path[0] == '.' && path[1] == '/' ? path + 2 : path);
}

int parse_duration_ms(const char *s, uint64_t *ms)
{
	double total = 0;
	const char *p = s;

	if (!strcmp(s, "0")) {
		*ms = 0;
		return 0;
	}
	while (*p) {
		char *end;
		double v;

		errno = 0;
		v = strtod(p, &end);
		if (end == p || errno || v < 0)
			return -EINVAL;
		p = end;
		if (!strncmp(p, "ms", 2)) {
			total += v;
			p += 2;
		} else if (*p == 's') {
			total += v * 1e3;
			p++;
		} else if (*p == 'm') {
			total += v * 60e3;
			p++;
		} else if (*p == 'h') {
			total += v * 3600e3;
			p++;
		} else {
			return -EINVAL;
		}
	}
	if (p == s || total > 1e15)
		return -EINVAL;
	*ms = (uint64_t)total;
	return 0;
}

void sbx_buf_add(struct sbx_buf *b, const void *p, size_t len, size_t cap)
{
	size_t want;
	char *n;

	if (b->over || !len)
		return;
	if (len > cap - b->len || b->len > cap) {
		b->over = true;
		return;
	}
	/* Doubling up to the cap: the bound comes before the allocation. */
	if (b->len + len > b->alloc) {
		want = b->alloc ? b->alloc : 65536;
		while (want < b->len + len)
			want *= 2;
		if (want > cap)
			want = cap;
		n = realloc(b->data, want);
		if (!n) {
			b->over = true;
			return;
		}
		b->data = n;
		b->alloc = want;
	}
	memcpy(b->data + b->len, p, len);
	b->len += len;
}
