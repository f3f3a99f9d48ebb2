// SPDX-License-Identifier: MIT
/*
 * Templates (issue J): per runtime and shape (memory, vCPUs, NIC or none) a
 * guest booted to agent-ready and paused, kept in state/templates/<key>/ as
 * disk.qcow2 (its layer over the runtime's image), memory.snap (lz4, the
 * device state) and memory.raw (its RAM uncompressed: children map it
 * MAP_PRIVATE, so the pages they only read are one copy in the page cache).
 * A create of that shape restores the template instead of booting.
 *
 * The key names everything the saved guest depends on: the runtime's image,
 * the kernel, the initramfs (the agent) and the VMM (the device state's
 * format), by path, size and change time, and the shape. Change any and the
 * key changes: the old template is never used again, and its files go once
 * nothing of its runtime is left (what sits on a template records its
 * runtime). This file is the registry; sbx_tmpl_make.c makes them.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_int.h"
#include "sbx_tmpl.h"

/* Shapes kept at most; a new one past this cold-boots. */
#define TMPL_MAX 16
/* A template that could not be made is tried again after this long. */
#define TMPL_RETRY_MS (5 * 60 * 1000)

static void identity_add(char *out, size_t len, const char *what, const char *path)
{
	struct stat st;
	size_t n = strlen(out);

	if (!path || stat(path, &st) < 0)
		snprintf(out + n, len - n, "%s=?;", what);
	else
		snprintf(out + n, len - n, "%s=%s:%lld:%lld.%09ld;", what, path,
		         (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* The identity of a guest of this runtime and shape; its FNV-1a hash names the folder. */
static void identity(const struct sbx_mgr *m, json_t *rt, json_t *rt_priv, uint64_t mem_mib,
                     unsigned vcpus, bool nic, char *out, size_t len, char key[17])
{
	uint64_t h = 0xcbf29ce484222325ull;

	snprintf(out, len, "runtime=%s;mem=%" PRIu64 ";vcpus=%u;nic=%d;",
	         json_string_value(json_object_get(rt, "id")), mem_mib, vcpus, nic);
	identity_add(out, len, "image", json_string_value(json_object_get(rt_priv, "path")));
	identity_add(out, len, "kernel", m->cfg.kernel);
	identity_add(out, len, "initrd", m->cfg.initrd);
	identity_add(out, len, "vmm", m->cfg.vmm);
	for (const char *p = out; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	snprintf(key, 17, "%016" PRIx64, h);
}

static struct sbx_tmpl *tmpl_new(struct sbx_mgr *m, const char *key)
{
	struct sbx_tmpl *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->m = m;
	snprintf(t->key, sizeof(t->key), "%s", key);
	snprintf(t->dir, sizeof(t->dir), "%s/templates/%s", m->cfg.state, key);
	snprintf(t->disk, sizeof(t->disk), "%s/disk.qcow2", t->dir);
	snprintf(t->snap, sizeof(t->snap), "%s/memory.snap", t->dir);
	snprintf(t->mem, sizeof(t->mem), "%s/memory.raw", t->dir);
	t->next = m->tmpls;
	m->tmpls = t;
	return t;
}

static unsigned tmpl_count(const struct sbx_mgr *m)
{
	unsigned n = 0;

	for (const struct sbx_tmpl *t = m->tmpls; t; t = t->next)
		n++;
	return n;
}

const struct sbx_tmpl *sbx_tmpl_get(struct sbx_mgr *m, json_t *rt, json_t *rt_priv,
                                    uint64_t mem_mib, unsigned vcpus, bool nic)
{
	char id[2048], key[17];
	struct sbx_tmpl *t;

	if (!m->cfg.templates || !json_string_value(json_object_get(rt, "id")))
		return NULL;
	identity(m, rt, rt_priv, mem_mib, vcpus, nic, id, sizeof(id), key);
	for (t = m->tmpls; t && strcmp(t->key, key); t = t->next)
		;
	if (t && strcmp(t->identity, id) && t->state != TMPL_FAILED)
		return NULL; /* another shape's, by a hash that matched */
	if (t && t->state == TMPL_READY)
		return access(t->mem, R_OK) == 0 ? t : NULL; /* its files gone: creates boot */
	if (t && (t->state == TMPL_MAKING || (t->state == TMPL_FAILED && t->failed_ms &&
	                                      uv_now(m->loop) - t->failed_ms < TMPL_RETRY_MS)))
		return NULL;
	if (!t && tmpl_count(m) >= TMPL_MAX)
		return NULL;
	if (!t && !(t = tmpl_new(m, key)))
		return NULL;
	/* Wanted: made in the background; this create boots. */
	snprintf(t->identity, sizeof(t->identity), "%s", id);
	snprintf(t->runtime, sizeof(t->runtime), "%s",
	         json_string_value(json_object_get(rt, "id")));
	snprintf(t->rt_name, sizeof(t->rt_name), "%s",
	         json_string_value(json_object_get(rt, "name")) ?: t->runtime);
	t->mem_mib = mem_mib;
	t->vcpus = vcpus;
	t->nic = nic;
	t->state = TMPL_MAKING;
	m->hooks->template_wanted(m, t);
	return NULL;
}

void sbx_tmpl_wish(struct sbx_mgr *m, json_t *rt, json_t *rt_priv, uint64_t mem_mib, unsigned vcpus,
                   json_t *like)
{
	char id[2048], key[17];
	struct sbx_tmpl *t;

	if (!m->cfg.templates || !like || !json_string_value(json_object_get(rt, "id")))
		return;
	identity(m, rt, rt_priv, mem_mib, vcpus, false, id, sizeof(id), key);
	for (t = m->tmpls; t && strcmp(t->key, key); t = t->next)
		;
	if (t && t->state == TMPL_MAKING && !t->like && !strcmp(t->identity, id))
		t->like = json_incref(like);
}

/* A template's folder from a huskd before: ready if whole, else removed. */
static void load_one(struct sbx_mgr *m, const char *name)
{
	char dir[4200], path[4300];
	json_t *meta;
	const char *id, *rt;
	struct sbx_tmpl *t;

	snprintf(dir, sizeof(dir), "%s/templates/%s", m->cfg.state, name);
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	meta = json_load_file(path, 0, NULL);
	id = json_string_value(json_object_get(meta, "identity"));
	rt = json_string_value(json_object_get(meta, "runtime"));
	if (strlen(name) != 16 || !id || !rt || !(t = tmpl_new(m, name))) {
		log_info(NULL, "removing an unfinished template %s", dir);
		sbx_remove_dir(dir);
		json_decref(meta);
		return;
	}
	snprintf(t->identity, sizeof(t->identity), "%s", id);
	snprintf(t->runtime, sizeof(t->runtime), "%s", rt);
	snprintf(t->rt_name, sizeof(t->rt_name), "%s",
	         json_string_value(json_object_get(meta, "runtimeName")) ?: rt);
	t->mem_mib = (uint64_t)json_integer_value(json_object_get(meta, "memMib"));
	t->vcpus = (unsigned)json_integer_value(json_object_get(meta, "vcpus"));
	t->nic = json_is_true(json_object_get(meta, "nic"));
	t->state = TMPL_READY;
	json_decref(meta);
}

void sbx_tmpl_load(struct sbx_mgr *m)
{
	char path[4200];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/templates", m->cfg.state);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		log_warn(NULL, "cannot make %s: %s", path, strerror(errno));
	d = opendir(path);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			load_one(m, e->d_name);
	if (d)
		closedir(d);
}

void sbx_tmpl_prune(struct sbx_mgr *m)
{
	struct sbx_tmpl **pp = &m->tmpls, *t;
	int64_t sandboxes, snapshots;
	char id[2048], key[17];
	json_t *rt, *priv;
	bool stale;

	while ((t = *pp)) {
		rt = priv = NULL;
		stale = t->state == TMPL_READY &&
		        store_runtime_get(m->store, t->runtime, &rt, &priv) == -ENOENT;
		if (t->state == TMPL_READY && rt) {
			identity(m, rt, priv, t->mem_mib, t->vcpus, t->nic, id, sizeof(id), key);
			stale = strcmp(id, t->identity) != 0;
		}
		json_decref(rt);
		json_decref(priv);
		/* Whatever sits on it records the runtime: none left, nothing sits on it. */
		if (!stale ||
		    store_runtime_users(m->store, t->runtime, t->rt_name, &sandboxes, &snapshots) ||
		    sandboxes || snapshots) {
			pp = &t->next;
			continue;
		}
		log_info(NULL, "template %s (runtime %s) is out of date: removed", t->key,
		         t->runtime);
		/* Warm VMMs of it are recorded nowhere: they end with it (one may be freed). */
		for (struct sandbox *sb = m->sandboxes, *next; sb; sb = next) {
			next = sb->next;
			if (sb->pool.tmpl == t) {
				sb->pool.tmpl = NULL;
				sbx_end(sb, "terminated", "its template is out of date", NULL);
			}
		}
		sbx_remove_dir(t->dir);
		*pp = t->next;
		json_decref(t->like);
		free(t);
	}
}

void sbx_tmpl_free(struct sbx_mgr *m)
{
	struct sbx_tmpl *t;

	/* A making whose callbacks never came (the loop is over): nothing else holds it. */
	free(m->making);
	m->making = NULL;

	while ((t = m->tmpls)) {
		m->tmpls = t->next;
		json_decref(t->like);
		free(t);
	}
}
