// SPDX-License-Identifier: MIT
/*
 * Templates (sbx_tmpl.c, sbx_tmpl_make.c, sbx_memfile.c) with the fake VMM:
 * the first create of a shape boots and a hidden maker makes the template
 * (listed nowhere, its record gone once it ends); the next create restores
 * it with its memory file; a huskd restart finds it again; with templates
 * off a create boots; a template whose making fails leaves creates booting.
 * A child's pause is a diff over the template's memory file, which its
 * resume maps again (after a restart too); a snapshot of it stands alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_test.h"
#include "sbx_tmpl.h"

static struct sbx_tmpl *only(void)
{
	return T.m->tmpls && !T.m->tmpls->next ? T.m->tmpls : NULL;
}

static bool settled(void *arg)
{
	struct sbx_tmpl *t = only();

	(void)arg;
	return t && t->state != TMPL_MAKING && !T.m->making;
}

/* The ids the manager said changed: the maker's among them. */
static char seen_ids[32][STORE_ID_LEN];
static unsigned nseen;

static void seen(void *arg, const char *id)
{
	(void)arg;
	for (unsigned i = 0; i < nseen; i++)
		if (!strcmp(seen_ids[i], id))
			return;
	if (nseen < 32 && !strncmp(id, "sbx_", 4))
		snprintf(seen_ids[nseen++], STORE_ID_LEN, "%s", id);
}

/* The maker (an id seen besides a): no record left, and no list showed it. */
static bool maker_gone(const char *a, char *why, size_t len)
{
	struct sbx_list_query q = {.deleted = 1, .limit = 100};
	json_t *out = NULL, *info = NULL;
	struct sbx_err err;
	unsigned makers = 0;

	why[0] = '\0';
	for (unsigned i = 0; i < nseen; i++) {
		if (!strcmp(seen_ids[i], a))
			continue;
		makers++;
		if (store_sandbox_get(T.store, seen_ids[i], &info, NULL) == 0) {
			snprintf(why, len, "the maker %.64s still has a record", seen_ids[i]);
			json_decref(info);
			return false;
		}
	}
	if (sbx_list(T.m, &q, &out, &err) == 0) {
		json_t *one;
		size_t i;

		json_array_foreach(json_object_get(out, "sandboxes"), i, one)
		{
			const char *id = json_string_value(json_object_get(one, "sandboxId"));

			for (unsigned k = 0; id && k < nseen; k++)
				if (strcmp(id, a) && !strcmp(id, seen_ids[k])) {
					snprintf(why, len, "the maker %.64s is listed", id);
					makers = 0;
				}
		}
	}
	if (!makers && !why[0]) {
		snprintf(why, len, "no maker seen");
	}
	json_decref(out);
	return makers == 1;
}

static const char *private_of(const char *id, const char *key, char *buf, size_t len)
{
	json_t *priv = NULL, *info = NULL;

	buf[0] = '\0';
	if (store_sandbox_get(T.store, id, &info, &priv) == 0)
		snprintf(buf, len, "%s", json_string_value(json_object_get(priv, key)) ?: "");
	json_decref(info);
	json_decref(priv);
	return buf;
}

