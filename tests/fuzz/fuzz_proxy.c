// SPDX-License-Identifier: MIT
/* Fuzzes how huskd reads a client's Host header and path for a sandbox's port (r_target.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "r_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as host, path, query and domain, NUL-separated (missing parts are ""). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = calloc(1, size + 4), *part[4];
	struct proxy_target t;
	char *p;
	int rc;

	if (!s)
		return 0;
	memcpy(s, data, size);
	p = s;
	for (int i = 0; i < 4; i++) {
		part[i] = p;
		if (p < s + size)
			p += strlen(p) + 1;
	}
	{
		const char *e = proxy_e2b_prefix(part[0], *part[3] ? part[3] : NULL);

		if (e && strcmp(e, "/e2b") && strcmp(e, "/e2b/envd"))
			abort();
	}
	rc = proxy_target(part[0], part[1], part[2], *part[3] ? part[3] : NULL, &t);
	if (rc == 1 &&
	    (!memchr(t.id, 0, sizeof(t.id)) || !memchr(t.path, 0, sizeof(t.path)) ||
	     (!t.by_path && (strncmp(t.id, "sbx_", 4) || t.port < 1 || t.port > 65535)) ||
	     (t.by_path && t.port > 65535)))
		abort();
	if (rc == 1) {
		char tok[64];
		size_t before = strlen(t.path);

		/* A url's token taken out of the query: the path only shrinks, and stays a string.
		 */
		if (proxy_take_token(&t, tok, sizeof(tok)) == 1 &&
		    (strlen(t.path) >= before || !memchr(tok, 0, sizeof(tok))))
			abort();
	}
	free(s);
	return 0;
}
