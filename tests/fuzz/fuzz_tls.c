// SPDX-License-Identifier: MIT
/*
 * huskd's TLS layer (api/http/http_tls.c) fed what a client may send: the
 * bytes, in pieces whose size the first byte picks, go in as ciphertext;
 * plaintext writes are tried between pieces. Nothing may crash or leak,
 * plaintext never comes out of more bytes than went in, and every
 * ciphertext send is freed. The server's certificate is made once, in
 * memory, and written to PEM files so the real loader reads it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "http_tls.h"

static SSL_CTX *ctx;
static size_t plain_total;

static int write_pem(char *path, EVP_PKEY *key, X509 *cert)
{
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	int ok = f && (key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
	                   : PEM_write_X509(f, cert));

	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

static void setup(void)
{
	char kp[] = "/tmp/fuzz_tls_keyXXXXXX", cp[] = "/tmp/fuzz_tls_certXXXXXX", err[256];
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();

	if (!key || !x)
		abort();
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                           (const unsigned char *)"fuzz", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	if (!X509_sign(x, key, EVP_sha256()) || write_pem(kp, key, NULL) ||
	    write_pem(cp, NULL, x) || http_tls_ctx_new(cp, kp, &ctx, err, sizeof(err))) {
		fprintf(stderr, "fuzz_tls: setup: %s\n", err);
		abort();
	}
	unlink(kp);
	unlink(cp);
	X509_free(x);
	EVP_PKEY_free(key);
}

static void plain(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	plain_total += len;
}

static int send_out(void *arg, char *buf, size_t len, size_t plain_len)
{
	(void)arg;
	(void)len;
	(void)plain_len;
	free(buf);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_tls_io io = {.plain = plain, .send = send_out};
	struct http_tls *t;
	size_t off = 1, step;

	if (!ctx)
		setup();
	if (size < 1)
		return 0;
	step = (size_t)data[0] % 64 + 1;
	plain_total = 0;
	t = http_tls_new(ctx);
	if (!t)
		return 0;
	while (off < size) {
		size_t len = size - off < step ? size - off : step;

		if (http_tls_input(t, data + off, len, &io) < 0)
			break;
		if (data[0] & 0x80) {
			char *p = malloc(8);

			memcpy(p, "response", 8);
			(void)!http_tls_write(t, p, 8, &io);
			free(p);
		}
		off += len;
	}
	if (data[0] & 0x40)
		http_tls_shutdown(t, &io);
	http_tls_free(t);
	if (plain_total > size)
		__builtin_trap();
	return 0;
}
