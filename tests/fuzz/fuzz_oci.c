// SPDX-License-Identifier: MIT
/*
 * Fuzzes what `husk runtime import` reads of a client's image before
 * unpacking it (images/oci): the first byte picks the index, manifest or
 * config parser, or the layer scan (the rest as a layer blob, any
 * compression libarchive knows), or the path and link checks (the rest split
 * at the first NUL). Results must be 0 or a negative errno with a message;
 * nothing may crash, leak or allocate past what the input justifies.
 */
#include <archive.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must_say(int ret, const char *err)
{
	if (ret > 0 || (ret < 0 && !err[0]))
		abort();
}

static void paths(const char *s, size_t n)
{
	char *copy = malloc(n + 1);
	const char *clean, *why, *target;

	if (!copy)
		return;
	/* The path, then (after its NUL, if the input has one) the link's target. */
	memcpy(copy, s, n);
	copy[n] = '\0';
	target = copy + strlen(copy);
	if ((size_t)(target - copy) < n)
		target++;
	if (oci_path_clean(copy, &clean, &why) == 0 &&
	    (clean < copy || clean > copy + strlen(copy)))
		abort();
	oci_link_inside(copy, target);
	free(copy);
}

static void layer(const uint8_t *d, size_t n)
{
	struct oci_limits lim = {.max_bytes = 1u << 20, .max_entries = 1000, .max_blob = 1u << 20};
	struct oci_tally t = {0};
	struct archive *a = archive_read_new();
	char err[512] = "";

	if (!a)
		return;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, d, n) == ARCHIVE_OK)
		must_say(oci_layer_scan(a, "layer 1 of 1", &lim, &t, err, sizeof(err)), err);
	if (t.bytes > lim.max_bytes || t.entries > lim.max_entries + 1)
		abort();
	archive_read_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_limits lim = {.max_bytes = 1u << 30, .max_entries = 1000, .max_blob = 1u << 30};
	struct oci_image img;
	struct oci_blob b;
	char err[1024] = "";
	const char *s = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;

	if (size < 1)
		return 0;
	memset(&img, 0, sizeof(img));
	switch (data[0] % 5) {
	case 0:
		must_say(oci_index_pick(s, n, n & 1 ? "latest" : NULL, &b, err, sizeof(err)), err);
		break;
	case 1:
		must_say(oci_manifest_parse(s, n, &lim, &img, err, sizeof(err)), err);
		if (img.nlayers > OCI_LAYERS_MAX)
			abort();
		break;
	case 2:
		must_say(oci_config_parse(s, n, &img, err, sizeof(err)), err);
		oci_image_free(&img);
		break;
	case 3:
		layer(data + 1, n);
		break;
	default:
		paths(s, n);
		break;
	}
	return 0;
}
