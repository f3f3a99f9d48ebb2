// SPDX-License-Identifier: MIT
/*
 * One layer's entries, headers only. umoci would quietly clamp a "../x" to
 * "x" and keep a link out of the root as it is; an image that carries such
 * entries was made to attack whoever unpacks it, so it is refused whole.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "oci.h"

int oci_path_clean(const char *path, const char **clean, const char **why)
{
	const char *p = path, *c;

	if (!p || !*p) {
		*why = "has an empty name";
		return -EINVAL;
	}
	if (strlen(p) >= OCI_PATH_MAX) {
		*why = "has a name longer than 4096 bytes";
		return -EINVAL;
	}
	/* "./usr", "/usr" and "usr" are the same entry to every unpacker. */
	for (;;) {
		if (p[0] == '/')
			p++;
		else if (p[0] == '.' && p[1] == '/')
			p += 2;
		else
			break;
	}
	for (c = p; *c;) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.') {
			*why = "climbs out of the image's root ('..' in its path)";
			return -EINVAL;
		}
		if (n > 255) {
			*why = "has a name part longer than 255 bytes";
			return -EINVAL;
		}
		c += n;
		c += *c == '/';
	}
	*clean = p;
	return 0;
}

int oci_link_inside(const char *path, const char *target)
{
	long depth = -1; /* the last part of path is the link, not a directory */

	/* An absolute target resolves inside the guest's own root. */
	if (target[0] == '/')
		return 1;
	for (const char *c = path; *c;) {
		size_t n = strcspn(c, "/");

		depth += n && !(n == 1 && c[0] == '.');
		c += n;
		c += *c == '/';
	}
	if (depth < 0)
		depth = 0;
	for (const char *c = target; *c;) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.') {
			if (--depth < 0)
				return 0;
		} else if (n && !(n == 1 && c[0] == '.')) {
			depth++;
		}
		c += n;
		c += *c == '/';
	}
	return 1;
}

static int refuse(char *err, size_t errlen, const char *which, const char *name, const char *why)
{
	snprintf(err, errlen,
	         "%s: entry '%.200s' %s; such an image is refused whole (rebuild it without that "
	         "entry)",
	         which, name, why);
	return -EINVAL;
}

static int check_entry(struct archive_entry *e, const char *which, const struct oci_limits *lim,
                       struct oci_tally *t, char *err, size_t errlen)
{
	const char *name = archive_entry_pathname(e), *clean, *why;
	const char *hard = archive_entry_hardlink(e), *sym = archive_entry_symlink(e);
	la_int64_t size = archive_entry_size(e);

	if (!name)
		return refuse(err, errlen, which, "?", "has a name that cannot be read");
	if (oci_path_clean(name, &clean, &why))
		return refuse(err, errlen, which, name, why);
	if (hard && (oci_path_clean(hard, &clean, &why) || !*clean))
		return refuse(err, errlen, which, name,
		              "is a hard link to a path outside the image's root");
	if (sym && !oci_link_inside(name, sym)) {
		char what[OCI_PATH_MAX + 64];

		snprintf(what, sizeof(what),
		         "is a symbolic link to '%.200s', which points outside the image's root",
		         sym);
		return refuse(err, errlen, which, name, what);
	}
	if (++t->entries > lim->max_entries) {
		snprintf(err, errlen,
		         "%s: the image has more than %llu entries, more than huskd takes "
		         "(huskd --import-max-entries)",
		         which, (unsigned long long)lim->max_entries);
		return -EFBIG;
	}
	if (size < 0)
		size = 0;
	if (!hard && archive_entry_filetype(e) == AE_IFREG &&
	    (uint64_t)size > lim->max_bytes - t->bytes) {
		snprintf(err, errlen,
		         "%s: entry '%.200s' claims %lld bytes, which takes the image past %llu "
		         "bytes unpacked, the most huskd takes (huskd --import-max-bytes)",
		         which, name, (long long)size, (unsigned long long)lim->max_bytes);
		return -EFBIG;
	}
	if (!hard && archive_entry_filetype(e) == AE_IFREG)
		t->bytes += (uint64_t)size;
	return 0;
}

int oci_layer_scan(struct archive *a, const char *which, const struct oci_limits *lim,
                   struct oci_tally *t, char *err, size_t errlen)
{
	struct archive_entry *e;
	int r;

	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		int ret = check_entry(e, which, lim, t, err, errlen);

		if (ret)
			return ret;
		/* Skipping reads (and decompresses) the data: a short archive shows here. */
		if (archive_read_data_skip(a) != ARCHIVE_OK) {
			snprintf(err, errlen, "%s is truncated or corrupt at entry '%.200s': %s",
			         which, archive_entry_pathname(e), archive_error_string(a));
			return -EINVAL;
		}
	}
	if (r != ARCHIVE_EOF) {
		snprintf(err, errlen, "%s is truncated or corrupt: %s", which,
		         archive_error_string(a) ? archive_error_string(a) : "unreadable");
		return -EINVAL;
	}
	return 0;
}
