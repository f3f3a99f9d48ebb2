// SPDX-License-Identifier: MIT
/*
 * A sandbox's disk limits: the cgroup files as the kernel reads them (a
 * plain folder stands in for the cgroup here; the nested jail suite sees
 * the real one), and the disk found for a path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sbx_cgroup.h"
#include "sbx_test.h"

static void file(const char *dir, const char *name, char *out, size_t len, bool make)
{
	char path[600];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, make ? O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0600);
	n = fd >= 0 && !make ? read(fd, out, len - 1) : 0;
	if (fd >= 0)
		close(fd);
	if (out)
		out[n > 0 ? n : 0] = 0;
}

void t_cgroup_io(void)
{
	struct cgroup_io_limits io = {.disk = "7:3", .bps = 50 << 20, .iops = 1000};
	char dir[600], w[128], m[128], disk[CGROUP_DISK_LEN], sys[700];
	const char *what = "";
	struct stat st;
	int rc;

	snprintf(dir, sizeof(dir), "%s/cg-io", T.root);
	mkdir(dir, 0700);
	file(dir, "io.weight", NULL, 0, true);
	file(dir, "io.max", NULL, 0, true);
	rc = cgroup_io(dir, &io, 2, &what);
	file(dir, "io.weight", w, sizeof(w), false);
	file(dir, "io.max", m, sizeof(m), false);
	t_check("cgroup_io_weight_and_max",
	        !rc && !strcmp(w, "default 200\n") &&
	                !strcmp(m, "7:3 rbps=52428800 wbps=52428800 "
	                           "riops=1000 wiops=1000\n"),
	        "rc %d at %s; io.weight '%s', io.max '%s'", rc, what, w, m);

	/* No limit asked: io.max untouched; no io.weight (no BFQ, no iocost): not an error. */
	io.bps = io.iops = 0;
	file(dir, "io.max", NULL, 0, true);
	snprintf(sys, sizeof(sys), "%s/io.weight", dir);
	unlink(sys);
	rc = cgroup_io(dir, &io, 1, &what);
	file(dir, "io.max", m, sizeof(m), false);
	t_check("cgroup_io_unlimited", !rc && !m[0], "rc %d at %s; io.max '%s'", rc, what, m);

	/* The disk of the test's own folder: a whole disk sysfs knows, or none at all. */
	rc = cgroup_disk_of(T.root, disk);
	if (rc == -ENODEV) {
		t_check("cgroup_disk_of_state", stat(T.root, &st) == 0 && major(st.st_dev) == 0,
		        "-ENODEV for %s on device %u:%u", T.root, major(st.st_dev),
		        minor(st.st_dev));
	} else {
		snprintf(sys, sizeof(sys), "/sys/dev/block/%s/partition", disk);
		t_check("cgroup_disk_of_state", !rc && access(sys, F_OK) != 0 && strchr(disk, ':'),
		        "rc %d, disk '%s'", rc, disk);
	}
	t_check("cgroup_disk_of_missing", cgroup_disk_of("/nonexistent/husk", disk) == -ENOENT,
	        "a missing path was not -ENOENT");
}
