// SPDX-License-Identifier: MIT
/*
 * Encrypted disks (issue I, item 6): a sandbox's own disk files - its layer,
 * its checkpoints' files, the disks of the snapshots it takes - are qcow2
 * with LUKS (images/img/qcow_luks.c) under one data key of the sandbox's
 * (diskKey), made for its org and kept only wrapped, as a pause's memory key
 * is (sbx_seal.c). One key for all of them, not one per file: the files are
 * renamed (a layer becomes a checkpoint's file or a snapshot's disk), and a
 * key recorded under a name could be lost by a crash between the rename and
 * the store's write. The images below its own - a snapshot's disk and the
 * snapshots that one was made on - open with the keys the snapshot recorded
 * (diskKeys: path -> wrapped key), copied at create. Runtime images and
 * template makers' disks stay clear: every org starts from them.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_int.h"

/* Below what a pipe holds before huskd would block writing it (64 KiB). */
#define PIPE_BUDGET 60000

int sbx_dkey_plan(struct sandbox *sb, json_t *snap_priv, json_t *priv, char *err, size_t errlen)
{
	json_t *below = json_object_get(snap_priv, "diskKeys");
	uint8_t key[KEYSTORE_KEY_LEN];
	int rc;

	if (json_object_size(below)) {
		json_decref(sb->disk_keys); /* a warm VMM's, taken by a create: the same keys */
		sb->disk_keys = json_deep_copy(below);
		if (!sb->disk_keys || json_object_set(priv, "diskKeys", sb->disk_keys))
			return -ENOMEM;
	}
	if (!sbx_dkey_wanted(sb))
		return 0;
	/* A spare layer's (sbx_spare.c), taken with it. */
	if (sb->disk_key)
		return json_object_set_new(priv, "diskKey", json_string(sb->disk_key)) ? -ENOMEM
		                                                                       : 0;
	rc = keystore_new_key(sb->m->cfg.keys, sb->org[0] ? sb->org : STORE_DEFAULT_ORG, key,
	                      &sb->disk_key, err, errlen);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	return json_object_set_new(priv, "diskKey", json_string(sb->disk_key)) ? -ENOMEM : 0;
}

void sbx_dkey_adopt(struct sandbox *sb, json_t *priv)
{
	const char *own = json_string_value(json_object_get(priv, "diskKey"));

	sb->disk_key = own ? strdup(own) : NULL;
	if (json_object_size(json_object_get(priv, "diskKeys")))
		sb->disk_keys = json_deep_copy(json_object_get(priv, "diskKeys"));
}

bool sbx_dkey_any(const struct sandbox *sb)
{
	return sb->disk_key || json_object_size(sb->disk_keys);
}

int sbx_dkey_unwrap(struct sandbox *sb, const char *wrapped, const char *what,
                    char hex[SBX_DKEY_HEX], char *err, size_t errlen)
{
	uint8_t key[KEYSTORE_KEY_LEN];
	char why[400];
	int rc;

	if (!sb->m->cfg.keys) {
		snprintf(err, errlen, "its %s is encrypted, and this huskd holds no keys", what);
		return -ENOKEY;
	}
	rc = keystore_unwrap(sb->m->cfg.keys, wrapped, key, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "cannot open its encrypted %s: %s", what, why);
		return rc;
	}
	keystore_hex(key, hex);
	OPENSSL_cleanse(key, sizeof(key));
	return 0;
}

int sbx_dkey_own(struct sandbox *sb, char hex[SBX_DKEY_HEX], char *err, size_t errlen)
{
	hex[0] = '\0';
	return sb->disk_key ? sbx_dkey_unwrap(sb, sb->disk_key, "disk", hex, err, errlen) : 0;
}

bool sbx_dkey_opens(struct sbx_mgr *m, const char *wrapped)
{
	uint8_t key[KEYSTORE_KEY_LEN];
	char err[300];
	int rc = keystore_unwrap(m->cfg.keys, wrapped, key, err, sizeof(err));

	OPENSSL_cleanse(key, sizeof(key));
	return rc == 0;
}

bool sbx_dkey_wanted(const struct sandbox *sb)
{
	return sb->m->cfg.keys && sb->m->cfg.seal && !sb->hidden;
}

