// SPDX-License-Identifier: MIT
/* Archive format conversion for the files API (zipconv.h), entry by entry. */
#include "zipconv.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (64 * 1024)

/* libarchive's words for a failure, in err; the -errno it stands for. */
static int fail(struct archive *a, const char *what, char *err, size_t errlen, int rc)
{
	const char *why = a ? archive_error_string(a) : NULL;

	snprintf(err, errlen, "%s%s%s", what, why ? ": " : "", why ? why : "");
	return rc;
}

static int too_big(uint64_t max, char *err, size_t errlen)
{
	if (max >= 1 << 20)
		snprintf(err, errlen, "the archive holds over %llu MiB",
		         (unsigned long long)(max >> 20));
	else
		snprintf(err, errlen, "the archive holds over %llu bytes", (unsigned long long)max);
	return -EFBIG;
}

/* Copies every entry of in to out: headers, then data in blocks, counted against max. */
static int copy_entries(struct archive *in, struct archive *out, uint64_t max, const char *kind,
                        char *err, size_t errlen)
{
	struct archive_entry *e;
	uint64_t budget = max, entries = 0;
	int r;

	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		bool declared = archive_entry_size_is_set(e);
		char block[BLOCK];
		la_ssize_t n;

		if (++entries > ZIPCONV_MAX_ENTRIES) {
			snprintf(err, errlen, "the archive has over %d entries",
			         ZIPCONV_MAX_ENTRIES);
			return -EFBIG;
		}
		/*
		 * The size an entry claims is taken from the budget before its header is
		 * written: the writer pads an entry to that size when it is closed, data
		 * or not (and takes no more than it). An entry with no size pays as its
		 * data comes.
		 */
		if (declared) {
			if (archive_entry_size(e) < 0 || (uint64_t)archive_entry_size(e) > budget)
				return too_big(max, err, errlen);
			budget -= (uint64_t)archive_entry_size(e);
		}
		if (archive_write_header(out, e) < ARCHIVE_WARN)
			return fail(out, "cannot write an entry", err, errlen, -EINVAL);
		while ((n = archive_read_data(in, block, sizeof(block))) > 0) {
			if (!declared && (uint64_t)n > budget)
				return too_big(max, err, errlen);
			if (!declared)
				budget -= (uint64_t)n;
			if (archive_write_data(out, block, (size_t)n) != n)
				return fail(out, "cannot write an entry's data", err, errlen, -EIO);
		}
		if (n < 0)
			return fail(in, kind, err, errlen, -EINVAL);
	}
	if (r != ARCHIVE_EOF)
		return fail(in, kind, err, errlen, -EINVAL);
	if (archive_write_close(out) != ARCHIVE_OK)
		return fail(out, "cannot finish the archive", err, errlen, -EIO);
	return 0;
}

int zipconv_to_zip(int in_fd, int out_fd, uint64_t max, char *err, size_t errlen)
{
	struct archive *in = archive_read_new(), *out = archive_write_new();
	int rc;

	if (!in || !out) {
		rc = fail(NULL, "out of memory", err, errlen, -ENOMEM);
		goto done;
	}
	archive_read_support_format_tar(in);
	archive_read_support_filter_gzip(in);
	archive_read_support_filter_none(in);
	archive_write_set_format_zip(out);
	if (lseek(in_fd, 0, SEEK_SET) < 0 || archive_read_open_fd(in, in_fd, BLOCK) != ARCHIVE_OK) {
		rc = fail(in, "not a tar archive", err, errlen, -EINVAL);
		goto done;
	}
	if (archive_write_open_fd(out, out_fd) != ARCHIVE_OK) {
		rc = fail(out, "cannot write the zip", err, errlen, -EIO);
		goto done;
	}
	rc = copy_entries(in, out, max, "not a tar archive", err, errlen);
done:
	archive_read_free(in);
	archive_write_free(out);
	return rc;
}

int zipconv_to_tar(const void *zip, size_t len, int out_fd, uint64_t max, char *err, size_t errlen)
{
	struct archive *in = archive_read_new(), *out = archive_write_new();
	int rc;

	if (!in || !out) {
		rc = fail(NULL, "out of memory", err, errlen, -ENOMEM);
		goto done;
	}
	archive_read_support_format_zip(in);
	archive_write_set_format_pax_restricted(out);
	if (archive_read_open_memory(in, zip, len) != ARCHIVE_OK) {
		rc = fail(in, "not a zip archive", err, errlen, -EINVAL);
		goto done;
	}
	if (archive_write_open_fd(out, out_fd) != ARCHIVE_OK) {
		rc = fail(out, "cannot write the tar", err, errlen, -EIO);
		goto done;
	}
	rc = copy_entries(in, out, max, "not a zip archive", err, errlen);
done:
	archive_read_free(in);
	archive_write_free(out);
	return rc;
}
