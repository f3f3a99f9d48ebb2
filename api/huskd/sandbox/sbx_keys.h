/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_KEYS_H
#define HUSK_SBX_KEYS_H
/*
 * Keys at rest inside the manager (issue I, item 6): sealed memory
 * (sbx_seal.c) and encrypted disks (sbx_dkey.c), over keys/keystore.h. For
 * the manager's files only, through sbx_int.h.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "img.h"

struct sandbox;

/* ---- sbx_seal.c: sealed memory (keys/keystore.h) ---- */
struct sbx_dkeys;
/*
 * The read end of a pipe for husk-vmm's --key-fd: the key wrapped unwraps to
 * (NULL: none), and the disk keys of disk (NULL: none).
 */
int sbx_seal_pipe(struct sandbox *sb, const char *wrapped, const struct sbx_dkeys *disk, int *fd,
                  char *err, size_t errlen);
/*
 * The control command for its next snapshot's key into cmd: "key HEX" for a
 * new key of its org (kept in mem_key_next until sbx_seal_done), "key none"
 * when it is not to be sealed but its VMM holds a key, or "" for nothing to
 * say. 0 or -errno with err.
 */
int sbx_seal_next(struct sandbox *sb, char *cmd, size_t len, char *err, size_t errlen);
/* The snapshot was written (ok) or not: its key becomes the sandbox's memory's, or goes. */
void sbx_seal_done(struct sandbox *sb, bool ok);
/* Its memory.snap is gone (resumed, ended): its key goes, from the store's files too. */
void sbx_seal_forget(struct sandbox *sb);

/* ---- sbx_dkey.c: encrypted disks (keys/keystore.h, img.h) ---- */
#define SBX_DKEY_HEX 65  /* a key as a LUKS passphrase: 64 hex digits and a NUL */
#define SBX_DKEYS_MAX 48 /* images of its chain with keys (husk-vmm takes as many) */
struct sbx_dkeys {
	struct img_secret v[SBX_DKEYS_MAX];
	struct img_secrets set; /* v, for the image library */
	char own[SBX_DKEY_HEX]; /* its own files' passphrase, "" when they are clear */
	char hex[SBX_DKEYS_MAX][SBX_DKEY_HEX];
	uint8_t mk[IMG_MASTER_KEY_LEN]; /* its layer's master key, when it was still known */
};
/* At create: the keys of the snapshot it starts from, and one of its own when sealing. */
int sbx_dkey_plan(struct sandbox *sb, json_t *snap_priv, json_t *priv, char *err, size_t errlen);
/* Its keys as the store recorded them (a huskd restart). */
void sbx_dkey_adopt(struct sandbox *sb, json_t *priv);
/* Whether any image of its disk is encrypted. */
bool sbx_dkey_any(const struct sandbox *sb);
/* The key wrapped unwraps to, as 64 hex digits (what: "disk", "memory", for err). */
int sbx_dkey_unwrap(struct sandbox *sb, const char *wrapped, const char *what,
                    char hex[SBX_DKEY_HEX], char *err, size_t errlen);
/* Its own files' passphrase into hex ("" for none): for a new layer. Off the loop too. */
int sbx_dkey_own(struct sandbox *sb, char hex[SBX_DKEY_HEX], char *err, size_t errlen);
/* Whether a new file of its own gets a key (huskd keeps keys and seals; not a template's). */
bool sbx_dkey_wanted(const struct sandbox *sb);
/* Whether a wrapped key still opens (its org's key may have been shredded since). */
bool sbx_dkey_opens(struct sbx_mgr *m, const char *wrapped);
/* A layer at path over backing (size 0: the backing's), under pass ("" or NULL: clear);
 * encrypted, its master key into mk if not NULL. Off the loop too. */
int sbx_dkey_make(const char *path, const char *backing, uint64_t size, const char *pass,
                  uint8_t mk[IMG_MASTER_KEY_LEN], char *err, size_t errlen);
/* A new layer (sb->layer) over backing, under its own key; size 0: the backing's. With
 * first, its master key is kept for its first VMM start (sbx_dkey_first). */
int sbx_dkey_layer(struct sandbox *sb, const char *backing, uint64_t size, bool first, char *err,
                   size_t errlen);
/* Keeps mk, its new layer's master key, for its first VMM start: opening by it skips
 * the key slot's PBKDF2 and stripes (~280 ms nested). NULL: forgets one. Off the loop too. */
void sbx_dkey_first(struct sandbox *sb, const uint8_t mk[IMG_MASTER_KEY_LEN]);
/* Every key of the chain from top (its layer, or one it was renamed to), unwrapped
 * (sbx_dkey_close cleans). Off the loop too. */
int sbx_dkey_open(struct sandbox *sb, const char *top, struct sbx_dkeys *k, char *err,
                  size_t errlen);
void sbx_dkey_close(struct sbx_dkeys *k);
/* The keys as husk-vmm's key pipe takes them ("disk HEX PATH" lines, malloc'd). */
int sbx_dkey_lines(const struct sbx_dkeys *k, char **out, size_t *len);
/* The diskKeys of a snapshot whose disk is disk (a file of its own, renamed): those of
 * every image it stands on. NULL with err. */
json_t *sbx_dkey_snapshot(struct sandbox *sb, const char *disk, char *err, size_t errlen);
/* Its files are gone: so are its keys, from the store's files too. */
void sbx_dkey_forget(struct sandbox *sb);

#endif
