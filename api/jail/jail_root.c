// SPDX-License-Identifier: MIT
/*
 * The jail's file system (jail.h). Every path keeps the name it has on the
 * host, so nothing the program is told - its arguments, a disk's backing
 * chain, a control command naming a snapshot file - needs translating; the
 * root simply holds nothing else. A host path through symlinks gets the
 * same symlinks in the jail (an image cache reached through a link, a
 * merged /usr), so the name resolves inside as it does outside.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"

/* The system's folders: the dynamic loader and libraries the program needs, read-only. */
static const char *const system_paths[] = {"/usr",   "/bin",   "/sbin",   "/lib",
                                           "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache"};

static int say(const char *what, const char *path)
{
	int e = errno;

	fprintf(stderr, "husk-jail: %s %s: %s\n", what, path, strerror(e));
	return -e;
}

/* root + path into out; -ENAMETOOLONG if it does not fit. */
static int inside(const struct jail_root *r, const char *path, char *out, size_t len)
{
	if ((size_t)snprintf(out, len, "%s%s", r->dir, path) >= len) {
		errno = ENAMETOOLONG;
		return say("cannot place", path);
	}
	return 0;
}

/* Makes the folders of path (a jail path, already prefixed) that do not exist yet. */
static int mkdirs(char *p, size_t keep)
{
	for (char *s = p + keep + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			*s = '/';
			return say("cannot make", p);
		}
		*s = '/';
	}
	return 0;
}

/* A mount point in the jail for host path src (a folder or a file). */
/* An empty file at host path in the jail (for a file to be bound over); the path it has there in p.
 */
static int empty_file(const struct jail_root *r, const char *path, char *p, size_t len)
{
	int fd;

	if (inside(r, path, p, len) || mkdirs(p, strlen(r->dir)))
		return -1;
	/* Read-only: a file already there (under a bound folder) is merely opened. */
	fd = open(p, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return say("cannot make", p);
	close(fd);
	return 0;
}

static int mount_point(const struct jail_root *r, const char *path, const struct stat *st)
{
	char p[PATH_MAX];

	if (!S_ISDIR(st->st_mode))
		return empty_file(r, path, p, sizeof(p));
	if (inside(r, path, p, sizeof(p)) || mkdirs(p, strlen(r->dir)))
		return -1;
	return mkdir(p, 0755) < 0 && errno != EEXIST ? say("cannot make", p) : 0;
}

/* Whether path lies in a folder the program writes (where it could plant a link). */
static int writable(const struct jail_root *r, const char *path)
{
	for (unsigned i = 0; i < r->nrw; i++) {
		size_t n = strlen(r->rw[i]);

		if (!strncmp(path, r->rw[i], n) && path[n] == '/')
			return 1;
	}
	return 0;
}

/*
 * Recreates in the jail every symlink on the way to host path, then
 * returns (in real, PATH_MAX long: realpath's) the path with none, where
 * the bind goes.
 */
static int follow(const struct jail_root *r, const char *path, char real[PATH_MAX], int depth)
{
	char walked[PATH_MAX], target[PATH_MAX], rest[PATH_MAX], p[PATH_MAX];
	const char *s = path;
	size_t w = 0;

	if (depth > 8 || path[0] != '/') {
		errno = ELOOP;
		return say("cannot follow", path);
	}
	walked[0] = '\0';
	while (*s) {
		const char *e = strchrnul(s + 1, '/');
		struct stat st;
		ssize_t n;

		if (w + (size_t)(e - s) >= sizeof(walked)) {
			errno = ENAMETOOLONG;
			return say("cannot follow", path);
		}
		memcpy(walked + w, s, (size_t)(e - s));
		w += (size_t)(e - s);
		walked[w] = '\0';
		s = e;
		if (lstat(walked, &st) < 0)
			return say("cannot find", walked);
		if (!S_ISLNK(st.st_mode))
			continue;
		if (writable(r, walked)) {
			errno = ELOOP;
			return say("will not follow a link the program could have made:", walked);
		}
		n = readlink(walked, target, sizeof(target) - 1);
		if (n < 0)
			return say("cannot read", walked);
		target[n] = '\0';
		if (inside(r, walked, p, sizeof(p)) || mkdirs(p, strlen(r->dir)) ||
		    (symlink(target, p) < 0 && errno != EEXIST))
			return say("cannot link", walked);
		/* Go on from where the link points, with what is left of the path. */
		if ((target[0] == '/' ? snprintf(rest, sizeof(rest), "%s%s", target, s)
		                      : snprintf(rest, sizeof(rest), "%.*s/%s%s",
		                                 (int)(strrchr(walked, '/') - walked), walked,
		                                 target, s)) >= (int)sizeof(rest)) {
			errno = ENAMETOOLONG;
			return say("cannot follow", path);
		}
		return follow(r, rest, real, depth + 1);
	}
	if (!realpath(path, real))
		return say("cannot resolve", path);
	return 0;
}

/* Binds host path at the same path in the jail; read-only unless rw. */
static int bind(const struct jail_root *r, const char *path, int rw)
{
	char real[PATH_MAX], p[PATH_MAX];
	unsigned long ro = rw ? 0 : MS_RDONLY;
	struct stat st;

	if (follow(r, path, real, 0) || stat(real, &st) < 0 || mount_point(r, real, &st) ||
	    inside(r, real, p, sizeof(p)))
		return -1;
	if (mount(real, p, NULL, MS_BIND | MS_REC, NULL) < 0)
		return say("cannot bind", real);
	/* A bind takes the flags only on a remount of itself. */
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | ro, NULL) < 0)
		return say("cannot seal", real);
	return 0;
}

