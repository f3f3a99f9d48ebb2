// SPDX-License-Identifier: MIT
/*
 * Data keys wrapped by org keys (keystore.h). A wrapped key is one line of
 * text: "l1:ORG:KEYID:HEX" for an org key kept here (HEX: the 12-byte nonce,
 * the encrypted data key and the GCM tag; the org's name is the associated
 * data, so a wrapped key cannot pass for another org's), or "k1:ORG:TEXT"
 * for one a KMS command wrapped.
 */
#include "keystore.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEK_ID_LEN 8
#define NONCE_LEN 12
#define TAG_LEN 16
#define ORG_MAX 64

struct keystore {
	char *dir;
	char *kms;
};

struct kek {
	uint8_t key[KEYSTORE_KEY_LEN];
	uint8_t id[KEK_ID_LEN];
};

void keystore_hex(const uint8_t key[KEYSTORE_KEY_LEN], char hex[2 * KEYSTORE_KEY_LEN + 1])
{
	for (int i = 0; i < KEYSTORE_KEY_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
}

/* hex (exactly 2 * len digits) into out: 0 or -EBADMSG. */
static int unhex(const char *hex, size_t hexlen, uint8_t *out, size_t len)
{
	char text[2 * (NONCE_LEN + KEYSTORE_KEY_LEN + TAG_LEN) + 1];
	size_t n = 0;
	int ok;

	if (hexlen != 2 * len || hexlen >= sizeof(text))
		return -EBADMSG;
	memcpy(text, hex, hexlen);
	text[hexlen] = '\0';
	ok = OPENSSL_hexstr2buf_ex(out, len, &n, text, '\0') && n == len;
	OPENSSL_cleanse(text, sizeof(text));
	return ok ? 0 : -EBADMSG;
}

/* Org ids name files here: letters, digits, '_' and '-' only. */
static bool org_ok(const char *org)
{
	size_t n = strlen(org);

	if (!n || n >= ORG_MAX)
		return false;
	return strspn(org, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int keystore_open(const char *dir, const char *kms, struct keystore **out)
{
	struct keystore *ks = calloc(1, sizeof(*ks));

	if (!ks || !(ks->dir = strdup(dir)) || (kms && !(ks->kms = strdup(kms)))) {
		keystore_free(ks);
		return -ENOMEM;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int rc = -errno;

		keystore_free(ks);
		return rc;
	}
	/* Whatever made it, only huskd reads it. */
	if (chmod(dir, 0700) < 0) {
		int rc = -errno;

		keystore_free(ks);
		return rc;
	}
	*out = ks;
	return 0;
}

void keystore_free(struct keystore *ks)
{
	if (!ks)
		return;
	free(ks->dir);
	free(ks->kms);
	free(ks);
}

static void kek_path(const struct keystore *ks, const char *org, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.key", ks->dir, org);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The org's key: 0, -ENOENT (none; made when create), or -errno. */
static int kek_load(struct keystore *ks, const char *org, bool create, struct kek *k)
{
	char path[4200], tmp[4210];
	ssize_t n;
	int fd, rc;

	kek_path(ks, org, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = read(fd, k, sizeof(*k));
		close(fd);
		return n == (ssize_t)sizeof(*k) ? 0 : -EBADMSG;
	}
	if (errno != ENOENT || !create)
		return -errno;
	if (RAND_bytes((uint8_t *)k, sizeof(*k)) != 1)
		return -EIO;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, k, sizeof(*k));
	rc = n == (ssize_t)sizeof(*k) ? 0 : n < 0 ? -errno : -EIO;
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	/* link(), not rename(): two makers at once keep the first key, never lose one. */
	if (!rc && link(tmp, path) < 0)
		rc = -errno;
	unlink(tmp);
	if (rc == -EEXIST)
		return kek_load(ks, org, false, k);
	return rc ? rc : fsync_dir(ks->dir);
}

/* AES-256-GCM of len bytes with org as associated data; 0 or -EBADMSG. */
static int gcm(const uint8_t *key, const uint8_t *nonce, const char *org, const uint8_t *in,
               uint8_t *out, int len, uint8_t *tag, int enc)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n, ok;

	if (!ctx)
		return -ENOMEM;
	ok = EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce, enc) &&
	     EVP_CipherUpdate(ctx, NULL, &n, (const uint8_t *)org, (int)strlen(org)) &&
	     EVP_CipherUpdate(ctx, out, &n, in, len) &&
	     (enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, tag)) &&
	     EVP_CipherFinal_ex(ctx, out + n, &n) &&
	     (!enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, tag));
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -EBADMSG;
}

