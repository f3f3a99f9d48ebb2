// SPDX-License-Identifier: MIT
#include "cmdline.h"

#include <string.h>

/* One parameter: [start, end) as the kernel's next_arg() delimits it. */
static const char *next_param(const char *p, const char **start, const char **end)
{
	int quoted = 0;

	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (!*p)
		return NULL;
	*start = p;
	for (; *p; p++) {
		if (*p == '"')
			quoted = !quoted;
		else if (!quoted && (*p == ' ' || *p == '\t' || *p == '\n'))
			break;
	}
	*end = p;
	return p;
}

int cmdline_get(const char *cmdline, const char *key, char *out, size_t outlen)
{
	size_t klen = strlen(key);
	const char *p = cmdline, *s, *e;
	int found = -1;

	while ((p = next_param(p, &s, &e))) {
		const char *v;
		size_t vlen;

		/* The kernel allows the whole parameter to be quoted: "key=v". */
		if (*s == '"') {
			s++;
			if (e > s && e[-1] == '"')
				e--;
		}
		if ((size_t)(e - s) <= klen || strncmp(s, key, klen) || s[klen] != '=')
			continue;
		v = s + klen + 1;
		if (v < e && *v == '"') {
			v++;
			if (e > v && e[-1] == '"')
				e--;
		}
		vlen = (size_t)(e - v);
		if (vlen >= outlen) {
			found = -2;
			continue;
		}
		memcpy(out, v, vlen);
		out[vlen] = '\0';
		found = (int)vlen;
	}
	return found;
}