static int system_path(const struct jail_root *r, const char *path)
{
	char target[PATH_MAX], p[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(path, &st) < 0)
		return 0; /* this host has none */
	if (!S_ISLNK(st.st_mode))
		return bind(r, path, 0);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return say("cannot read", path);
	target[n] = '\0';
	if (inside(r, path, p, sizeof(p)) || mkdirs(p, strlen(r->dir)))
		return -1;
	return symlink(target, p) < 0 && errno != EEXIST ? say("cannot link", p) : 0;
}

/* A node of the host's device at path, for the jail's uid alone (null and the like: for all). */
static int device(const struct jail_root *r, const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	mode_t mode;

	if (stat(path, &st) < 0)
		return say("cannot find the device", path);
	if (!S_ISCHR(st.st_mode)) {
		errno = ENODEV;
		return say("not a character device:", path);
	}
	mode = (st.st_mode & 0006) == 0006 ? 0666 : 0600;
	if (inside(r, path, p, sizeof(p)) || mkdirs(p, strlen(r->dir)))
		return -1;
	if (mknod(p, S_IFCHR | mode, st.st_rdev) < 0 || chmod(p, mode) < 0 ||
	    chown(p, r->uid, r->gid) < 0)
		return say("cannot make the device", p);
	return 0;
}

static int resolv(const struct jail_root *r)
{
	char p[PATH_MAX];

	if (empty_file(r, "/etc/resolv.conf", p, sizeof(p)))
		return -1;
	if (mount(r->resolv, p, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return say("cannot bind", r->resolv);
	return 0;
}

/*
 * Into the new root. pivot_root leaves the old one nowhere to be found; a
 * host whose root is the initramfs (the nested test host) cannot pivot,
 * and gets what switch_root does: the new root moved over / and chroot,
 * which only CAP_SYS_CHROOT could leave (dropped before the exec).
 */
static int enter(const struct jail_root *r)
{
	if (chdir(r->dir) < 0)
		return say("cannot enter", r->dir);
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		if (umount2(".", MNT_DETACH) < 0)
			return say("cannot let go of", "the host's root");
	} else if (errno == EINVAL) {
		if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0)
			return say("cannot move into", r->dir);
	} else {
		return say("cannot pivot into", r->dir);
	}
	return chdir("/") < 0 ? say("cannot enter", "/") : 0;
}

int jail_root_enter(const struct jail_root *r)
{
	/* Nothing mounted from here on reaches the host, nor the host's mounts us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return say("cannot make private", "/");
	if (mount("tmpfs", r->dir, "tmpfs", MS_NOSUID, "mode=0755,size=1m,nr_inodes=4096") < 0)
		return say("cannot mount a tmpfs on", r->dir);
	for (size_t i = 0; i < sizeof(system_paths) / sizeof(system_paths[0]); i++)
		if (system_path(r, system_paths[i]))
			return -1;
	/* Folders the program writes first: read-only files may lie in them. */
	for (unsigned i = 0; i < r->nrw; i++)
		if (bind(r, r->rw[i], 1))
			return -1;
	for (unsigned i = 0; i < r->nro; i++)
		if (bind(r, r->ro[i], 0))
			return -1;
	for (unsigned i = 0; i < r->ndev; i++)
		if (device(r, r->dev[i]))
			return -1;
	if (r->resolv && resolv(r))
		return -1;
	/* The root itself read-only: the program can add nothing to it. */
	if (mount(NULL, r->dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, "mode=0755") < 0)
		return say("cannot seal", r->dir);
	return enter(r);
}