static int wrap_local(struct keystore *ks, const char *org, const uint8_t key[KEYSTORE_KEY_LEN],
                      char **wrapped, char *err, size_t errlen)
{
	uint8_t blob[NONCE_LEN + KEYSTORE_KEY_LEN + TAG_LEN];
	char hex[2 * sizeof(blob) + 1], id[2 * KEK_ID_LEN + 1];
	struct kek k;
	int rc = kek_load(ks, org, true, &k);

	if (rc) {
		snprintf(err, errlen, "cannot read or make the key of org %s under %s: %s", org,
		         ks->dir, strerror(-rc));
		return rc;
	}
	rc = RAND_bytes(blob, NONCE_LEN) == 1 ? 0 : -EIO;
	if (!rc)
		rc = gcm(k.key, blob, org, key, blob + NONCE_LEN, KEYSTORE_KEY_LEN,
		         blob + NONCE_LEN + KEYSTORE_KEY_LEN, 1);
	for (size_t i = 0; !rc && i < sizeof(blob); i++)
		snprintf(hex + 2 * i, 3, "%02x", blob[i]);
	for (size_t i = 0; !rc && i < KEK_ID_LEN; i++)
		snprintf(id + 2 * i, 3, "%02x", k.id[i]);
	if (!rc && asprintf(wrapped, "l1:%s:%s:%s", org, id, hex) < 0)
		rc = -ENOMEM;
	if (rc)
		snprintf(err, errlen, "cannot wrap a data key for org %s: %s", org, strerror(-rc));
	OPENSSL_cleanse(&k, sizeof(k));
	return rc;
}

int keystore_new_key(struct keystore *ks, const char *org, uint8_t key[KEYSTORE_KEY_LEN],
                     char **wrapped, char *err, size_t errlen)
{
	char hex[2 * KEYSTORE_KEY_LEN + 2], out[KEYSTORE_WRAPPED_MAX];
	int rc;

	if (!org_ok(org)) {
		snprintf(err, errlen, "org id '%.64s' cannot name a key", org);
		return -EINVAL;
	}
	if (RAND_bytes(key, KEYSTORE_KEY_LEN) != 1) {
		snprintf(err, errlen, "no random bytes for a data key");
		return -EIO;
	}
	if (!ks->kms)
		return wrap_local(ks, org, key, wrapped, err, errlen);
	keystore_hex(key, hex);
	strcat(hex, "\n");
	rc = keystore_kms_run(ks->kms, "wrap", org, hex, out, sizeof(out) - ORG_MAX - 8, err,
	                      errlen);
	OPENSSL_cleanse(hex, sizeof(hex));
	if (!rc && asprintf(wrapped, "k1:%s:%s", org, out) < 0)
		rc = -ENOMEM;
	if (rc)
		OPENSSL_cleanse(key, KEYSTORE_KEY_LEN);
	return rc;
}

int keystore_wrapped_org(const char *wrapped, char *org, size_t len)
{
	const char *p = wrapped + 3, *end;

	if (strncmp(wrapped, "l1:", 3) && strncmp(wrapped, "k1:", 3))
		return -EBADMSG;
	end = strchr(p, ':');
	if (!end || (size_t)(end - p) >= len || end == p)
		return -EBADMSG;
	memcpy(org, p, (size_t)(end - p));
	org[end - p] = '\0';
	return org_ok(org) ? 0 : -EBADMSG;
}

