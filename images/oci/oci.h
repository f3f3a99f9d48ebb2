/* SPDX-License-Identifier: MIT */
#ifndef HUSK_OCI_H
#define HUSK_OCI_H

/*
 * Checks an OCI image before anything of it is unpacked (husk-oci, run by
 * husk-import for `husk runtime import`). The image comes from a client:
 * every JSON document is size-capped before it is read, every blob's
 * sha256 is checked against its digest, and every layer entry is looked at
 * with libarchive (headers only) so that a path climbing out of the root,
 * a link pointing out of it or a size claim past the limit refuses the
 * whole image before umoci writes a byte. Errors are 0 or -errno with a
 * message for a person in err (which names the layer, the entry and the fix).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct archive;

/* The most an index, manifest or config may hold: real ones are a few KiB. */
#define OCI_JSON_MAX (4u << 20)
#define OCI_LAYERS_MAX 256
#define OCI_PATH_MAX 4096

struct oci_limits {
	uint64_t max_bytes;   /* unpacked: file contents summed over every layer */
	uint64_t max_entries; /* entries summed over every layer */
	uint64_t max_blob;    /* one layer blob as stored (compressed) */
};

struct oci_blob {
	char digest[72]; /* "sha256:" + 64 hex */
	char media[128];
	uint64_t size;
};

struct oci_image {
	struct oci_blob config;
	struct oci_blob layers[OCI_LAYERS_MAX];
	unsigned nlayers;
	/* What a runtime keeps: {env: {K: V}, workingDir, user, entrypoint, cmd}. */
	json_t *defaults;
};

/* What a layer scan counted; it adds to the totals of the layers before it. */
struct oci_tally {
	uint64_t bytes;
	uint64_t entries;
};

/*
 * Picks the manifest in an OCI layout's index.json (buf, len): the one whose
 * org.opencontainers.image.ref.name is ref, or the only one when ref is NULL
 * or "". Fills *m with its descriptor. Nested indexes are not followed (skopeo
 * copy has resolved the platform by then).
 */
int oci_index_pick(const char *buf, size_t len, const char *ref, struct oci_blob *m, char *err,
                   size_t errlen) __attribute__((warn_unused_result));

/* Parses a manifest (buf, len) into img's config and layer descriptors. */
int oci_manifest_parse(const char *buf, size_t len, const struct oci_limits *lim,
                       struct oci_image *img, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Parses an image config (buf, len): linux/amd64 only; Env, WorkingDir, User,
 * Entrypoint and Cmd into img->defaults (a new reference).
 */
int oci_config_parse(const char *buf, size_t len, struct oci_image *img, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Reads every entry header of the layer open in a (any compression libarchive
 * knows), adding to *t; refuses '..' in a path or hard link target, a symbolic
 * link whose relative target leaves the root, an entry past lim, a path over
 * OCI_PATH_MAX, and an archive that ends early or is corrupt. which names the
 * layer in messages ("layer 2 of 3 (sha256:ab12...)").
 */
int oci_layer_scan(struct archive *a, const char *which, const struct oci_limits *lim,
                   struct oci_tally *t, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * The whole check of the image ref in the OCI layout at dir: index, manifest,
 * config and every layer, digests included. Fills *img (free with
 * oci_image_free) and *t.
 */
int oci_layout_check(const char *dir, const char *ref, const struct oci_limits *lim,
                     struct oci_image *img, struct oci_tally *t, char *err, size_t errlen)
	__attribute__((warn_unused_result));

void oci_image_free(struct oci_image *img);

/* A path of an entry without leading "./" and "/": 0, or -EINVAL with why. */
int oci_path_clean(const char *path, const char **clean, const char **why);

/* Whether the relative symbolic link target, seen from the entry at path, stays inside the root. */
int oci_link_inside(const char *path, const char *target);

#endif
