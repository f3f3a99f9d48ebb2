/* SPDX-License-Identifier: MIT */
#ifndef HUSK_KEYSTORE_H
#define HUSK_KEYSTORE_H

/*
 * Keys at rest (issue I, item 6): every sealed file (a paused sandbox's
 * memory, a snapshot's) has a data key of its own, made here and kept by
 * huskd only wrapped - encrypted - by the key of the org that owns the file.
 * Deleting an org's key makes everything wrapped by it unreadable
 * (crypto-shredding); deleting a record deletes the only copy of its data
 * key.
 *
 * Org keys live in a folder of huskd's (STATE/keys, mode 0700: one file of
 * 32 random bytes and an 8-byte id per org) or, given a KMS command, in an
 * external key service: the command is run as `CMD wrap ORG`, `CMD unwrap
 * ORG` and `CMD delete ORG`, the key or the wrapped text on its standard
 * input and the answer on its standard output (api/huskd/README.md, "Keys at
 * rest"). Wrapped keys name their org, so a key of a public snapshot opens
 * for every org that uses it.
 */
#include <stddef.h>
#include <stdint.h>

#define KEYSTORE_KEY_LEN 32
/* The longest wrapped key: what a KMS command may answer, and the org before it. */
#define KEYSTORE_WRAPPED_MAX 4200

struct keystore;

/* dir: where org keys are kept (made 0700); kms: the KMS command, or NULL. 0 or -errno. */
int keystore_open(const char *dir, const char *kms, struct keystore **out)
	__attribute__((warn_unused_result));
void keystore_free(struct keystore *ks);

/*
 * A new data key for a file of org's: key (32 bytes) and its wrapped text
 * (*wrapped, malloc'd, to keep in the store). The org's key is made at its
 * first use. 0 or -errno with err.
 */
int keystore_new_key(struct keystore *ks, const char *org, uint8_t key[KEYSTORE_KEY_LEN],
                     char **wrapped, char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * The data key a wrapped text holds: 0, -ENOKEY (its org's key was deleted:
 * it can never be read again), -EBADMSG (damaged, or not a wrapped key), or
 * another -errno; err says which.
 */
int keystore_unwrap(struct keystore *ks, const char *wrapped, uint8_t key[KEYSTORE_KEY_LEN],
                    char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Deletes org's key: every data key wrapped by it, and so every file
 * sealed for the org until now, is unreadable from here on. A later file of
 * the org gets a new org key. 0, -ENOENT (the org has no key), or -errno.
 */
int keystore_shred(struct keystore *ks, const char *org, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/* The org a wrapped text belongs to, into org (len bytes): 0 or -EBADMSG. */
int keystore_wrapped_org(const char *wrapped, char *org, size_t len)
	__attribute__((warn_unused_result));

/* 64 hex digits of key, and a NUL, into hex. */
void keystore_hex(const uint8_t key[KEYSTORE_KEY_LEN], char hex[2 * KEYSTORE_KEY_LEN + 1]);

/* Runs the KMS command (keystore_kms.c): op ORG, in on its stdin, its stdout into out. */
int keystore_kms_run(const char *cmd, const char *op, const char *org, const char *in, char *out,
                     size_t outlen, char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
