// SPDX-License-Identifier: MIT
/*
 * The manager's registry of sandboxes: lookup, lifetime (held by work in
 * flight, freed once gone and let go), records, destroy.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx_int.h"

int sbx_fail(struct sbx_err *err, enum sbx_fault fault, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->fault = fault;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return rc < 0 ? rc : -EIO;
}

int64_t sbx_now_ms(void)
{
	return store_now_ms();
}

void sbx_notify(struct sbx_mgr *m, const char *id)
{
	if (m->on_change)
		m->on_change(m->on_change_arg, id);
}

const char *sbx_public_status(const char *status)
{
	static const char *const all[] = {"creating",   "idle",     "running",
	                                  "paused",     "stopping", "suspended",
	                                  "terminated", "failed",   "deleted"};

	for (size_t i = 0; status && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(status, all[i]))
			return all[i];
	return NULL;
}

struct sandbox *sbx_find(struct sbx_mgr *m, const char *id)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (!strcmp(sb->id, id))
			return sb;
	return NULL;
}

struct sandbox *sbx_lookup(struct sbx_mgr *m, const char *id, struct sbx_err *err)
{
	struct sandbox *sb = sbx_find(m, id);
	bool unseen = sb && (sb->hidden || sb->pool.on);
	json_t *info = NULL;

	if (sb && sb->state != SBX_STOPPING && sb->state != SBX_GONE && !unseen)
		return sb;
	if (unseen)
		sbx_fail(err, SBX_NO_SANDBOX, -ENOENT, "sandbox %s not found", id);
	else if (store_sandbox_get(m->store, id, &info, NULL) || sbx_info_hidden(info))
		sbx_fail(err, SBX_NO_SANDBOX, -ENOENT, "sandbox %s not found", id);
	else
		sbx_fail(err, SBX_ENDED, -ESHUTDOWN, "sandbox %s is %s", id,
		         json_string_value(json_object_get(info, "status")));
	json_decref(info);
	return NULL;
}

bool sbx_info_hidden(json_t *info)
{
	const char *mode = json_string_value(json_object_get(info, "mode"));

	return mode && !strcmp(mode, "template");
}

void sbx_save(struct sandbox *sb, json_t *priv)
{
	int rc;

	if (!sb->stored) {
		json_decref(priv);
		return;
	}
	rc = priv ? store_sandbox_update(sb->m->store, sb->id, NULL, priv, NULL) : -ENOMEM;

	if (rc)
		log_error(sb->id, "cannot record its private state: %s", strerror(-rc));
	json_decref(priv);
}

struct sandbox *sbx_new(struct sbx_mgr *m, const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->m = m;
	sb->state = SBX_CREATING;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	sb->recorded = sbx_public_status("creating");
	if (asprintf(&sb->dir, "%s/sandboxes/%s", m->cfg.state, id) < 0) {
		free(sb);
		return NULL;
	}
	sb->env = json_object();
	sb->net_slot = -1;
	sb->next = m->sandboxes;
	m->sandboxes = sb;
	return sb;
}

const char *sbx_workspace(const struct sandbox *sb)
{
	const char *wd = sb ? json_string_value(json_object_get(sb->image, "workingDir")) : NULL;

	return wd && wd[0] == '/' ? wd : WORKSPACE;
}

const char *sbx_user(const struct sandbox *sb)
{
	return json_string_value(json_object_get(sb->image, "user"));
}

void sbx_remove_dir(const char *dir)
{
	char path[4200];
	struct dirent *e;
	DIR *dp = opendir(dir);

	/* What huskd and the VMM put there: layers, sockets, logs, snapshots (never followed). */
	while (dp && (e = readdir(dp))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
}

void sbx_free(struct sandbox *sb)
{
	struct sandbox **pp = &sb->m->sandboxes;

	while (*pp && *pp != sb)
		pp = &(*pp)->next;
	if (*pp)
		*pp = sb->next;
	if (sb->cgroup)
		rmdir(sb->cgroup);
	json_decref(sb->env);
	json_decref(sb->image);
	json_decref(sb->files);
	json_decref(sb->deps);
	json_decref(sb->packages);
	json_decref(sb->pool.body);
	free(sb->dir);
	free(sb->layer);
	free(sb->net_policy);
	free(sb->base);
	free(sb->mem_file);
	free(sb->mem_key);
	free(sb->mem_key_next);
	free(sb->disk_key);
	sbx_dkey_first(sb, NULL);
	json_decref(sb->disk_keys);
	free(sb->cgroup);
	free(sb);
}

void sbx_hold(struct sandbox *sb)
{
	sb->refs++;
}

void sbx_drop(struct sandbox *sb)
{
	if (sb->refs)
		sb->refs--;
	if (sb->refs || sb->state != SBX_GONE)
		return;
	/* What goes with it (its folder, keys, followers) is the top's to say. */
	sb->m->hooks->let_go(sb);
}

void sbx_mgr_on_change(struct sbx_mgr *m, void (*fn)(void *arg, const char *id), void *arg)
{
	m->on_change = fn;
	m->on_change_arg = arg;
}

unsigned sbx_mgr_count(const struct sbx_mgr *m)
{
	unsigned n = 0;

	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		n++;
	return n;
}