/* 1 when the sandbox's paused memory.snap is a diff (the fake's names its base), 0 if not, -1. */
static int paused_diff(const char *id)
{
	struct sandbox *sb = t_sb(id);
	char path[4300], buf[8192];
	size_t n;
	FILE *f;

	if (!sb)
		return -1;
	snprintf(path, sizeof(path), "%s/memory.snap", sb->dir);
	if (!(f = fopen(path, "re")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, "\"base\"") != NULL;
}

/* Whether the sandbox's VMM was started with --mem-file. */
static bool vmm_maps(const char *id)
{
	char path[64], buf[8192];
	pid_t pid = t_vmm_pid(id);
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (!pid || !(f = fopen(path, "re")))
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		if (!strcmp(buf + i, "--mem-file"))
			return true;
	return false;
}

static bool pause_now(const char *id, char *msg, size_t len)
{
	struct t_done d = {0};
	bool ok;

	sbx_pause(T.m, id, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_state(id) == SBX_PAUSED;
	snprintf(msg, len, "%s", d.msg);
	t_done_reset(&d);
	return ok;
}

static bool resume_now(const char *id, char *msg, size_t len)
{
	struct t_done d = {0};
	bool ok;

	sbx_resume(T.m, id, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_wait_state(id, SBX_IDLE);
	snprintf(msg, len, "%s", d.msg);
	t_done_reset(&d);
	return ok;
}

/* id: a child of the template, idle. */
static void diff_pauses(const char *id, const char *tmpl_mem)
{
	char msg[512], buf[4300], b[STORE_ID_LEN];
	json_t *snap = json_pack("{ss}", "name", "of-a-child");
	struct t_done d = {0};

	snprintf(b, sizeof(b), "%s", id); /* id goes with the manager at the restart */
	t_check("template_child_pause_is_diff",
	        pause_now(b, msg, sizeof(msg)) && paused_diff(b) == 1 &&
	                !strcmp(private_of(b, "memFile", buf, sizeof(buf)), tmpl_mem),
	        "%s; diff %d, memFile '%s'", msg, paused_diff(b), buf);
	t_check("template_child_resumes_over_its_memory_file",
	        resume_now(b, msg, sizeof(msg)) && vmm_maps(b), "%s", msg);
	/* Paused across a restart: the record says what it goes over. */
	pause_now(b, msg, sizeof(msg));
	t_close();
	t_open();
	sbx_mgr_adopt(T.m);
	t_check("template_child_diff_resumes_after_restart",
	        t_state(b) == SBX_PAUSED && resume_now(b, msg, sizeof(msg)) && vmm_maps(b),
	        "state %s: %s", sbx_state_name(t_state(b)), msg);
	/* A snapshot keeps its memory.snap: whole, and the sandbox leaves the file behind. */
	sbx_snap_create(T.m, b, snap, t_done_cb, &d);
	t_check("template_child_snapshot_is_full",
	        t_wait_done(&d) && d.ok && t_wait_state(b, SBX_IDLE) && !vmm_maps(b) &&
	                !*private_of(b, "memFile", buf, sizeof(buf)) &&
	                pause_now(b, msg, sizeof(msg)) && paused_diff(b) == 0 &&
	                resume_now(b, msg, sizeof(msg)),
	        "%s %s; memFile '%s'", d.msg, msg, buf);
	t_done_reset(&d);
	json_decref(snap);
}

/* A VMM that knows no diffs (adopted from before an upgrade): its pause is whole. */
static void diff_refused(void)
{
	char err[512] = "", msg[512] = "", buf[4300] = "", id[STORE_ID_LEN];
	const char *c = t_create("{}", "no-diff", err, sizeof(err));

	snprintf(id, sizeof(id), "%s", c ? c : "");
	t_check("template_child_without_diffs_pauses_whole",
	        c && t_wait_state(id, SBX_IDLE) && vmm_maps(id) &&
	                pause_now(id, msg, sizeof(msg)) && paused_diff(id) == 0 &&
	                !*private_of(id, "memFile", buf, sizeof(buf)) &&
	                resume_now(id, msg, sizeof(msg)) && !vmm_maps(id),
	        "%s %s; memFile '%s'", c ? "" : err, msg, buf);
	if (c)
		t_destroy(id);
}

static bool exists(void *path)
{
	return access(path, F_OK) == 0;
}

/*
 * The disk low (huskd keeps more free than there is): a create is refused,
 * after the memory files no sandbox maps were removed; one a sandbox maps is kept.
 */
static void evicted_when_disk_low(void)
{
	char err[512] = "", sid[STORE_ID_LEN] = "", raw[4300], body[128], c2[STORE_ID_LEN] = "";
	json_t *snap = json_pack("{ss}", "name", "evictable");
	struct t_done d = {0};
	const char *a = t_create("{}", NULL, err, sizeof(err)), *c;
	bool kept, gone;

	if (a && t_wait_state(a, SBX_IDLE)) {
		sbx_snap_create(T.m, a, snap, t_done_cb, &d);
		if (t_wait_done(&d) && d.ok)
			snprintf(sid, sizeof(sid), "%s",
			         json_string_value(json_object_get(d.data, "snapshotId")));
		t_done_reset(&d);
	}
	json_decref(snap);
	snprintf(raw, sizeof(raw), "%s/state/snapshots/%s/memory.raw", T.root, sid);
	snprintf(body, sizeof(body), "{\"snapshot\":\"%s\"}", sid);
	/* Its first child has the memory file made; the second maps it. */
	c = sid[0] ? t_create(body, NULL, err, sizeof(err)) : NULL;
	if (c && t_wait(exists, raw, T_WAIT_MS) && (c = t_create(body, NULL, err, sizeof(err))))
		snprintf(c2, sizeof(c2), "%s", c);
	T.m->cfg.min_free_disk = UINT64_MAX / 2;
	kept = c2[0] && vmm_maps(c2) && !t_create("{}", NULL, err, sizeof(err)) &&
	       strstr(err, "disk is full") && exists(raw);
	if (c2[0])
		t_destroy(c2);
	gone = !t_create("{}", NULL, err, sizeof(err)) && !exists(raw);
	T.m->cfg.min_free_disk = 0;
	t_check("memory_file_evicted_when_disk_low", kept && gone,
	        "snapshot '%s', second child '%s': kept %d, gone %d (%s)", sid, c2, kept, gone,
	        err);
	/* An extraction a stop cut short leaves extract/: the next start removes it. */
	snprintf(raw, sizeof(raw), "%s/state/snapshots/%s/extract", T.root, sid);
	mkdir(raw, 0700);
	t_close();
	t_open();
	sbx_mgr_adopt(T.m);
	t_check("unfinished_extraction_swept_at_start", sid[0] && !exists(raw), "%s is there", raw);
}

void t_templates(void)
{
	char err[512], key[64], buf[4300];
	const char *a, *b, *c;
	struct sbx_tmpl *t;

	/* Memory files are made of unsealed memory only: here pauses do not seal (t_seal.c does).
	 */
	t_close();
	T.cfg.templates = true;
	T.cfg.seal = false;
	t_open();
	sbx_mgr_on_change(T.m, seen, NULL);
	a = t_create("{}", NULL, err, sizeof(err));
	t_check("template_first_boots",
	        a && t_wait_state(a, SBX_IDLE) && !*private_of(a, "template", buf, sizeof(buf)),
	        "%s", a ? buf : err);
	t_check("template_made", t_wait(settled, NULL, T_WAIT_MS) && only()->state == TMPL_READY,
	        "state %d", only() ? (int)only()->state : -1);
	t = only();
	snprintf(key, sizeof(key), "%s", t ? t->key : "");
	t_check("template_maker_hidden_and_gone", maker_gone(a ? a : "", err, sizeof(err)), "%s",
	        err);
	b = t_create("{}", NULL, err, sizeof(err));
	t_check("template_child_restores",
	        b && t_state(b) == SBX_RESTORING && t_wait_state(b, SBX_IDLE) &&
	                !strcmp(private_of(b, "template", buf, sizeof(buf)), key),
	        "%s: template '%s'", b ? b : err, buf);
	t_close();
	t_open();
	t_check("template_found_after_restart",
	        only() && only()->state == TMPL_READY && !strcmp(only()->key, key), "none");
	c = t_create("{}", NULL, err, sizeof(err));
	t_check("template_child_after_restart",
	        c && t_wait_state(c, SBX_IDLE) &&
	                !strcmp(private_of(c, "template", buf, sizeof(buf)), key),
	        "%s", c ? buf : err);
	if (c && only()) {
		snprintf(buf, sizeof(buf), "%s", only()->mem);
		diff_pauses(c, buf);
		diff_refused();
	}
	evicted_when_disk_low();
	t_close();
	T.cfg.templates = false;
	T.cfg.seal = true;
	t_open();
	c = t_create("{}", NULL, err, sizeof(err));
	t_check("templates_off_boots", c && t_state(c) == SBX_BOOTING && t_wait_state(c, SBX_IDLE),
	        "%s", c ? "" : err);
}
