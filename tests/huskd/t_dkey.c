// SPDX-License-Identifier: MIT
/*
 * Encrypted disks with the fake VMM (api/huskd/sandbox/sbx_dkey.c): a
 * sandbox's layer, its checkpoints' files and the disks of its snapshots are
 * qcow2+LUKS under its own key; a snapshot's children open that disk with the
 * key the snapshot recorded. The fake opens the whole chain with the keys in
 * its pipe through the real image library, and exits as husk-vmm does when an
 * image's key is missing or wrong: every start here checks huskd's keys
 * against the files it made.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "img.h"
#include "keystore.h"
#include "sbx_test.h"

/* A field of the sandbox's private record (a string), or "". */
static const char *priv_str(const char *id, const char *key, char *out, size_t len)
{
	json_t *info = NULL, *priv = NULL;

	out[0] = '\0';
	if (store_sandbox_get(T.store, id, &info, &priv) == 0)
		snprintf(out, len, "%s", json_string_value(json_object_get(priv, key)) ?: "");
	json_decref(info);
	json_decref(priv);
	return out;
}

/* 1: the image at path is encrypted; 0: it is not; -1: no image there. */
static int encrypted(const char *path, char *backing, size_t len)
{
	struct img *img;
	char err[256];
	int enc;

	if (img_open(&img, path, IMG_FMT_QCOW2, IMG_RDONLY | IMG_NOBACKING, err, sizeof(err)))
		return -1;
	enc = img_encrypted(img);
	if (backing)
		snprintf(backing, len, "%s", img_backing_name(img) ?: "");
	(void)img_close(img);
	return enc;
}