int sbx_dkey_make(const char *path, const char *backing, uint64_t size, const char *pass,
                  uint8_t mk[IMG_MASTER_KEY_LEN], char *err, size_t errlen)
{
	struct img_create_opts o = {.size = size, .backing = backing, .backing_fmt = IMG_FMT_QCOW2};

	if (pass && pass[0]) {
		o.pass = pass;
		o.pass_len = strlen(pass);
		o.master_out = mk;
	}
	return img_create(path, &o, err, errlen);
}

int sbx_dkey_layer(struct sandbox *sb, const char *backing, uint64_t size, bool first, char *err,
                   size_t errlen)
{
	uint8_t mk[IMG_MASTER_KEY_LEN];
	char pass[SBX_DKEY_HEX];
	int rc = sbx_dkey_own(sb, pass, err, errlen);

	/* A key kept for the layer this one replaces would not open it. */
	sbx_dkey_first(sb, NULL);
	if (rc)
		return rc;
	rc = sbx_dkey_make(sb->layer, backing, size, pass, first ? mk : NULL, err, errlen);
	if (!rc && first && pass[0])
		sbx_dkey_first(sb, mk);
	OPENSSL_cleanse(pass, sizeof(pass));
	OPENSSL_cleanse(mk, sizeof(mk));
	return rc;
}

void sbx_dkey_first(struct sandbox *sb, const uint8_t mk[IMG_MASTER_KEY_LEN])
{
	if (mk && !sb->layer_mk)
		sb->layer_mk = malloc(IMG_MASTER_KEY_LEN);
	if (mk && sb->layer_mk) {
		memcpy(sb->layer_mk, mk, IMG_MASTER_KEY_LEN);
		return;
	}
	if (sb->layer_mk)
		OPENSSL_cleanse(sb->layer_mk, IMG_MASTER_KEY_LEN);
	free(sb->layer_mk);
	sb->layer_mk = NULL;
}

/* pass: a passphrase's 64 hex digits, or (master) k->mk's bytes. */
static int add(struct sbx_dkeys *k, const char *path, const void *pass, bool master, char *err,
               size_t errlen)
{
	char *p;

	if (k->set.n == SBX_DKEYS_MAX) {
		snprintf(err, errlen, "its disk is a chain of more than %d encrypted images",
		         SBX_DKEYS_MAX);
		return -E2BIG;
	}
	if (path[0] != '/' || !(p = strdup(path))) {
		snprintf(err, errlen, "%s: not an absolute path", path);
		return path[0] != '/' ? -EINVAL : -ENOMEM;
	}
	k->v[k->set.n] = (struct img_secret){.path = p,
	                                     .pass = pass,
	                                     .len = master ? sizeof(k->mk) : SBX_DKEY_HEX - 1,
	                                     .master = master};
	k->set.n++;
	return 0;
}

/*
 * fn(arg, path) for each of its own encrypted images: from top down the chain
 * to the first the base's keys name (its layer, its checkpoints' files, the
 * disks of snapshots it took, which left its folder). Found by the chain
 * itself, so a rename never loses one.
 */
static int walk_own(struct sandbox *sb, const char *top, int (*fn)(void *arg, const char *path),
                    void *arg, char *err, size_t errlen)
{
	char *path = strdup(top), *next = NULL;
	int rc = path ? 0 : -ENOMEM, depth = 0;

	while (!rc && path && !json_object_get(sb->disk_keys, path)) {
		struct img *img;
		const char *name;

		if (++depth > SBX_DKEYS_MAX) {
			snprintf(err, errlen, "its disk's chain is deeper than %d", SBX_DKEYS_MAX);
			rc = -ELOOP;
			break;
		}
		rc = img_open(&img, path, IMG_FMT_QCOW2, IMG_RDONLY | IMG_NOBACKING, err, errlen);
		if (rc)
			break;
		name = img_backing_name(img);
		next = name ? img_resolve(path, name) : NULL;
		rc = name && !next ? -ENOMEM : 0;
		if (!rc && img_encrypted(img))
			rc = fn(arg, path);
		(void)img_close(img);
		free(path);
		path = next;
		next = NULL;
	}
	free(path);
	return rc;
}

struct own_add {
	struct sandbox *sb;
	struct sbx_dkeys *k;
	char *err;
	size_t errlen;
};

static int own_add(void *arg, const char *path)
{
	struct own_add *a = arg;
	struct sbx_dkeys *k = a->k;

	/* Its layer, new since its master key was kept: opened by that, once. */
	if (a->sb->layer_mk && !strcmp(path, a->sb->layer)) {
		memcpy(k->mk, a->sb->layer_mk, sizeof(k->mk));
		sbx_dkey_first(a->sb, NULL);
		return add(k, path, k->mk, true, a->err, a->errlen);
	}
	return add(k, path, k->own, false, a->err, a->errlen);
}

