// SPDX-License-Identifier: MIT
/*
 * The Connect protocol as E2B's SDK speaks it to envd (connectrpc.com,
 * "Connect Protocol"; the SDK sets useBinaryFormat: false): a unary call is
 * a POST of one JSON message answered by one (an error: its HTTP status and
 * {code, message}); a server-streaming call posts one enveloped message
 * (flags byte, 32-bit big-endian length, JSON) and is answered 200 with
 * enveloped messages, the last flagged end-of-stream and carrying {} or
 * {"error": {code, message}}. Bytes from the client are bounded before any
 * allocation: a message is at most the request body, which the HTTP server
 * bounds, and an envelope must describe exactly that body.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "e2b_int.h"
#include "e2b_wire.h"

#define ENV_HDR 5
#define ENV_END 0x02

static const struct {
	const char *name;
	int status;
} codes[] = {
	[CX_INVALID_ARGUMENT] = {"invalid_argument", 400},
	[CX_NOT_FOUND] = {"not_found", 404},
	[CX_ALREADY_EXISTS] = {"already_exists", 409},
	[CX_PERMISSION_DENIED] = {"permission_denied", 403},
	[CX_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
	[CX_FAILED_PRECONDITION] = {"failed_precondition", 400},
	[CX_UNIMPLEMENTED] = {"unimplemented", 501},
	[CX_INTERNAL] = {"internal", 500},
	[CX_UNAVAILABLE] = {"unavailable", 503},
	[CX_UNAUTHENTICATED] = {"unauthenticated", 401},
	[CX_CANCELED] = {"canceled", 499},
};

char *e2b_b64(const void *p, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, p, (int)len);
	return out;
}

unsigned char *e2b_unb64(const char *in, size_t *len)
{
	size_t n = in ? strlen(in) : 0, pad = 0;
	unsigned char *out;
	int got;

	if (!in || n % 4 || n > (size_t)INT32_MAX)
		return NULL;
	while (pad < 2 && n > pad && in[n - 1 - pad] == '=')
		pad++;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	got = n ? EVP_DecodeBlock(out, (const unsigned char *)in, (int)n) : 0;
	if (got < 0 || (size_t)got < pad) {
		free(out);
		return NULL;
	}
	*len = (size_t)got - pad;
	return out;
}

static json_t *error_body(enum cx_code code, const char *msg)
{
	return json_pack("{ssss}", "code", codes[code].name, "message", msg);
}

void cx_error(struct http_req *r, enum cx_code code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (codes[code].status >= 500)
		log_error(NULL, "envd %s: %s: %s", http_path(r), codes[code].name, msg);
	http_respond_json(r, codes[code].status, error_body(code, msg));
}

enum cx_code cx_code_of(const struct sbx_err *err)
{
	switch (err->fault) {
	case SBX_BAD_INPUT:
	case SBX_TOO_LARGE:
		return CX_INVALID_ARGUMENT;
	case SBX_NO_SANDBOX:
	case SBX_NOT_FOUND:
		return CX_NOT_FOUND;
	case SBX_EXISTS:
		return CX_ALREADY_EXISTS;
	case SBX_DENIED:
	case SBX_FORBIDDEN:
		return CX_PERMISSION_DENIED;
	case SBX_NO_SPACE:
	case SBX_FULL:
		return CX_RESOURCE_EXHAUSTED;
	case SBX_BUSY:
	case SBX_STATE:
	case SBX_STEP_FAILED:
		return CX_FAILED_PRECONDITION;
	case SBX_ENDED:
	case SBX_UNREACHABLE:
	case SBX_UNAVAILABLE:
		return CX_UNAVAILABLE;
	case SBX_OK:
	case SBX_INTERNAL:
		break;
	}
	return CX_INTERNAL;
}

int cx_sandbox(struct routes *rt, struct http_req *r, bool rpc, char id[STORE_ID_LEN])
{
	const char *sid = http_header(r, "E2b-Sandbox-Id"), *tok = http_header(r, "X-Access-Token");
	char want[E2B_TOKEN_HEX + 1];
	const char *why = NULL;
	int status = 401;

	if (!sid || !*sid || strlen(sid) >= STORE_ID_LEN) {
		why = "the E2b-Sandbox-Id header must name the sandbox (the SDK sends it when "
		      "E2B_SANDBOX_URL is <huskd>/e2b/envd)";
		status = 400;
	} else {
		e2b_token(rt, sid, want);
		if (!tok || strlen(tok) != E2B_TOKEN_HEX ||
		    CRYPTO_memcmp(tok, want, E2B_TOKEN_HEX) != 0)
			why = "X-Access-Token must be the sandbox's envdAccessToken (from create "
			      "or "
			      "connect)";
	}
	if (!why) {
		snprintf(id, STORE_ID_LEN, "%s", sid);
		return 0;
	}
	if (rpc)
		cx_error(r, status == 400 ? CX_INVALID_ARGUMENT : CX_UNAUTHENTICATED, "%s", why);
	else
		e2b_error(r, status, "%s", why);
	return -1;
}

json_t *cx_request(struct http_req *r, bool streaming)
{
	const char *ct = http_header(r, "Content-Type");
	const unsigned char *p;
	json_error_t jerr;
	size_t len;
	json_t *msg;

	p = http_body(r, &len);
	if (!ct || strncmp(ct, streaming ? "application/connect+json" : "application/json",
	                   streaming ? 24 : 16)) {
		cx_error(
			r, CX_INVALID_ARGUMENT,
			"huskd's envd speaks Connect's JSON encoding only: Content-Type must be %s",
			streaming ? "application/connect+json" : "application/json");
		return NULL;
	}
	if (streaming) {
		int rc = envelope_unwrap(p, len, (const void **)&p, &len);

		if (rc == -ENOTSUP) {
			cx_error(r, CX_UNIMPLEMENTED,
			         "compressed messages are not taken: send them plain");
			return NULL;
		}
		if (rc) {
			cx_error(r, CX_INVALID_ARGUMENT,
			         "the request must be exactly one enveloped message (flags 0, then "
			         "its "
			         "length)");
			return NULL;
		}
	}
	msg = len ? json_loadb((const char *)p, len, 0, &jerr) : json_object();
	if (!json_is_object(msg)) {
		json_decref(msg);
		cx_error(r, CX_INVALID_ARGUMENT, "the request message must be a JSON object");
		return NULL;
	}
	return msg;
}

void cx_reply(struct http_req *r, json_t *msg)
{
	if (!msg) {
		cx_error(r, CX_UNAVAILABLE, "out of memory");
		return;
	}
	http_respond_json(r, 200, msg);
}

void cx_stream_begin(struct http_req *r)
{
	http_stream_begin(r, 200, "application/connect+json");
}

static int send_envelope(struct http_req *r, uint8_t flags, json_t *msg)
{
	char *js = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	size_t n = js ? strlen(js) : 0;
	unsigned char hdr[ENV_HDR] = {flags, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
	                              (unsigned char)(n >> 8), (unsigned char)n};
	int rc;

	json_decref(msg);
	if (!js)
		return -ENOMEM;
	rc = http_stream_write(r, hdr, sizeof(hdr));
	if (rc == 0)
		rc = http_stream_write(r, js, n);
	free(js);
	return rc;
}

int cx_stream_send(struct http_req *r, json_t *msg)
{
	return send_envelope(r, 0, msg);
}

void cx_stream_end(struct http_req *r, enum cx_code code, const char *err)
{
	json_t *end = err ? json_pack("{so}", "error", error_body(code, err)) : json_object();

	if (send_envelope(r, ENV_END, end) == -ENOMEM) {
		http_stream_abort(r);
		return;
	}
	http_stream_end(r);
}
