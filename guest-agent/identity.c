// SPDX-License-Identifier: MIT
/*
 * The guest's identity: host name, machine-id and boot id. Children of one
 * memory snapshot start as copies of one machine; the host gives each a
 * name and ids of its own in the `resumed` request, so logs, journals and
 * licence checks inside tell the siblings apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "agent.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_COPY "/run/husk-boot_id"

/* An RFC 1123 label: 1 to 63 of [a-z0-9-], no '-' at either end. */
bool identity_hostname_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 63 || name[0] == '-' || name[n - 1] == '-')
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/*
 * Writes text to path through a temporary file and a rename, without an
 * fsync: ext4 (every runtime's root) writes a file's data before a rename
 * that replaces another commits (auto_da_alloc), so a crash leaves the old
 * file or the new one, never an empty one. Three fsyncs here were most of a
 * template child's setup (each a journal commit and a flush through its
 * encrypted layer); the disk gets the files at the next commit, as it gets
 * everything the sandbox writes.
 */
static int replace_file(const char *path, const char *text, mode_t mode)
{
	char tmp[64];
	size_t n = strlen(text);
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.husk", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		rc = errno ? -errno : -EIO;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* The first len bytes of path (NUL-terminated in buf); -EFBIG if it holds more. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len);
	close(fd);
	if (n < 0)
		return -errno;
	if ((size_t)n == len)
		return -EFBIG;
	buf[n] = 0;
	return n;
}

/*
 * /etc/hostname and the 127.0.1.1 line of /etc/hosts name the host too
 * (sudo, hostname -f and mail tools look there); other lines are the
 * user's. Written only when they change, so a reboot leaves the disk as is.
 */
static void name_in_etc(const char *name)
{
	static char old[16384], hosts[16384 + 128];
	size_t n = 0;
	bool found = false;

	snprintf(hosts, sizeof(hosts), "%s\n", name);
	if (read_small("/etc/hostname", old, sizeof(old)) < 0 || strcmp(old, hosts))
		replace_file("/etc/hostname", hosts, 0644);
	if (read_small("/etc/hosts", old, sizeof(old)) < 0)
		return;
	hosts[0] = 0;
	for (char *line = old, *next; *line; line = next) {
		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		if (!strncmp(line, "127.0.1.1", 9) && (line[9] == ' ' || line[9] == '\t')) {
			n += (size_t)snprintf(hosts + n, sizeof(hosts) - n, "127.0.1.1\t%s\n",
			                      name);
			found = true;
		} else {
			n += (size_t)snprintf(hosts + n, sizeof(hosts) - n, "%.*s",
			                      (int)(next - line), line);
		}
		if (n >= sizeof(hosts))
			return;
	}
	if (!found)
		n += (size_t)snprintf(hosts + n, sizeof(hosts) - n, "%s127.0.1.1\t%s\n",
		                      n && hosts[n - 1] != '\n' ? "\n" : "", name);
	if (n < sizeof(hosts) && strcmp(old, hosts))
		replace_file("/etc/hosts", hosts, 0644);
}

int identity_set_hostname(const char *name)
{
	if (!identity_hostname_valid(name))
		return -EINVAL;
	if (sethostname(name, strlen(name)) < 0)
		return -errno;
	name_in_etc(name);
	return 0;
}

int identity_set_machine_id(const char *hex)
{
	char line[34];

	if (strlen(hex) != 32 || strspn(hex, "0123456789abcdef") != 32)
		return -EINVAL;
	snprintf(line, sizeof(line), "%s\n", hex);
	return replace_file("/etc/machine-id", line, 0444);
}

/* 8-4-4-4-12 lowercase hex digits, the way the kernel prints a boot id. */
bool identity_boot_id_valid(const char *uuid)
{
	if (!uuid || strlen(uuid) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? uuid[i] != '-' : !strchr("0123456789abcdef", uuid[i]) || !uuid[i])
			return false;
	}
	return true;
}

/*
 * The kernel's boot id is read-only and fixed at boot; a file mounted over
 * it gives readers a new one. A child of a child has the file already:
 * the old mount goes first, so restores never stack mounts.
 */
int identity_set_boot_id(const char *uuid)
{
	char line[38];
	int rc;

	if (!identity_boot_id_valid(uuid))
		return -EINVAL;
	snprintf(line, sizeof(line), "%s\n", uuid);
	rc = replace_file(BOOT_ID_COPY, line, 0444);
	if (rc)
		return rc;
	if (umount2(BOOT_ID_PATH, MNT_DETACH) < 0 && errno != EINVAL)
		return -errno;
	return mount(BOOT_ID_COPY, BOOT_ID_PATH, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}