int sbx_dkey_open(struct sandbox *sb, const char *top, struct sbx_dkeys *k, char *err,
                  size_t errlen)
{
	const char *path;
	json_t *v;
	int rc;

	*k = (struct sbx_dkeys){.set.v = k->v};
	rc = sbx_dkey_own(sb, k->own, err, errlen);
	if (!rc && k->own[0])
		rc = walk_own(sb, top, own_add, &(struct own_add){sb, k, err, errlen}, err, errlen);
	json_object_foreach(sb->disk_keys, path, v)
	{
		if (rc)
			break;
		if (k->set.n == SBX_DKEYS_MAX) { /* k->hex has no room for another */
			snprintf(err, errlen,
			         "its disk is a chain of more than %d encrypted images",
			         SBX_DKEYS_MAX);
			rc = -E2BIG;
			break;
		}
		rc = sbx_dkey_unwrap(sb, json_string_value(v) ?: "", "disk", k->hex[k->set.n], err,
		                     errlen);
		if (!rc)
			rc = add(k, path, k->hex[k->set.n], false, err, errlen);
	}
	if (rc)
		sbx_dkey_close(k);
	return rc;
}

void sbx_dkey_close(struct sbx_dkeys *k)
{
	for (unsigned i = 0; i < k->set.n; i++)
		free((char *)k->v[i].path);
	OPENSSL_cleanse(k->hex, sizeof(k->hex));
	OPENSSL_cleanse(k->own, sizeof(k->own));
	OPENSSL_cleanse(k->mk, sizeof(k->mk));
	*k = (struct sbx_dkeys){.set.v = k->v};
}

int sbx_dkey_lines(const struct sbx_dkeys *k, char **out, size_t *len)
{
	size_t n = 0, cap = 0;
	char *buf = NULL;

	for (unsigned i = 0; i < k->set.n; i++)
		cap += strlen(k->v[i].path) + (k->v[i].master ? 2 * IMG_MASTER_KEY_LEN : 64) + 10;
	if (cap > PIPE_BUDGET)
		return -E2BIG;
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (unsigned i = 0; i < k->set.n; i++) {
		char mk[2 * IMG_MASTER_KEY_LEN + 1] = "";

		if (k->v[i].master)
			OPENSSL_buf2hexstr_ex(mk, sizeof(mk), NULL, k->mk, sizeof(k->mk), '\0');
		n += (size_t)snprintf(
			buf + n, cap + 1 - n, "%s %s %s\n", k->v[i].master ? "master" : "disk",
			k->v[i].master ? mk : (const char *)k->v[i].pass, k->v[i].path);
		OPENSSL_cleanse(mk, sizeof(mk));
	}
	*out = buf;
	*len = n;
	return 0;
}

struct own_key {
	json_t *keys;
	const char *wrapped;
};

static int own_key(void *arg, const char *path)
{
	struct own_key *o = arg;

	return json_object_set_new(o->keys, path, json_string(o->wrapped)) ? -ENOMEM : 0;
}

json_t *sbx_dkey_snapshot(struct sandbox *sb, const char *disk, char *err, size_t errlen)
{
	struct own_key o = {.keys = sb->disk_keys ? json_deep_copy(sb->disk_keys) : json_object(),
	                    .wrapped = sb->disk_key};
	int rc = o.keys ? 0 : -ENOMEM;

	/* Every image of its own the snapshot's disk stands on, under its own key. */
	if (!rc && sb->disk_key)
		rc = walk_own(sb, disk, own_key, &o, err, errlen);
	if (rc) {
		json_decref(o.keys);
		return NULL;
	}
	return o.keys;
}

void sbx_dkey_forget(struct sandbox *sb)
{
	bool had = sbx_dkey_any(sb);

	free(sb->disk_key);
	sb->disk_key = NULL;
	json_decref(sb->disk_keys);
	sb->disk_keys = NULL;
	if (!had || !sb->stored)
		return;
	sbx_save(sb, json_pack("{snsn}", "diskKey", "diskKeys"));
	if (store_scrub(sb->m->store))
		log_warn(sb->id, "its deleted disk key may linger in the store's log until the "
		                 "next scrub");
}
