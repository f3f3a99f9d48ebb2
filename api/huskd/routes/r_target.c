// SPDX-License-Identifier: MIT
/* Which sandbox port a request is for (r_target.h). */
#include "r_target.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Decimal digits [s, s+n) as a TCP port (1-65535); false for anything else. */
static bool port_of(const char *s, size_t n, unsigned *port)
{
	*port = 0;
	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		*port = *port * 10 + (unsigned)(s[i] - '0');
	}
	return *port >= 1 && *port <= 65535;
}

/* "sbx_<rand>" from n letters and digits at rand (any case); false if they are not. */
static bool id_of(const char *rand, size_t n, struct proxy_target *t)
{
	if (n == 0 || n + 5 > sizeof(t->id))
		return false;
	memcpy(t->id, "sbx_", 4);
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)rand[i]))
			return false;
		t->id[4 + i] = (char)tolower((unsigned char)rand[i]);
	}
	t->id[4 + n] = '\0';
	return true;
}

/*
 * The host's first label, any case: husk's "sbx-<rand>-<port>", or E2B's
 * "<port>-sbx_<rand>" (what its SDK's getHost(port) gives).
 */
static bool host_label(const char *label, size_t len, struct proxy_target *t)
{
	size_t dash = len;

	if (len > 4 && !strncasecmp(label, "sbx-", 4)) {
		while (dash > 4 && label[dash - 1] != '-')
			dash--;
		if (dash <= 5)
			return false; /* no "-<port>", or nothing between "sbx-" and it */
		return port_of(label + dash, len - dash, &t->port) && id_of(label + 4, dash - 5, t);
	}
	dash = strcspn(label, "-");
	if (dash >= len || len - dash - 1 <= 4 || strncasecmp(label + dash + 1, "sbx_", 4))
		return false;
	return port_of(label, dash, &t->port) && id_of(label + dash + 5, len - dash - 5, t);
}

static int set_path(struct proxy_target *t, const char *lead, const char *path, const char *query)
{
	int n = snprintf(t->path, sizeof(t->path), "%s%s%s%s", lead, path, *query ? "?" : "",
	                 query);

	return n < 0 || (size_t)n >= sizeof(t->path) ? -ENAMETOOLONG : 1;
}

int proxy_target(const char *host, const char *path, const char *query, const char *domain,
                 struct proxy_target *t)
{
	size_t hl, dl, n;

	memset(t, 0, sizeof(*t));
	if (domain && host) {
		hl = strcspn(host, ":");
		dl = strcspn(domain, ":");
		if (dl && hl > dl + 1 && host[hl - dl - 1] == '.' &&
		    !strncasecmp(host + hl - dl, domain, dl) && host_label(host, hl - dl - 1, t))
			return set_path(t, "", path, query);
		/* A label that failed half-way may have set a port: not the path's. */
		memset(t, 0, sizeof(*t));
	}
	if (strncmp(path, PROXY_PATH_PREFIX, strlen(PROXY_PATH_PREFIX)))
		return 0;
	path += strlen(PROXY_PATH_PREFIX);
	n = strcspn(path, "/:");
	if (n == 0 || n >= sizeof(t->id))
		return 0;
	memcpy(t->id, path, n);
	t->id[n] = '\0';
	t->by_path = true;
	path += n;
	if (*path == ':') { /* "/p/<id>:<port>/": one port of a sandbox that serves them all */
		n = strcspn(++path, "/");
		if (!port_of(path, n, &t->port))
			return 0;
		path += n;
	}
	return set_path(t, *path ? "" : "/", path, query);
}

const char *proxy_e2b_prefix(const char *host, const char *domain)
{
	size_t hl, dl;

	if (!host || !domain)
		return NULL;
	hl = strcspn(host, ":");
	dl = strcspn(domain, ":");
	if (!dl || hl <= dl + 1 || host[hl - dl - 1] != '.' ||
	    strncasecmp(host + hl - dl, domain, dl))
		return NULL;
	if (hl - dl - 1 == 3 && !strncasecmp(host, "api", 3))
		return "/e2b";
	if (hl - dl - 1 > 6 && !strncmp(host, "49983-", 6))
		return "/e2b/envd";
	return NULL;
}

int proxy_take_token(struct proxy_target *t, char *out, size_t outlen)
{
	char *q = strchr(t->path, '?'), *p, *end, *val;
	size_t n;

	out[0] = '\0';
	if (!q)
		return 0;
	for (p = q + 1; *p; p = end + (*end == '&')) {
		end = p + strcspn(p, "&");
		if (strncmp(p, PROXY_TOKEN_PARAM "=", strlen(PROXY_TOKEN_PARAM) + 1))
			continue;
		val = p + strlen(PROXY_TOKEN_PARAM) + 1;
		n = (size_t)(end - val);
		if (n >= outlen)
			return -ENAMETOOLONG;
		memcpy(out, val, n);
		out[n] = '\0';
		/* The parameter goes, with the '&' after it (or the one before it, or the '?'). */
		if (*end == '&')
			memmove(p, end + 1, strlen(end + 1) + 1);
		else if (p > q + 1)
			p[-1] = '\0';
		else
			*q = '\0';
		return 1;
	}
	return 0;
}
