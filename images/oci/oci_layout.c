// SPDX-License-Identifier: MIT
/*
 * An OCI image layout on disk (image-spec, "image-layout.md"): index.json,
 * then blobs/sha256/<hex> for the manifest, the config and each layer. Every
 * blob is read through its descriptor's size and hashed against its digest.
 */
#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci.h"

/* A blob's bytes (at most max), hashed; the caller frees *out. */
static int read_capped(const char *path, size_t max, char **out, size_t *len, char *err,
                       size_t errlen)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "the image layout has no file %s", path);
		if (fd >= 0)
			close(fd);
		return -ENOENT;
	}
	if ((uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s is %lld bytes; more than 4 MiB is not an image's JSON",
		         path, (long long)st.st_size);
		close(fd);
		return -EFBIG;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	*len = 0;
	while (*len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + *len, (size_t)st.st_size - *len);

		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	close(fd);
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

static void blob_path(const char *dir, const struct oci_blob *b, char *out, size_t len)
{
	snprintf(out, len, "%s/blobs/sha256/%s", dir, b->digest + 7);
}

/* Whether the file at path has b's size and sha256. */
static int blob_verify(const char *path, const struct oci_blob *b, const char *what, char *err,
                       size_t errlen)
{
	unsigned char md[32], buf[1 << 16];
	char hex[65];
	uint64_t total = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = 0;

	if (fd < 0 || !ctx) {
		snprintf(err, errlen, "%s: the image layout has no blob %s", what, b->digest);
		if (fd >= 0)
			close(fd);
		EVP_MD_CTX_free(ctx);
		return -ENOENT;
	}
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while (total <= b->size && (n = read(fd, buf, sizeof(buf))) > 0) {
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		total += (uint64_t)n;
	}
	close(fd);
	EVP_DigestFinal_ex(ctx, md, NULL);
	EVP_MD_CTX_free(ctx);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (n < 0 || total != b->size) {
		snprintf(err, errlen,
		         "%s (%s) is %s%llu bytes where the image says %llu: truncated?", what,
		         b->digest, total > b->size ? "over " : "", (unsigned long long)total,
		         (unsigned long long)b->size);
		return -EINVAL;
	}
	if (strcmp(hex, b->digest + 7)) {
		snprintf(err, errlen, "%s does not match its digest %s (it hashes to sha256:%s)",
		         what, b->digest, hex);
		return -EINVAL;
	}
	return 0;
}

static int json_blob(const char *dir, const struct oci_blob *b, const char *what, char **buf,
                     size_t *len, char *err, size_t errlen)
{
	char path[4200];
	int ret;

	if (b->size > OCI_JSON_MAX) {
		snprintf(err, errlen,
		         "the image's %s claims %llu bytes; more than 4 MiB is not one", what,
		         (unsigned long long)b->size);
		return -EFBIG;
	}
	blob_path(dir, b, path, sizeof(path));
	ret = blob_verify(path, b, what, err, errlen);
	return ret ? ret : read_capped(path, OCI_JSON_MAX, buf, len, err, errlen);
}

static int layer_check(const char *dir, const struct oci_image *img, unsigned i,
                       const struct oci_limits *lim, struct oci_tally *t, char *err, size_t errlen)
{
	const struct oci_blob *b = &img->layers[i];
	char path[4200], which[128];
	struct archive *a;
	int ret;

	snprintf(which, sizeof(which), "layer %u of %u (%.19s...)", i + 1, img->nlayers, b->digest);
	blob_path(dir, b, path, sizeof(path));
	ret = blob_verify(path, b, which, err, errlen);
	if (ret)
		return ret;
	a = archive_read_new();
	if (!a)
		return -ENOMEM;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		snprintf(err, errlen, "%s cannot be read: %s", which, archive_error_string(a));
		ret = -EINVAL;
	} else {
		ret = oci_layer_scan(a, which, lim, t, err, errlen);
	}
	archive_read_free(a);
	return ret;
}

int oci_layout_check(const char *dir, const char *ref, const struct oci_limits *lim,
                     struct oci_image *img, struct oci_tally *t, char *err, size_t errlen)
{
	struct oci_blob man;
	char path[4200], *buf = NULL;
	size_t len;
	int ret;

	memset(img, 0, sizeof(*img));
	memset(t, 0, sizeof(*t));
	snprintf(path, sizeof(path), "%s/index.json", dir);
	ret = read_capped(path, OCI_JSON_MAX, &buf, &len, err, errlen);
	if (!ret)
		ret = oci_index_pick(buf, len, ref, &man, err, errlen);
	free(buf);
	buf = NULL;
	if (!ret)
		ret = json_blob(dir, &man, "manifest", &buf, &len, err, errlen);
	if (!ret)
		ret = oci_manifest_parse(buf, len, lim, img, err, errlen);
	free(buf);
	buf = NULL;
	if (!ret)
		ret = json_blob(dir, &img->config, "config", &buf, &len, err, errlen);
	if (!ret)
		ret = oci_config_parse(buf, len, img, err, errlen);
	free(buf);
	for (unsigned i = 0; !ret && i < img->nlayers; i++)
		ret = layer_check(dir, img, i, lim, t, err, errlen);
	if (ret)
		oci_image_free(img);
	return ret;
}
