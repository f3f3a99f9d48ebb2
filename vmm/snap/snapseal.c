// SPDX-License-Identifier: MIT
/*
 * Sealed snapshots (FORMAT.md, "Sealed snapshots"): every frame of the file,
 * the section table included, encrypted and authenticated on its own with
 * AES-256-GCM, so that a lazy restore still reads any one chunk alone. The
 * key is the snapshot's data key, which huskd keeps wrapped by its org's key;
 * the nonce is the file's random salt and the frame's place in the table,
 * so no two frames sealed with one key share a nonce, and a frame moved to
 * another place (or another file) does not open.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "snap_priv.h"

static EVP_CIPHER *gcm;

int snap_seal_noconfig(void)
{
	/*
	 * Without the host's openssl.cnf: the VMM's ciphers are its own choice,
	 * parsing that file was a third of OpenSSL's start (1 ms natively, 40 ms
	 * nested), and it may name modules to load, files a confined thread
	 * cannot open. Cheap (3 ms nested): no cipher is fetched yet.
	 */
	return OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) ? 0 : -ENOTSUP;
}

int snap_seal_init(void)
{
	/*
	 * The first fetch builds OpenSSL's table of every cipher: 1.6 ms natively,
	 * 50 ms nested, and 1.3 MiB of its code resident. A VMM that holds no key
	 * never pays it. Without a config file it only allocates, locks and draws
	 * random bytes, which every thread's seccomp role allows (confine_rules.c), so
	 * the control thread may do it when huskd hands a key.
	 */
	if (gcm)
		return 0;
	if (snap_seal_noconfig() || !(gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL)))
		return -ENOTSUP;
	return 0;
}

int snap_salt_new(uint8_t salt[SNAP_SALT_LEN])
{
	size_t got = 0;

	while (got < SNAP_SALT_LEN) {
		ssize_t n = getrandom(salt + got, SNAP_SALT_LEN - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

/* One frame through AES-256-GCM in place; the tag is written (enc) or checked. */
static int seal_run(const struct snap_key *key, const uint8_t salt[SNAP_SALT_LEN], uint32_t index,
                    uint8_t *buf, size_t len, uint8_t tag[SNAP_TAG_LEN], int enc)
{
	uint8_t iv[12];
	EVP_CIPHER_CTX *ctx;
	int ret = -EBADMSG, n;

	if (snap_seal_init())
		return -ENOTSUP;
	if (len > INT32_MAX)
		return -EFBIG;
	memcpy(iv, salt, SNAP_SALT_LEN);
	snap_put32(iv + SNAP_SALT_LEN, index);
	if (!(ctx = EVP_CIPHER_CTX_new()))
		return -ENOMEM;
	if (!EVP_CipherInit_ex2(ctx, gcm, key->k, iv, enc, NULL))
		goto out;
	if (len && !EVP_CipherUpdate(ctx, buf, &n, buf, (int)len))
		goto out;
	if (!enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, SNAP_TAG_LEN, tag))
		goto out;
	/* Decrypting, the final step is where a wrong key or an altered byte shows. */
	if (!EVP_CipherFinal_ex(ctx, buf + len, &n))
		goto out;
	if (enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, SNAP_TAG_LEN, tag))
		goto out;
	ret = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	OPENSSL_cleanse(iv, sizeof(iv));
	return ret;
}

int snap_seal(const struct snap_key *key, const uint8_t salt[SNAP_SALT_LEN], uint32_t index,
              uint8_t *buf, size_t len, uint8_t tag[SNAP_TAG_LEN])
{
	return seal_run(key, salt, index, buf, len, tag, 1);
}

int snap_unseal(const struct snap_key *key, const uint8_t salt[SNAP_SALT_LEN], uint32_t index,
                uint8_t *buf, size_t len, const uint8_t tag[SNAP_TAG_LEN])
{
	uint8_t t[SNAP_TAG_LEN];

	memcpy(t, tag, sizeof(t));
	return seal_run(key, salt, index, buf, len, t, 0);
}

int snap_key_parse(const char *hex, size_t len, struct snap_key *key)
{
	char text[2 * SNAP_KEY_LEN + 1];
	size_t n = 0;
	int ok;

	while (len && (hex[len - 1] == '\n' || hex[len - 1] == '\r' || hex[len - 1] == ' '))
		len--;
	if (len != 2 * SNAP_KEY_LEN)
		return -EINVAL;
	memcpy(text, hex, len);
	text[len] = '\0';
	ok = OPENSSL_hexstr2buf_ex(key->k, sizeof(key->k), &n, text, '\0') && n == SNAP_KEY_LEN;
	OPENSSL_cleanse(text, sizeof(text));
	if (!ok)
		OPENSSL_cleanse(key, sizeof(*key));
	return ok ? 0 : -EINVAL;
}