static bool ckpt(const char *id, const char *name, bool restore, char *file, size_t len)
{
	json_t *rec = NULL, *priv = NULL;
	struct t_done d = {0};
	bool ok;

	if (restore)
		sbx_ckpt_restore(T.m, id, name, t_done_cb, &d);
	else
		sbx_ckpt_create(T.m, id, name, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_wait_state(id, SBX_IDLE);
	t_done_reset(&d);
	if (file && store_checkpoint_get(T.store, id, name, &rec, &priv) == 0)
		snprintf(file, len, "%s", json_string_value(json_object_get(priv, "file")) ?: "");
	json_decref(rec);
	json_decref(priv);
	return ok;
}

static bool resume(const char *id, char *msg, size_t len)
{
	struct t_done d = {0};
	bool ok;

	sbx_resume(T.m, id, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE;
	snprintf(msg, len, "%s", d.msg);
	t_done_reset(&d);
	return ok;
}

/* Its record's diskKeys, and the disk of snapshot sid, into out. */
static json_t *snap_keys(const char *sid, char *disk, size_t len)
{
	json_t *info = NULL, *priv = NULL, *keys;

	disk[0] = '\0';
	if (store_snapshot_get(T.store, sid, &info, &priv))
		return NULL;
	snprintf(disk, len, "%s", json_string_value(json_object_get(priv, "disk")) ?: "");
	keys = json_incref(json_object_get(priv, "diskKeys"));
	json_decref(info);
	json_decref(priv);
	return keys;
}

static void files_encrypted(void)
{
	char err[512], id[STORE_ID_LEN], key[KEYSTORE_WRAPPED_MAX], file[4200], disk[4200],
		back[4200], sid[STORE_ID_LEN], body[300], child[STORE_ID_LEN], msg[512];
	const char *made = t_create("{}", NULL, err, sizeof(err));
	json_t *keys;

	snprintf(id, sizeof(id), "%s", made ? made : "");
	if (!made || !t_wait_state(id, SBX_IDLE)) {
		t_check("dkey_layer_encrypted", false, "no sandbox: %s", err);
		return;
	}
	priv_str(id, "diskKey", key, sizeof(key));
	t_check("dkey_layer_encrypted",
	        !strncmp(key, "l1:org_local:", 13) && encrypted(t_sb(id)->layer, NULL, 0) == 1,
	        "diskKey '%s'", key);
	/* The layer's first start opens it by the master key huskd kept from making it (no
	 * PBKDF2, no key stripes); every later one by its passphrase. */
	t_check("dkey_first_start_by_master_key",
	        !strcmp(t_keys_given(id, file, sizeof(file)), "0 passphrases, 1 master keys"),
	        "'%s'", file);
	msg[0] = '\0';
	t_check("dkey_later_start_by_passphrase",
	        t_pause(id) && resume(id, msg, sizeof(msg)) &&
	                !strcmp(t_keys_given(id, file, sizeof(file)),
	                        "1 passphrases, 0 master keys"),
	        "'%s' %s", file, msg);
	t_check("dkey_checkpoint_encrypted",
	        ckpt(id, "c1", false, file, sizeof(file)) && encrypted(file, NULL, 0) == 1 &&
	                encrypted(t_sb(id)->layer, NULL, 0) == 1,
	        "checkpoint file '%s'", file);
	t_check("dkey_checkpoint_restores", ckpt(id, "c1", true, NULL, 0),
	        "restore or the start after it failed");
	/* A checkpoint lies between: the snapshot's disk is flattened onto the runtime. */
	t_snapshot(id, "{\"name\":\"t-disk\",\"memory\":false}", sid);
	keys = sid[0] ? snap_keys(sid, disk, sizeof(disk)) : NULL;
	t_check("dkey_snapshot_flattened",
	        keys && !strcmp(json_string_value(json_object_get(keys, disk)) ?: "", key) &&
	                encrypted(disk, back, sizeof(back)) == 1 && strstr(back, "base") &&
	                t_state(id) == SBX_IDLE,
	        "snapshot '%s', disk %s over '%s'", sid, disk, back);
	json_decref(keys);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	made = t_create(body, NULL, err, sizeof(err));
	snprintf(child, sizeof(child), "%s", made ? made : "");
	t_check("dkey_snapshot_child_starts", made && t_wait_state(child, SBX_IDLE), "%s", err);
	t_check("dkey_child_has_its_own_key",
	        made && strcmp(priv_str(child, "diskKey", file, sizeof(file)), key) && file[0] &&
	                json_object_get(t_sb(child)->disk_keys, disk),
	        "child's key '%s'", file);
	/* A restart: the keys come back from the record, and the next start opens the disk. */
	t_close();
	t_open();
	sbx_mgr_adopt(T.m);
	msg[0] = '\0';
	t_check("dkey_keys_after_restart",
	        made && t_wait_state(child, SBX_IDLE) && t_pause(child) &&
	                resume(child, msg, sizeof(msg)),
	        "%s", msg);
	/* husk-vmm (the fake here) refuses an image whose key it was not given. */
	if (made && t_pause(child)) {
		json_object_clear(t_sb(child)->disk_keys);
		t_check("dkey_vmm_refuses_missing_key",
		        !resume(child, msg, sizeof(msg)) && strstr(msg, "husk-vmm: disk"), "%s",
		        msg);
	} else {
		t_check("dkey_vmm_refuses_missing_key", false, "the child did not pause");
	}
	if (made)
		t_destroy(child);
	t_destroy(id);
	keys = NULL;
	if (sbx_snap_delete(T.m, STORE_DEFAULT_ORG, sid, &keys, NULL) == 0)
		json_decref(keys);
	/* Sandbox, child and snapshot gone: the key is in none of the store's files. */
	t_check("dkey_gone_with_its_files", key[0] && !t_in_store_files(key + strlen(key) - 40),
	        "key '%s'", key);
}

/* A second snapshot's disk stands on the first's (its own file too): the child needs both. */
static void second_snapshot_carries_first(void)
{
	char err[512], id[STORE_ID_LEN], s1[STORE_ID_LEN], s2[STORE_ID_LEN], body[300];
	const char *made = t_create("{}", NULL, err, sizeof(err)), *child = NULL;

	snprintf(id, sizeof(id), "%s", made ? made : "");
	if (made && t_wait_state(id, SBX_IDLE)) {
		t_snapshot(id, "{\"name\":\"t-disk-1\",\"memory\":false}", s1);
		t_snapshot(id, "{\"name\":\"t-disk-2\",\"memory\":false}", s2);
		snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", s2);
		child = s1[0] && s2[0] ? t_create(body, NULL, err, sizeof(err)) : NULL;
	}
	t_check("dkey_second_snapshot_child_starts", child && t_wait_state(child, SBX_IDLE), "%s",
	        err);
	if (child)
		t_destroy(child);
	if (made)
		t_destroy(id);
}

static void seal_off_is_clear(void)
{
	char err[512], key[KEYSTORE_WRAPPED_MAX];
	const char *id;

	T.m->cfg.seal = false;
	id = t_create("{}", NULL, err, sizeof(err));
	t_check("dkey_seal_off_clear",
	        id && t_wait_state(id, SBX_IDLE) && !priv_str(id, "diskKey", key, sizeof(key))[0] &&
	                encrypted(t_sb(id)->layer, NULL, 0) == 0,
	        "%s", id ? key : err);
	T.m->cfg.seal = true;
	if (id)
		t_destroy(id);
}

static void shredded_disk_cannot_start(void)
{
	char err[512], sid[STORE_ID_LEN], body[300], msg[512];
	const char *id = t_create("{}", NULL, err, sizeof(err));

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("dkey_shredded_cannot_resume", false, "no sandbox: %s", err);
		return;
	}
	t_snapshot(id, "{\"name\":\"t-disk-shred\",\"memory\":false}", sid);
	/* Its memory clear, so only its disk's key stands in the way. */
	T.m->cfg.seal = false;
	if (!t_pause(id) || keystore_shred(T.cfg.keys, STORE_DEFAULT_ORG, err, sizeof(err))) {
		T.m->cfg.seal = true;
		t_check("dkey_shredded_cannot_resume", false, "no pause or shred: %s", err);
		t_destroy(id);
		return;
	}
	T.m->cfg.seal = true;
	t_check("dkey_shredded_cannot_resume",
	        !resume(id, msg, sizeof(msg)) && strstr(msg, "has been deleted"), "%s", msg);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	t_check("dkey_shredded_snapshot_cannot_start",
	        sid[0] && !t_create(body, NULL, err, sizeof(err)) &&
	                strstr(err, "has been deleted"),
	        "snapshot '%s': %s", sid, err);
	t_destroy(id);
}

void t_disk_keys(void)
{
	files_encrypted();
	second_snapshot_carries_first();
	seal_off_is_clear();
	shredded_disk_cannot_start();
}
