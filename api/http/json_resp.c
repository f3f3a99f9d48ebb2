// SPDX-License-Identifier: MIT
/* The API envelope over http_respond_json. */
#include <stdarg.h>
#include <stdio.h>

#include "json_resp.h"

void api_ok(struct http_req *r, int status, json_t *data)
{
	json_t *o = json_object();

	if (o && (json_object_set_new(o, "success", json_true()) < 0 ||
	          (data && json_object_set(o, "data", data) < 0))) {
		json_decref(o);
		o = NULL;
	}
	json_decref(data);
	http_respond_json(r, status, o); /* NULL: a 500 */
}

void api_ok_fields(struct http_req *r, int status, json_t *obj)
{
	json_t *o = json_object();

	if (o && (json_object_set_new(o, "success", json_true()) < 0 ||
	          (obj && json_object_update(o, obj) < 0) ||
	          json_object_set_new(o, "success", json_true()) < 0)) {
		json_decref(o);
		o = NULL;
	}
	json_decref(obj);
	http_respond_json(r, status, o);
}

/* Makes s plain ASCII ('?' for every byte above 0x7f), which jansson always takes. */
static void ascii_scrub(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s > 0x7f)
			*s = '?';
}

void api_error(struct http_req *r, int status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = json_pack("{s:b, s:s, s:s}", "success", 0, "code", code, "message", msg);
	if (!o) { /* not valid UTF-8 (or cut inside a character) */
		ascii_scrub(msg);
		o = json_pack("{s:b, s:s, s:s}", "success", 0, "code", code, "message", msg);
	}
	http_respond_json(r, status, o);
}
