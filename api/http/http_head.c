// SPDX-License-Identifier: MIT
/*
 * What every answer's head shares - the status's text, the Date - and the
 * whole JSON error answer the connection sends on its own (limits,
 * timeouts, bad input), before any handler has the request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_conn.h"

const char *http_status_text(int status)
{
	const char *s = http_status_str((enum http_status)status);

	return strcmp(s, "<unknown>") ? s : "Status";
}

void http_date(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

char *http_error_response(int status, const char *code, const char *msg, unsigned retry_after,
                          size_t *len)
{
	char retry[48] = "";

	json_t *j = json_pack("{s:b, s:s, s:s}", "success", 0, "code", code, "message", msg);
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL, *buf = NULL, date[64];
	size_t blen = body ? strlen(body) : 0, cap = blen + 256;
	int n;

	json_decref(j);
	if (!body)
		return NULL;
	buf = malloc(cap);
	if (buf) {
		http_date(date, sizeof(date));
		if (retry_after)
			snprintf(retry, sizeof(retry), "Retry-After: %u\r\n", retry_after);
		n = snprintf(buf, cap,
		             "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: application/json\r\n"
		             "%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
		             status, http_status_text(status), date, retry, blen, body);
		*len = (size_t)n;
	}
	free(body);
	return buf;
}