static int unwrap_local(struct keystore *ks, const char *org, const char *rest,
                        uint8_t key[KEYSTORE_KEY_LEN], char *err, size_t errlen)
{
	uint8_t blob[NONCE_LEN + KEYSTORE_KEY_LEN + TAG_LEN], id[KEK_ID_LEN];
	const char *colon = strchr(rest, ':');
	struct kek k;
	int rc;

	if (!colon || unhex(rest, (size_t)(colon - rest), id, sizeof(id)) ||
	    unhex(colon + 1, strlen(colon + 1), blob, sizeof(blob))) {
		snprintf(err, errlen, "a wrapped key of org %s is damaged", org);
		return -EBADMSG;
	}
	rc = kek_load(ks, org, false, &k);
	if (rc == -ENOENT || (!rc && CRYPTO_memcmp(k.id, id, sizeof(id)))) {
		snprintf(err, errlen,
		         "the key of org %s it was sealed with has been deleted: it can no longer "
		         "be read",
		         org);
		rc = -ENOKEY;
	} else if (rc) {
		snprintf(err, errlen, "cannot read the key of org %s: %s", org, strerror(-rc));
	} else if ((rc = gcm(k.key, blob, org, blob + NONCE_LEN, key, KEYSTORE_KEY_LEN,
	                     blob + NONCE_LEN + KEYSTORE_KEY_LEN, 0))) {
		snprintf(err, errlen, "a wrapped key of org %s does not open with its key", org);
	}
	OPENSSL_cleanse(&k, sizeof(k));
	return rc;
}

int keystore_unwrap(struct keystore *ks, const char *wrapped, uint8_t key[KEYSTORE_KEY_LEN],
                    char *err, size_t errlen)
{
	char org[ORG_MAX], out[2 * KEYSTORE_KEY_LEN + 8], *in;
	const char *rest;
	int rc;

	if (keystore_wrapped_org(wrapped, org, sizeof(org))) {
		snprintf(err, errlen, "not a wrapped key");
		return -EBADMSG;
	}
	rest = wrapped + 3 + strlen(org) + 1;
	if (!strncmp(wrapped, "l1:", 3))
		return unwrap_local(ks, org, rest, key, err, errlen);
	if (!ks->kms) {
		snprintf(err, errlen,
		         "a key of org %s is held by a KMS, and huskd runs without --kms-command",
		         org);
		return -ENOKEY;
	}
	if (asprintf(&in, "%s\n", rest) < 0)
		return -ENOMEM;
	rc = keystore_kms_run(ks->kms, "unwrap", org, in, out, sizeof(out), err, errlen);
	free(in);
	if (!rc && unhex(out, strlen(out), key, KEYSTORE_KEY_LEN)) {
		snprintf(err, errlen, "the KMS command's unwrap did not answer 64 hex digits");
		rc = -EBADMSG;
	}
	OPENSSL_cleanse(out, sizeof(out));
	return rc;
}

int keystore_shred(struct keystore *ks, const char *org, char *err, size_t errlen)
{
	char path[4200], out[256];
	struct kek junk;
	int fd, rc = 0;

	if (!org_ok(org)) {
		snprintf(err, errlen, "org id '%.64s' cannot name a key", org);
		return -EINVAL;
	}
	if (ks->kms)
		return keystore_kms_run(ks->kms, "delete", org, "", out, sizeof(out), err, errlen);
	kek_path(ks, org, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			snprintf(err, errlen, "org %s has no key (nothing of it is sealed)", org);
		else
			snprintf(err, errlen, "cannot delete %s: %s", path, strerror(-rc));
		return rc;
	}
	/* Overwritten before the name goes: a file system that writes in place loses it. */
	if (RAND_bytes((uint8_t *)&junk, sizeof(junk)) != 1 ||
	    pwrite(fd, &junk, sizeof(junk), 0) != (ssize_t)sizeof(junk) || fsync(fd) < 0)
		rc = -EIO;
	close(fd);
	if (unlink(path) < 0)
		rc = -errno;
	if (!rc)
		rc = fsync_dir(ks->dir);
	if (rc)
		snprintf(err, errlen, "cannot delete %s: %s", path, strerror(-rc));
	return rc;
}
