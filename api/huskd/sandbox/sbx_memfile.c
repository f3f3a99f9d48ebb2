// SPDX-License-Identifier: MIT
/*
 * A memory file (vmm/memfile.c) for a snapshot with memory: dir/memory.raw,
 * the snapshot's RAM uncompressed, which VMMs restoring that snapshot map
 * (--mem-file) so the pages they never write are one copy for all of them.
 * husk-vmm --extract-memory writes it, jailed like a VMM where huskd jails
 * them (the snapshot came from a VMM: huskd's root does not parse it), as a
 * uid of its own, into dir/extract/, a folder where nothing else lies: so
 * what parses the snapshot can change nothing sandboxes will trust. The
 * result is checked (a plain file), made root's and read-only to all, and
 * moved up. One extraction runs at a time (it holds m->tool_uid).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_int.h"

struct sbx_memfile {
	struct sbx_mgr *m;
	char dir[4200], work[4300], snap[4300];
	struct vmm_proc *proc;
	sbx_memfile_fn done;
	void *arg;
};

int sbx_seal(const char *path, mode_t mode)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return -EPERM;
	if (geteuid() == 0 && lchown(path, 0, 0) < 0)
		return -errno;
	return chmod(path, mode) < 0 ? -errno : 0;
}

static void end(struct sbx_memfile *f, int rc, const char *why)
{
	struct sbx_mgr *m = f->m;

	sbx_remove_dir(f->work);
	m->memfile = NULL;
	m->tool_uid = 0;
	f->done(m, rc, why, f->arg);
	free(f);
}

static void extracted(struct vmm_proc *p, int status, void *arg)
{
	struct sbx_memfile *f = arg;
	char raw[4400], out[4300], why[160];
	int rc = 0;

	vmm_proc_release(p);
	f->proc = NULL;
	if (status) {
		snprintf(why, sizeof(why),
		         "husk-vmm --extract-memory ended with status %d (its vmm.log says why)",
		         status);
		end(f, -EIO, why);
		return;
	}
	snprintf(raw, sizeof(raw), "%s/memory.raw", f->work);
	snprintf(out, sizeof(out), "%s/memory.raw", f->dir);
	rc = sbx_seal(raw, 0644);
	if (!rc && rename(raw, out) < 0)
		rc = -errno;
	snprintf(why, sizeof(why), "cannot keep its memory file: %s", strerror(-rc));
	end(f, rc, rc ? why : NULL);
}

int sbx_memfile_make(struct sbx_mgr *m, const char *snap, const char *dir, uint64_t mem_mib,
                     sbx_memfile_fn done, void *arg, char *err, size_t errlen)
{
	char raw[4400];
	struct vmm_spec spec = {.vmm = m->cfg.vmm, .extract = raw, .net_slot = -1, .key_fd = -1};
	struct sbx_memfile *f;
	struct sbx_jail jail;
	int rc;

	if (m->memfile || m->tool_uid) {
		snprintf(err, errlen, "another memory file is being made");
		return -EBUSY;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*f = (struct sbx_memfile){.m = m, .done = done, .arg = arg};
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	snprintf(f->work, sizeof(f->work), "%s/extract", dir);
	snprintf(f->snap, sizeof(f->snap), "%s", snap);
	snprintf(raw, sizeof(raw), "%s/memory.raw", f->work);
	spec.dir = f->work;
	spec.restore = f->snap;
	sbx_remove_dir(f->work);
	rc = sbx_seal(snap, 0644);
	if (!rc && mkdir(f->work, 0700) < 0)
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "cannot prepare its extraction: %s", strerror(-rc));
		free(f);
		return rc;
	}
	if (m->cfg.jail) {
		/* Its RAM, its footer, and room for what it logs; the snapshot read-only. */
		rc = sbx_jail_tool(m, f->work, snap, (mem_mib + 16) << 20, &jail, err, errlen);
		if (!rc && lchown(f->work, m->tool_uid, m->tool_uid) < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot hand its folder to uid %u: %s", m->tool_uid,
			         strerror(-rc));
			sbx_jail_done(&jail);
		}
		if (rc)
			goto fail;
		spec.jail = &jail.spec;
	}
	rc = vmm_proc_spawn(m->loop, &spec, extracted, f, &f->proc, err, errlen);
	if (m->cfg.jail)
		sbx_jail_done(&jail);
	if (rc)
		goto fail;
	m->memfile = f;
	return 0;
fail:
	m->tool_uid = 0;
	sbx_remove_dir(f->work);
	free(f);
	return rc;
}

void sbx_memfile_close(struct sbx_mgr *m)
{
	struct sbx_memfile *f = m->memfile;

	if (!f)
		return;
	vmm_proc_kill(f->proc, SIGKILL);
	vmm_proc_release(f->proc);
	f->proc = NULL;
	end(f, -ESHUTDOWN, "huskd is stopping");
}

/* Whether a live sandbox's VMM maps path (or its pauses are diffs over it). */
static bool memfile_used(struct sbx_mgr *m, const char *path)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (sb->mem_file && !strcmp(sb->mem_file, path))
			return true;
	return false;
}

/* Calls fn with each snapshot folder's path under state/snapshots; returns the sum of its results.
 */
static uint64_t each_snapshot(struct sbx_mgr *m,
                              uint64_t (*fn)(struct sbx_mgr *m, const char *dir, const char *id))
{
	char dir[4200], path[4200 + 256 + 16];
	uint64_t sum = 0;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/snapshots", m->cfg.state);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		sum += fn(m, path, e->d_name);
	}
	if (d)
		closedir(d);
	return sum;
}

static uint64_t evict_one(struct sbx_mgr *m, const char *dir, const char *id)
{
	char path[4600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/memory.raw", dir);
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || memfile_used(m, path))
		return 0;
	if (unlink(path) < 0) {
		log_warn(NULL, "cannot remove %s: %s", path, strerror(errno));
		return 0;
	}
	log_info(NULL,
	         "the disk is low: the memory file of snapshot %s removed (%llu MiB; made again "
	         "when its sandboxes need it)",
	         id, (unsigned long long)(st.st_blocks * 512 >> 20));
	return (uint64_t)st.st_blocks * 512;
}

uint64_t sbx_memfile_evict(struct sbx_mgr *m)
{
	return each_snapshot(m, evict_one);
}

static uint64_t sweep_one(struct sbx_mgr *m, const char *dir, const char *id)
{
	char path[4600];

	(void)m;
	(void)id;
	snprintf(path, sizeof(path), "%s/extract", dir);
	if (access(path, F_OK) == 0) {
		log_info(NULL, "removing an unfinished memory file of snapshot %s", id);
		sbx_remove_dir(path);
	}
	return 0;
}

void sbx_memfile_sweep(struct sbx_mgr *m)
{
	each_snapshot(m, sweep_one);
}
