// SPDX-License-Identifier: MIT
/*
 * A sandbox's jail (api/jail): the uid its VMM runs as, one no other
 * running VMM holds, and what that VMM may see - its kernel and initrd, its
 * disk's backing chain and the snapshot it starts from read-only, its own
 * folder read-write, /dev/kvm (and /dev/userfaultfd for a lazy restore).
 * A VMM may have written anything into its folder and its layer's header,
 * so neither is trusted: nothing there is followed through a symlink, and a
 * backing file outside the places bases live is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img.h"
#include "jail.h"
#include "sbx_int.h"
#include "vmm_proc.h"

static bool uid_taken(const struct sbx_mgr *m, unsigned uid)
{
	if (uid == m->tool_uid)
		return true;
	for (const struct sandbox *o = m->sandboxes; o; o = o->next)
		if (o->jail_uid == uid)
			return true;
	return false;
}

/* The next free uid after the last one handed out (a uid is not reused at once), or 0. */
static unsigned uid_next(struct sbx_mgr *m)
{
	for (unsigned i = 0; i < JAIL_UIDS; i++) {
		unsigned uid = JAIL_UID_BASE + (m->jail_next + i) % JAIL_UIDS;

		if (!uid_taken(m, uid)) {
			m->jail_next = (m->jail_next + i + 1) % JAIL_UIDS;
			return uid;
		}
	}
	return 0;
}

static int uid_take(struct sandbox *sb)
{
	if (!sb->jail_uid)
		sb->jail_uid = uid_next(sb->m);
	return sb->jail_uid ? 0 : -EAGAIN;
}

/* The jail's root, its uid and the one folder it writes. */
static void jail_base(struct sbx_jail *j, const struct sbx_mgr *m, unsigned uid, const char *rw)
{
	snprintf(j->root, sizeof(j->root), "%s/jail", m->cfg.state);
	j->spec.exe = m->cfg.jail;
	j->spec.root = j->root;
	j->spec.uid = uid;
	j->spec.rw = rw;
}

void sbx_jail_release(struct sandbox *sb)
{
	sb->jail_uid = 0;
}

/*
 * Its folder, its layer, its console and huskd's socket the agent dials made
 * its VMM's uid's; everything else there huskd's (disk checkpoints, the
 * memory of a pause that a snapshot shares, whatever an earlier VMM left),
 * so no VMM writes what a snapshot or a later start will trust.
 */
