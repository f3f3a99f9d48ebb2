/* SPDX-License-Identifier: MIT */
#ifndef HUSK_JSON_RESP_H
#define HUSK_JSON_RESP_H

/*
 * The API's JSON envelope (API.md §3): every JSON answer of huskd goes
 * through these, so "success" is always the JSON boolean and the content
 * type always application/json. Each answers r (see http_respond_json).
 */
#include <jansson.h>

#include "http.h"

/* {"success":true,"data":data}; data NULL gives {"success":true}. Steals data. */
void api_ok(struct http_req *r, int status, json_t *data);
/* {"success":true, ...obj's fields at top level} (pause, rm/rmdir). Steals obj (may be NULL). */
void api_ok_fields(struct http_req *r, int status, json_t *obj);
/*
 * {"success":false,"code":code,"message":<fmt, ...>} with HTTP status
 * (API.md §3.5 lists the codes). A message that is not valid UTF-8 (with a
 * client's path in it, say) is sent with '?' for its non-ASCII bytes.
 */
void api_error(struct http_req *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
