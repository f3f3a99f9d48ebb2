// SPDX-License-Identifier: MIT
/* Where huskd is, for the CLI's HTTP client: a URL parsed into a cli_url. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_http.h"

int cli_url_parse(const char *text, struct cli_url *u, char *err, size_t errlen)
{
	const char *h, *end, *colon, *slash;

	memset(u, 0, sizeof(*u));
	if (!strncmp(text, "unix:", 5)) {
		const char *path = text + 5;

		if (!strncmp(path, "//", 2))
			path += 2;
		if (!*path || strlen(path) >= sizeof(u->sock)) {
			snprintf(err, errlen, "'%s': give unix:/path/to/socket (at most %zu bytes)",
			         text, sizeof(u->sock) - 1);
			return -EINVAL;
		}
		u->is_unix = true;
		snprintf(u->sock, sizeof(u->sock), "%s", path);
		snprintf(u->host, sizeof(u->host), "localhost");
		return 0;
	}
	if (!strncmp(text, "https://", 8)) {
		snprintf(err, errlen,
		         "'%s': huskd serves plain HTTP; use http://HOST:PORT or "
		         "unix:/PATH",
		         text);
		return -EINVAL;
	}
	if (strncmp(text, "http://", 7)) {
		snprintf(err, errlen,
		         "'%s' is not a huskd URL: give http://HOST:PORT or unix:/PATH", text);
		return -EINVAL;
	}
	h = text + 7;
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	if (*h == '[') { /* [v6]:port */
		const char *rb = memchr(h, ']', (size_t)(end - h));

		colon = rb && rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
		if (!rb || (rb + 1 != end && !colon))
			goto bad;
		snprintf(u->host, sizeof(u->host), "%.*s", (int)(rb - h - 1), h + 1);
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		snprintf(u->host, sizeof(u->host), "%.*s", (int)((colon ? colon : end) - h), h);
	}
	if (!u->host[0] || (size_t)(end - h) >= sizeof(u->host))
		goto bad;
	if (colon) {
		size_t n = (size_t)(end - colon - 1);
		char *e;
		long port;

		if (!n || n >= sizeof(u->port))
			goto bad;
		memcpy(u->port, colon + 1, n);
		port = strtol(u->port, &e, 10);
		if (*e || port < 1 || port > 65535)
			goto bad;
	} else {
		snprintf(u->port, sizeof(u->port), "80");
	}
	if (slash && strlen(slash) >= sizeof(u->prefix))
		goto bad;
	snprintf(u->prefix, sizeof(u->prefix), "%s", slash ? slash : "");
	while (u->prefix[0] && u->prefix[strlen(u->prefix) - 1] == '/')
		u->prefix[strlen(u->prefix) - 1] = '\0';
	if (strpbrk(u->prefix, "?# \r\n") || strpbrk(u->host, " /\r\n"))
		goto bad;
	return 0;
bad:
	snprintf(err, errlen,
	         "'%s' is not a usable URL: give http://HOST:PORT (port 1-65535) or "
	         "unix:/PATH",
	         text);
	return -EINVAL;
}