int sbx_jail_own(struct sandbox *sb)
{
	const char *layer = sb->layer ? strrchr(sb->layer, '/') : NULL;
	unsigned uid = sb->jail_uid;
	struct dirent *e;
	char dial[32];
	int fd, rc = 0;
	DIR *d;

	if (!uid)
		return 0;
	if (layer && ((size_t)(layer - sb->layer) != strlen(sb->dir) ||
	              strncmp(sb->layer, sb->dir, strlen(sb->dir))))
		layer = NULL;
	snprintf(dial, sizeof(dial), "vsock.sock_%d", DIAL_PORT);
	fd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchown(fd, uid, uid) < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		bool its = !strcmp(n, "console.log") || !strcmp(n, dial) ||
		           (layer && !strcmp(n, layer + 1));

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (fchownat(dirfd(d), n, its ? uid : 0, its ? uid : 0, AT_SYMLINK_NOFOLLOW) < 0 &&
		    !rc)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

static int path_add(struct sbx_jail *j, const char *path)
{
	if (j->spec.nro >= VMM_JAIL_PATHS)
		return -E2BIG;
	j->owned[j->spec.nro] = strdup(path);
	if (!j->owned[j->spec.nro])
		return -ENOMEM;
	j->spec.ro[j->spec.nro] = j->owned[j->spec.nro];
	j->spec.nro++;
	return 0;
}

static bool under(const char *path, const char *dir, size_t n)
{
	return n && !strncmp(path, dir, n) && path[n] == '/';
}

/* A disk checkpoint in some sandbox's folder: state/sandboxes/<id>/ckpt_<id>.qcow2. */
static bool checkpoint(const struct sandbox *sb, const char *path)
{
	char sandboxes[PATH_MAX];
	size_t n = (size_t)snprintf(sandboxes, sizeof(sandboxes), "%s/sandboxes", sb->m->cfg.state);
	const char *file;

	if (!under(path, sandboxes, n))
		return false;
	file = strchr(path + n + 1, '/');
	return file && !strchr(file + 1, '/') && !strncmp(file + 1, "ckpt_", 5) &&
	       strlen(file) > 11 && !strcmp(file + strlen(file) - 6, ".qcow2");
}

/*
 * Whether a backing file a header names may be shown to its VMM: one in its
 * own folder, the images (runtimes), the imported runtimes, the templates or the snapshots, by a
 * name with no way
 * back up in it; or, right under a snapshot's disk, the disk checkpoints of
 * the sandbox it was taken of. Anything else was put there by a VMM.
 * (Headers are still what names the chain: a snapshot taken of a VMM that
 * rewrote its layer's header could name another sandbox's checkpoint. The
 * store should name chains instead; see the note on issue H.)
 */
static bool allowed(const struct sandbox *sb, const char *from, const char *path)
{
	const char *state = sb->m->cfg.state, *kernel = sb->m->cfg.kernel;
	const char *images_end = strrchr(kernel, '/');
	char snaps[PATH_MAX], rts[PATH_MAX], tpls[PATH_MAX];
	size_t sn, rn, tn;

	if (path[0] != '/' || strstr(path, "/../") || strstr(path, "/./") || strstr(path, "//"))
		return false;
	sn = (size_t)snprintf(snaps, sizeof(snaps), "%s/snapshots", state);
	rn = (size_t)snprintf(rts, sizeof(rts), "%s/runtimes", state);
	tn = (size_t)snprintf(tpls, sizeof(tpls), "%s/templates", state);
	return under(path, sb->dir, strlen(sb->dir)) || under(path, snaps, sn) ||
	       under(path, rts, rn) || under(path, tpls, tn) ||
	       under(path, kernel, images_end ? (size_t)(images_end - kernel) : 0) ||
	       ((under(from, snaps, sn) || checkpoint(sb, from)) && checkpoint(sb, path));
}

/* A plain file, not a link, a FIFO or a device a VMM could have left in its place. */
static int plain(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
		return 0;
	snprintf(err, errlen, "%s is not a plain file", path);
	return -EPERM;
}

/*
 * The layer's backing chain, read-only; its virtual size in *size. One
 * image at a time, each checked before it is opened.
 */
static int chain(struct sandbox *sb, struct sbx_jail *j, uint64_t *size, char *err, size_t errlen)
{
	char *path = strdup(sb->layer), *next = NULL;
	int rc = path ? 0 : -ENOMEM, depth = 0;

	while (path && !rc) {
		struct img *img = NULL;
		const char *name;

		rc = plain(path, err, errlen);
		if (!rc)
			rc = img_open(&img, path, IMG_FMT_AUTO, IMG_RDONLY | IMG_NOBACKING, err,
			              errlen);
		if (rc)
			break;
		if (!depth)
			*size = img_size(img);
		name = img_backing_name(img);
		next = name ? img_resolve(path, name) : NULL;
		if (img_close(img) < 0 || (name && !next)) {
			snprintf(err, errlen, "cannot read %s", path);
			rc = -EIO;
		} else if (next && (++depth > 16 || !allowed(sb, path, next))) {
			snprintf(err, errlen,
			         "its disk's backing file %s lies outside its folder, the images "
			         "and "
			         "the snapshots (or the chain is deeper than 16)",
			         next);
			rc = -EPERM;
		} else if (next && path_add(j, next)) {
			snprintf(err, errlen, "its disk's backing chain is too long to jail");
			rc = -E2BIG;
		}
		free(path);
		path = next;
		next = NULL;
	}
	free(path);
	return rc;
}

/*
 * The file it restores from, readable by its uid: its own (the memory of its
 * last pause) made its; one shared with a snapshot made huskd's, read-only
 * to all, so no VMM can write what other sandboxes will start from.
 */
static int own_restore(struct sandbox *sb, const char *path, char *err, size_t errlen)
{
	size_t n = strlen(sb->dir);
	struct stat st;

	if (plain(path, err, errlen) || lstat(path, &st) < 0)
		return -EPERM;
	if (st.st_nlink == 1 && !strncmp(path, sb->dir, n) && path[n] == '/')
		return lchown(path, sb->jail_uid, sb->jail_uid) < 0 ? -errno : 0;
	if (lchown(path, 0, 0) < 0 || chmod(path, 0644) < 0)
		return -errno;
	return 0;
}

int sbx_jail_prepare(struct sandbox *sb, const char *restore, const char *mem_file,
                     struct sbx_jail *j, char *err, size_t errlen)
{
	struct sbx_mgr *m = sb->m;
	uint64_t disk = 0;
	int rc;

	memset(j, 0, sizeof(*j));
	if (uid_take(sb)) {
		snprintf(err, errlen, "every jail uid is in use");
		return -EAGAIN;
	}
	jail_base(j, m, sb->jail_uid, sb->dir);
	rc = path_add(j, m->cfg.kernel);
	if (!rc)
		rc = path_add(j, m->cfg.initrd);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = chain(sb, j, &disk, err, errlen);
	if (!rc && (rc = sbx_jail_own(sb)))
		snprintf(err, errlen, "cannot hand its folder to uid %u: %s", sb->jail_uid,
		         strerror(-rc));
	if (!rc && restore && (rc = own_restore(sb, restore, err, errlen) || path_add(j, restore)))
		snprintf(err, errlen, "cannot hand %s to its VMM", restore);
	/* A template's memory: huskd's, read-only to all (sbx_tmpl.c made it so). */
	if (!rc && mem_file && (rc = plain(mem_file, err, errlen) ?: path_add(j, mem_file)))
		snprintf(err, errlen, "cannot hand %s to its VMM", mem_file);
	if (rc) {
		sbx_jail_done(j);
		return rc;
	}
	j->spec.dev[j->spec.ndev++] = "/dev/kvm";
	j->spec.dev[j->spec.ndev++] = "/dev/null";
	if (restore && access("/dev/userfaultfd", F_OK) == 0)
		j->spec.dev[j->spec.ndev++] = "/dev/userfaultfd";
	/* Its layer grows to the disk's size and some metadata; a snapshot holds its memory. */
	j->spec.fsize = disk + (sb->mem_mib << 20) + (256ULL << 20);
	return 0;
}

int sbx_jail_tool(struct sbx_mgr *m, const char *rw, const char *ro, uint64_t fsize,
                  struct sbx_jail *j, char *err, size_t errlen)
{
	memset(j, 0, sizeof(*j));
	m->tool_uid = 0;
	m->tool_uid = uid_next(m);
	if (!m->tool_uid) {
		snprintf(err, errlen, "every jail uid is in use");
		return -EAGAIN;
	}
	jail_base(j, m, m->tool_uid, rw);
	j->spec.fsize = fsize;
	if (ro && path_add(j, ro)) {
		snprintf(err, errlen, "out of memory");
		m->tool_uid = 0;
		return -ENOMEM;
	}
	return 0;
}

void sbx_jail_done(struct sbx_jail *j)
{
	for (unsigned i = 0; i < VMM_JAIL_PATHS; i++)
		free(j->owned[i]);
	memset(j, 0, sizeof(*j));
}

int sbx_jail_adopt(struct sandbox *sb, pid_t pid)
{
	char path[64], line[256];
	unsigned uid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %u", &uid) == 1) {
			if (uid >= JAIL_UID_BASE && uid < JAIL_UID_BASE + JAIL_UIDS)
				sb->jail_uid = uid;
			break;
		}
	fclose(f);
	return sb->jail_uid ? 0 : -ESRCH;
}
