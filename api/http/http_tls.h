/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HTTP_TLS_H
#define HUSK_HTTP_TLS_H

/*
 * TLS between a connection's socket and its HTTP core (http.c uses it when
 * the server has a certificate). Socket-free: ciphertext in through
 * http_tls_input, plaintext out through io->plain; ciphertext out through
 * io->send.
 */
#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct http_tls;

struct http_tls_io {
	void *arg;
	/* Plaintext that arrived (borrowed). */
	void (*plain)(void *arg, const void *data, size_t len);
	/* Ciphertext to send (malloc'd, ownership passes), carrying plain_len bytes of plaintext.
	 */
	int (*send)(void *arg, char *buf, size_t len, size_t plain_len);
};

/* A server context from PEM files; -EINVAL with a sentence in err. */
int http_tls_ctx_new(const char *cert, const char *key, SSL_CTX **out, char *err, size_t len)
	__attribute__((warn_unused_result));
struct http_tls *http_tls_new(SSL_CTX *ctx);
void http_tls_free(struct http_tls *t);
/* Ciphertext from the peer: 0, or -EPROTO (a TLS error), -ECONNRESET (the peer closed TLS). */
int http_tls_input(struct http_tls *t, const void *data, size_t len, const struct http_tls_io *io)
	__attribute__((warn_unused_result));
/* Plaintext to the peer, sent as one ciphertext send: 0 or -errno. */
int http_tls_write(struct http_tls *t, const char *buf, size_t len, const struct http_tls_io *io)
	__attribute__((warn_unused_result));
/* close_notify to the peer; nothing more is read. */
int http_tls_shutdown(struct http_tls *t, const struct http_tls_io *io);

#endif
