// SPDX-License-Identifier: MIT
/*
 * TLS for the HTTP server (OpenSSL over memory BIOs): the socket carries
 * ciphertext, the connection core sees plaintext. Each plaintext write goes
 * out as one ciphertext write that reports the plaintext's length when it
 * is sent, so the core's accounting of queued bytes stays as without TLS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "http.h"
#include "http_tls.h"

struct http_tls {
	SSL *ssl;
	BIO *rbio, *wbio; /* ciphertext in, ciphertext out (owned by ssl) */
	bool closed;
};

static void tls_error(char *err, size_t len, const char *what, const char *path)
{
	unsigned long e = ERR_get_error();

	snprintf(err, len, "%s %s: %s", what, path, e ? ERR_reason_error_string(e) : "failed");
	ERR_clear_error();
}

int http_tls_ctx_new(const char *cert, const char *key, SSL_CTX **out, char *err, size_t len)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	*out = NULL;
	if (!ctx) {
		snprintf(err, len, "cannot make a TLS context");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* Writes of any size at once: the memory BIO never pushes back. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		tls_error(err, len, "certificate", cert);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		tls_error(err, len, "key (the certificate's own, PEM)", key);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		tls_error(err, len, "key does not match the certificate:", key);
		goto fail;
	}
	*out = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return -EINVAL;
}

struct http_tls *http_tls_new(SSL_CTX *ctx)
{
	struct http_tls *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->ssl = SSL_new(ctx);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		return NULL;
	}
	BIO_set_mem_eof_return(t->rbio, -1); /* empty: "want more", not end of stream */
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	SSL_set_accept_state(t->ssl);
	return t;
}

void http_tls_free(struct http_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl); /* frees both BIOs */
	free(t);
}

/* Whatever OpenSSL has for the peer, as one send carrying plain_len. */
static int flush(struct http_tls *t, const struct http_tls_io *io, size_t plain_len)
{
	size_t n = (size_t)BIO_ctrl_pending(t->wbio);
	char *buf;

	if (!n)
		return plain_len ? -EIO : 0;
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	if (BIO_read(t->wbio, buf, (int)n) != (int)n) {
		free(buf);
		return -EIO;
	}
	return io->send(io->arg, buf, n, plain_len);
}

int http_tls_input(struct http_tls *t, const void *data, size_t len, const struct http_tls_io *io)
{
	char plain[16 * 1024];
	int n, rc;

	if (t->closed)
		return 0;
	if (len && BIO_write(t->rbio, data, (int)len) != (int)len)
		return -ENOMEM;
	for (;;) {
		n = SSL_read(t->ssl, plain, sizeof(plain));
		if (n > 0) {
			io->plain(io->arg, plain, (size_t)n);
			if (t->closed)
				return 0;
			continue;
		}
		rc = SSL_get_error(t->ssl, n);
		/* Handshake answers and tickets may be waiting whatever happened. */
		if (flush(t, io, 0) < 0)
			return -EIO;
		if (rc == SSL_ERROR_WANT_READ)
			return 0;
		ERR_clear_error();
		return rc == SSL_ERROR_ZERO_RETURN ? -ECONNRESET : -EPROTO;
	}
}

int http_tls_write(struct http_tls *t, const char *buf, size_t len, const struct http_tls_io *io)
{
	size_t done = 0;

	while (done < len) {
		int n = SSL_write(t->ssl, buf + done, (int)(len - done));

		if (n <= 0) {
			ERR_clear_error();
			return -EPROTO; /* a write before the handshake is done: the core never does
			                 */
		}
		done += (size_t)n;
	}
	return flush(t, io, len);
}

int http_tls_shutdown(struct http_tls *t, const struct http_tls_io *io)
{
	if (t->closed)
		return 0;
	t->closed = true;
	SSL_shutdown(t->ssl);
	ERR_clear_error();
	return flush(t, io, 0);
}

int http_tls_check(const char *cert, const char *key, char *err, size_t len)
{
	SSL_CTX *ctx;
	int rc = http_tls_ctx_new(cert, key, &ctx, err, len);

	SSL_CTX_free(ctx);
	return rc;
}
