// SPDX-License-Identifier: MIT
/*
 * Output stream URLs are signed and expire. The client fetches them with a
 * bare fetch (no key), so the URL itself is the permission: HMAC-SHA256 of
 * the stream id and an expiry time under huskd's stream key (STATE/stream-key,
 * made once). Each answer that carries an execution signs its URLs afresh,
 * so a key holder can always get a working one (GET /sandbox/execution/ID).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "r_int.h"

/* Hex characters of the MAC in a URL: 128 bits. */
#define SIG_HEX 32

static void mac(const struct routes *rt, const char *sid, long long exp, char out[SIG_HEX + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s.%lld", sid, exp);

	HMAC(EVP_sha256(), rt->cfg.stream_key, (int)sizeof(rt->cfg.stream_key),
	     (const unsigned char *)msg, (size_t)n, md, &len);
	for (int i = 0; i < SIG_HEX / 2; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* One URL field of obj, re-signed: base/streams/ID[?...] -> base/streams/ID?exp=E&sig=S. */
static void sign_field(const struct routes *rt, json_t *obj, const char *key, long long exp)
{
	const char *url = json_string_value(json_object_get(obj, key)), *at;
	char sid[STORE_ID_LEN], sig[SIG_HEX + 1];
	size_t n;

	if (!url || !(at = strstr(url, "/streams/")))
		return;
	n = strcspn(at + 9, "?");
	if (n == 0 || n >= sizeof(sid))
		return;
	memcpy(sid, at + 9, n);
	sid[n] = '\0';
	mac(rt, sid, exp, sig);
	json_object_set_new(
		obj, key,
		json_sprintf("%.*s?exp=%lld&sig=%s", (int)(at + 9 + n - url), url, exp, sig));
}

static void sign_one(const struct routes *rt, json_t *obj, long long exp)
{
	sign_field(rt, obj, "stdoutStreamUrl", exp);
	sign_field(rt, obj, "stderrStreamUrl", exp);
}

void stream_sign(const struct routes *rt, json_t *data)
{
	long long exp = (long long)time(NULL) + (long long)(rt->cfg.stream_ttl_ms / 1000);
	json_t *v;
	size_t i;

	sign_one(rt, data, exp);
	json_array_foreach(json_object_get(data, "executions"), i, v) sign_one(rt, v, exp);
	json_array_foreach(json_object_get(data, "jobs"), i, v) sign_one(rt, v, exp);
}

void stream_sign_field(const struct routes *rt, json_t *obj, const char *key)
{
	sign_field(rt, obj, key, (long long)time(NULL) + (long long)(rt->cfg.stream_ttl_ms / 1000));
}

int stream_check(const struct routes *rt, struct http_req *r, const char *sid)
{
	char exp[24] = "", sig[SIG_HEX + 8] = "", want[SIG_HEX + 1];
	long long e;

	if (http_query_get(r, "exp", exp, sizeof(exp)) <= 0 ||
	    http_query_get(r, "sig", sig, sizeof(sig)) != SIG_HEX) {
		api_error(r, 403, "FORBIDDEN",
		          "this stream URL is not signed: take the one an execution's answer gives "
		          "(GET /sandbox/execution/ID gives a fresh one)");
		return -1;
	}
	e = strtoll(exp, NULL, 10);
	mac(rt, sid, e, want);
	if (CRYPTO_memcmp(want, sig, SIG_HEX)) {
		api_error(r, 403, "FORBIDDEN", "this stream URL's signature does not match it");
		return -1;
	}
	if (e < (long long)time(NULL)) {
		api_error(
			r, 403, "FORBIDDEN",
			"this stream URL has expired: GET /sandbox/execution/ID gives a fresh one");
		return -1;
	}
	return 0;
}

void routes_token(const struct routes *rt, const char *what, const char *id,
                  char out[ROUTES_TOKEN_HEX + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s %s", what, id);

	HMAC(EVP_sha256(), rt->cfg.stream_key, (int)sizeof(rt->cfg.stream_key),
	     (const unsigned char *)msg, (size_t)(n < (int)sizeof(msg) ? n : (int)sizeof(msg) - 1),
	     md, &len);
	for (int i = 0; i < ROUTES_TOKEN_HEX / 2; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}
