// SPDX-License-Identifier: MIT
/*
 * husk-oci: what husk-import asks of an image before it unpacks it.
 *   husk-oci kind FILE          "oci-archive" or "docker-archive" (a docker save)
 *   husk-oci check DIR[:REF] [--max-bytes N] [--max-entries N]
 *                               checks the image in an OCI layout (oci.h) and
 *                               prints {layers, bytes, entries, defaults}
 * Exits 0, 1 when the image is refused (the reason on stderr), 2 on bad usage.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

static int usage(void)
{
	fputs("usage: husk-oci kind FILE\n"
	      "       husk-oci check DIR[:REF] [--max-bytes N] [--max-entries N]\n",
	      stderr);
	return 2;
}

/* A docker save has manifest.json at its top; an OCI archive oci-layout and index.json. */
static int cmd_kind(const char *file)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int docker = 0, layout = 0, index = 0, r, n = 0;

	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, file, 1 << 16) != ARCHIVE_OK) {
		fprintf(stderr,
		        "husk-oci: %s is not a tar archive (%s): give an OCI image layout (a "
		        "folder or its tar) or the output of docker save\n",
		        file, archive_error_string(a));
		archive_read_free(a);
		return 1;
	}
	/* The top-level names come first in both; a million entries in, it is neither. */
	while (n++ < 1000000 && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);

		if (p && !strncmp(p, "./", 2))
			p += 2;
		docker |= p && !strcmp(p, "manifest.json");
		layout |= p && !strcmp(p, "oci-layout");
		index |= p && !strcmp(p, "index.json");
		if (layout && index)
			break;
		if (archive_read_data_skip(a) != ARCHIVE_OK) {
			r = ARCHIVE_FATAL;
			break;
		}
	}
	if (layout && index) {
		puts("oci-archive");
	} else if (docker) {
		puts("docker-archive");
	} else {
		fprintf(stderr,
		        "husk-oci: %s is %s: give an OCI image layout (a folder or its tar) or the "
		        "output of docker save\n",
		        file,
		        r == ARCHIVE_EOF ? "neither an OCI archive nor a docker save archive"
		                         : "truncated or not a tar archive");
		archive_read_free(a);
		return 1;
	}
	archive_read_free(a);
	return 0;
}

static int number(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || end == s || *end || s[0] == '-' ? -EINVAL : 0;
}

static int cmd_check(int argc, char **argv)
{
	struct oci_limits lim = {.max_bytes = 16ull << 30, .max_entries = 2000000};
	struct oci_image img;
	struct oci_tally t;
	char dir[4096], err[1024], *ref;
	json_t *out;

	if (argc < 1 || strlen(argv[0]) >= sizeof(dir))
		return usage();
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			return usage();
		if (!strcmp(argv[i], "--max-bytes")     ? number(argv[i + 1], &lim.max_bytes)
		    : !strcmp(argv[i], "--max-entries") ? number(argv[i + 1], &lim.max_entries)
		                                        : -EINVAL)
			return usage();
	}
	lim.max_blob = lim.max_bytes;
	snprintf(dir, sizeof(dir), "%s", argv[0]);
	ref = strrchr(dir, ':');
	if (ref && !strchr(ref, '/'))
		*ref++ = '\0';
	else
		ref = NULL;
	if (oci_layout_check(dir, ref, &lim, &img, &t, err, sizeof(err))) {
		fprintf(stderr, "husk-oci: %s\n", err);
		return 1;
	}
	out = json_pack("{s:i, s:I, s:I, s:O}", "layers", (int)img.nlayers, "bytes",
	                (json_int_t)t.bytes, "entries", (json_int_t)t.entries, "defaults",
	                img.defaults);
	oci_image_free(&img);
	if (!out || json_dumpf(out, stdout, JSON_COMPACT) < 0)
		return 1;
	putchar('\n');
	json_decref(out);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "kind"))
		return cmd_kind(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "check"))
		return cmd_check(argc - 2, argv + 2);
	return usage();
}
