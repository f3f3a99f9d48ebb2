// SPDX-License-Identifier: MIT
/*
 * zipconv (api/huskd/sandbox/zipconv.c): a tar.gz to zip and a zip to tar,
 * entry for entry; archives that are not what they claim, and ones past the
 * size bound, refused with a reason.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "zipconv.h"

/* A memfd holding an archive of format (archive_write_set_format_*) with files a/x and b. */
static int make_archive(int (*format)(struct archive *), bool gzip, size_t big)
{
	static const char *const names[] = {"a/x.txt", "b.bin"};
	static char data[1 << 20];
	struct archive *a = archive_write_new();
	int fd = memfd_create("arch", MFD_CLOEXEC);

	memset(data, 'z', sizeof(data));
	format(a);
	if (gzip)
		archive_write_add_filter_gzip(a);
	archive_write_open_fd(a, fd);
	for (int i = 0; i < 2; i++) {
		struct archive_entry *e = archive_entry_new();
		size_t len = i ? big : 5;

		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)len);
		archive_write_header(a, e);
		archive_write_data(a, i ? data : "hello", len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return fd;
}

/* The entries of the archive in fd as "name:size;..." (any format libarchive reads). */
static void list(int fd, char *out, size_t len)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	size_t n = 0;

	out[0] = '\0';
	archive_read_support_format_all(a);
	archive_read_support_filter_all(a);
	lseek(fd, 0, SEEK_SET);
	if (archive_read_open_fd(a, fd, 65536) == ARCHIVE_OK)
		while (archive_read_next_header(a, &e) == ARCHIVE_OK && n < len)
			n += (size_t)snprintf(out + n, len - n, "%s:%lld;",
			                      archive_entry_pathname(e),
			                      (long long)archive_entry_size(e));
	archive_read_free(a);
}

static bool is_zip(int fd)
{
	char magic[4] = {0};

	return pread(fd, magic, 4, 0) == 4 && !memcmp(magic, "PK\3\4", 4);
}

UNIT_TEST(zipconv_tar_gz_to_zip_and_back)
{
	int tgz = make_archive(archive_write_set_format_pax_restricted, true, 300000);
	int zip = memfd_create("zip", MFD_CLOEXEC), tar = memfd_create("tar", MFD_CLOEXEC);
	char err[256], a[256], b[256], c[256];
	struct stat st;
	void *m;

	CHECK(tgz >= 0 && zip >= 0 && tar >= 0);
	CHECK(zipconv_to_zip(tgz, zip, 1 << 20, err, sizeof(err)) == 0);
	CHECK(is_zip(zip));
	list(tgz, a, sizeof(a));
	list(zip, b, sizeof(b));
	CHECK(!strcmp(a, "a/x.txt:5;b.bin:300000;") && !strcmp(a, b));
	CHECK(fstat(zip, &st) == 0);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, zip, 0);
	CHECK(m != MAP_FAILED);
	CHECK(zipconv_to_tar(m, (size_t)st.st_size, tar, 1 << 20, err, sizeof(err)) == 0);
	munmap(m, (size_t)st.st_size);
	list(tar, c, sizeof(c));
	CHECK(!strcmp(a, c));
	close(tgz);
	close(zip);
	close(tar);
}

UNIT_TEST(zipconv_refuses_what_is_not_an_archive)
{
	int junk = memfd_create("junk", MFD_CLOEXEC), out = memfd_create("out", MFD_CLOEXEC);
	char err[256] = "";

	CHECK(write(junk, "not an archive at all, not even close", 37) == 37);
	CHECK(zipconv_to_zip(junk, out, 1 << 20, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a tar archive"));
	err[0] = '\0';
	CHECK(zipconv_to_tar("PK\3\4rest", 8, out, 1 << 20, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a zip archive"));
	close(junk);
	close(out);
}

UNIT_TEST(zipconv_bounds_the_data)
{
	int tgz = make_archive(archive_write_set_format_pax_restricted, true, 900000);
	int out = memfd_create("out", MFD_CLOEXEC);
	char err[256] = "";

	CHECK(zipconv_to_zip(tgz, out, 500000, err, sizeof(err)) == -EFBIG);
	CHECK(strstr(err, "over"));
	close(tgz);
	close(out);
}
