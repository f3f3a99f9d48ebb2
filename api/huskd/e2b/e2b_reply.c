// SPDX-License-Identifier: MIT
/*
 * How E2B's REST API answers (API.md §11.1), for every route of it: its
 * error body {code, message} and the status a manager fault maps to, a
 * husk sandbox's record as E2B's Sandbox and ListedSandbox, and a
 * sandbox's envd access token.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"

void e2b_error(struct http_req *r, int code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (code >= 500)
		log_error(NULL, "%s %s: %d: %s", http_method(r), http_path(r), code, msg);
	http_respond_json(r, code, json_pack("{siss}", "code", code, "message", msg));
}

int e2b_status_of(const struct sbx_err *err)
{
	static const int status[] = {
		[SBX_BAD_INPUT] = 400, [SBX_NO_SANDBOX] = 404,  [SBX_ENDED] = 404,
		[SBX_BUSY] = 409,      [SBX_STATE] = 409,       [SBX_EXISTS] = 409,
		[SBX_NOT_FOUND] = 404, [SBX_TOO_LARGE] = 400,   [SBX_DENIED] = 403,
		[SBX_NO_SPACE] = 507,  [SBX_STEP_FAILED] = 400, [SBX_UNREACHABLE] = 502,
		[SBX_FULL] = 503,      [SBX_UNAVAILABLE] = 503, [SBX_INTERNAL] = 500,
		[SBX_FORBIDDEN] = 403,
	};

	return (size_t)err->fault < sizeof(status) / sizeof(status[0]) && status[err->fault]
	               ? status[err->fault]
	               : 500;
}

void e2b_reply_error(struct http_req *r, const struct sbx_err *err)
{
	e2b_error(r, e2b_status_of(err), "%s", err->msg);
}

void e2b_token(const struct routes *rt, const char *sandbox_id, char out[E2B_TOKEN_HEX + 1])
{
	routes_token(rt, "e2b-envd", sandbox_id, out);
}

/* "512Mi" -> 512, "2Gi" -> 2048 (MiB); "500m" -> 1, "2" -> 2 (whole CPUs, rounded up). */
static long long size_mib(const char *s)
{
	char *end;
	long long v = s ? strtoll(s, &end, 10) : 0;

	if (!s)
		return 0;
	if (!strcmp(end, "Gi"))
		return v * 1024;
	if (!strcmp(end, "Ki"))
		return v / 1024;
	return v;
}

static long long cpus(const char *s)
{
	char *end;
	long long v = s ? strtoll(s, &end, 10) : 0;

	if (s && *end == 'm')
		return (v + 999) / 1000;
	return v;
}

/* "running" or "paused" (E2B's states); NULL for a sandbox that has ended. */
const char *e2b_state(json_t *info)
{
	const char *st = json_string_value(json_object_get(info, "status"));

	if (!st)
		return NULL;
	if (!strcmp(st, "paused") || !strcmp(st, "suspended"))
		return "paused";
	if (!strcmp(st, "terminated") || !strcmp(st, "failed") || !strcmp(st, "deleted") ||
	    !strcmp(st, "stopping"))
		return NULL;
	return "running";
}

/* A SandboxInfo as E2B's Sandbox / ListedSandbox (with the token: a detail's or a create's). */
json_t *e2b_sandbox(const struct routes *rt, json_t *info, bool token)
{
	const char *id = json_string_value(json_object_get(info, "sandboxId"));
	json_t *res = json_object_get(info, "resources"), *meta = json_object_get(info, "metadata");
	json_t *snap = json_object_get(info, "snapshotId"), *out;
	const char *tmpl = json_string_value(
		snap ? snap : json_object_get(json_object_get(info, "runtime"), "name"));
	const char *created = json_string_value(json_object_get(info, "createdAt"));
	const char *end = json_string_value(json_object_get(info, "deadlineAt"));
	const char *state = e2b_state(info);
	char tok[E2B_TOKEN_HEX + 1];

	out = json_pack(
		"{sssssssssssssssIsIsIss}", "sandboxID", id, "templateID", tmpl ? tmpl : "",
		"clientID", "husk", "envdVersion", E2B_ENVD_VERSION, "startedAt",
		created ? created : "", "endAt", end ? end : (created ? created : ""), "state",
		state ? state : "killed", "cpuCount",
		(json_int_t)cpus(json_string_value(json_object_get(res, "cpu"))), "memoryMB",
		(json_int_t)size_mib(json_string_value(json_object_get(res, "memory"))),
		"diskSizeMB", (json_int_t)size_mib(json_string_value(json_object_get(res, "disk"))),
		"alias", json_string_value(json_object_get(info, "name")) ?: "");
	if (!out)
		return NULL;
	if (!json_string_length(json_object_get(out, "alias")))
		json_object_del(out, "alias");
	json_object_set_new(out, "metadata",
	                    json_is_object(meta) ? json_copy(meta) : json_object());
	if (token) {
		e2b_token(rt, id, tok);
		json_object_set_new(out, "envdAccessToken", json_string(tok));
		/* What getHost(port) puts after "<port>-<sandbox id>.": needs DNS for it. */
		json_object_set_new(out, "domain",
		                    rt->cfg.public_domain ? json_string(rt->cfg.public_domain)
		                                          : json_null());
		if (json_is_true(json_object_get(info, "urlTokenRequired"))) {
			char traffic[ROUTES_TOKEN_HEX + 1];

			routes_token(rt, "url", id, traffic);
			json_object_set_new(out, "trafficAccessToken", json_string(traffic));
		}
	}
	return out;
}
