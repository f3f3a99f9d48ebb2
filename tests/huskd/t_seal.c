// SPDX-License-Identifier: MIT
/*
 * Sealed memory with the fake VMM (api/huskd/sandbox/sbx_seal.c): a pause
 * seals with a new key of the sandbox's org, kept wrapped in its record; a
 * resume hands the VMM that key (the fake refuses a sealed file without
 * it, as husk-vmm does); a snapshot's memory keeps its key, which goes when
 * the snapshot is deleted; deleting the org's key (crypto-shredding) leaves
 * a paused sandbox that cannot resume, with a message that says why.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_test.h"

/* The sandbox's private record's memKey, or "". */
static const char *mem_key(const char *id, char *out, size_t len)
{
	json_t *info = NULL, *priv = NULL;

	out[0] = '\0';
	if (store_sandbox_get(T.store, id, &info, &priv) == 0)
		snprintf(out, len, "%s", json_string_value(json_object_get(priv, "memKey")) ?: "");
	json_decref(info);
	json_decref(priv);
	return out;
}

static void pause_seals_and_resume_opens(void)
{
	char err[512], k1[KEYSTORE_WRAPPED_MAX], k2[KEYSTORE_WRAPPED_MAX], path[4200];
	const char *id = t_create("{}", NULL, err, sizeof(err));
	struct t_done d = {0};

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("seal_pause_seals", false, "no sandbox: %s", err);
		return;
	}
	snprintf(path, sizeof(path), "%s/memory.snap", t_sb(id)->dir);
	t_check("seal_pause_seals",
	        t_pause(id) && !strncmp(mem_key(id, k1, sizeof(k1)), "l1:org_local:", 13) &&
	                t_file_has(path, "\"sealed\""),
	        "memKey '%s'", k1);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("seal_resume_hands_the_key", t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE,
	        "%s", d.msg);
	t_done_reset(&d);
	t_check("seal_every_pause_a_new_key",
	        t_pause(id) && mem_key(id, k2, sizeof(k2))[0] && strcmp(k1, k2), "%s / %s", k1, k2);
	/* A huskd restart: the key is in the record, the resume opens it. */
	t_close();
	t_open();
	sbx_mgr_adopt(T.m);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("seal_resume_after_restart", t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE,
	        "%s", d.msg);
	t_done_reset(&d);
	t_destroy(id);
}

static void snapshot_keeps_its_key(void)
{
	char err[512], body[4300], dir[4200], key[KEYSTORE_WRAPPED_MAX], id[STORE_ID_LEN],
		key2[4300];
	const char *made = t_create("{}", NULL, err, sizeof(err)), *child;
	json_t *info = NULL, *priv = NULL;
	char sid[STORE_ID_LEN] = "";

	/* t_create's answer is its own buffer, which the child's create reuses. */
	snprintf(id, sizeof(id), "%s", made ? made : "");
	if (!made || !t_wait_state(id, SBX_IDLE)) {
		t_check("seal_snapshot_keeps_key", false, "no sandbox: %s", err);
		return;
	}
	t_snapshot(id, "{\"name\":\"t-sealed\"}", sid);
	if (store_snapshot_get(T.store, sid, &info, &priv))
		priv = NULL;
	snprintf(dir, sizeof(dir), "%s", json_string_value(json_object_get(priv, "dir")) ?: "");
	t_check("seal_snapshot_keeps_key",
	        sid[0] && json_string_value(json_object_get(priv, "memKey")) &&
	                !strncmp(json_string_value(json_object_get(priv, "memKey")), "l1:", 3),
	        "snapshot %s", sid);
	snprintf(key, sizeof(key), "%s", json_string_value(json_object_get(priv, "memKey")) ?: "");
	json_decref(info);
	json_decref(priv);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	/* With templates on, an unsealed snapshot's first child has its memory file made. */
	T.m->cfg.templates = true;
	child = t_create(body, NULL, err, sizeof(err));
	T.m->cfg.templates = false;
	t_check("seal_snapshot_child_restores",
	        child && t_state(child) == SBX_RESTORING && t_wait_state(child, SBX_IDLE), "%s",
	        child ? sbx_state_name(t_state(child)) : err);
	snprintf(key2, sizeof(key2), "%s/memory.raw", dir);
	t_check("seal_snapshot_has_no_memory_file", !T.m->memfile && access(key2, F_OK) < 0, "%s",
	        key2);
	if (child)
		t_destroy(child);
	info = NULL;
	if (sbx_snap_delete(T.m, STORE_DEFAULT_ORG, sid, &info, NULL) == 0)
		json_decref(info);
	snprintf(body, sizeof(body), "%s/memory.snap", dir);
	/* The key is not in the store's files any more: not in a row, a free page or the log. */
	t_check("seal_snapshot_delete_drops_key_and_memory",
	        key[0] && access(body, F_OK) < 0 && !t_in_store_files(key + strlen(key) - 40),
	        "key '%s'", key);
	/* A paused sandbox's own key goes with its memory when it ends. */
	if (t_pause(id))
		mem_key(id, key, sizeof(key));
	else
		key[0] = '\0';
	t_destroy(id);
	t_check("seal_sandbox_end_drops_key", key[0] && !t_in_store_files(key + strlen(key) - 40),
	        "key '%s'", key);
}

static void shredded_org_cannot_resume(void)
{
	char err[512];
	const char *id = t_create("{}", NULL, err, sizeof(err));
	struct t_done d = {0};
	char body[256], sid[STORE_ID_LEN] = "";

	if (!id || !t_wait_state(id, SBX_IDLE)) {
		t_check("seal_shredded_org_cannot_resume", false, "no sandbox: %s", err);
		return;
	}
	t_snapshot(id, "{\"name\":\"t-shred\"}", sid);
	if (!t_pause(id)) {
		t_check("seal_shredded_org_cannot_resume", false, "no paused sandbox");
		return;
	}
	t_check("seal_shred_org_key",
	        keystore_shred(T.cfg.keys, STORE_DEFAULT_ORG, err, sizeof(err)) == 0, "%s", err);
	sbx_resume(T.m, id, t_done_cb, &d);
	t_check("seal_shredded_org_cannot_resume",
	        t_wait_done(&d) && !d.ok && strstr(d.msg, "has been deleted"), "%s", d.msg);
	t_done_reset(&d);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	t_check("seal_shredded_snapshot_cannot_restore",
	        sid[0] && !t_create(body, NULL, err, sizeof(err)) &&
	                strstr(err, "has been deleted"),
	        "snapshot '%s': %s", sid, err);
	/* The org's next sandbox seals with a new org key, and resumes. */
	t_destroy(id);
	id = t_create("{}", NULL, err, sizeof(err));
	if (id && t_wait_state(id, SBX_IDLE) && t_pause(id)) {
		sbx_resume(T.m, id, t_done_cb, &d);
		t_check("seal_new_org_key_after_shred",
		        t_wait_done(&d) && d.ok && t_state(id) == SBX_IDLE, "%s", d.msg);
		t_done_reset(&d);
	} else {
		t_check("seal_new_org_key_after_shred", false, "%s", err);
	}
	if (id)
		t_destroy(id);
}

void t_sealing(void)
{
	pause_seals_and_resume_opens();
	snapshot_keeps_its_key();
	shredded_org_cannot_resume();
}
