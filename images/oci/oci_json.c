// SPDX-License-Identifier: MIT
/*
 * The JSON documents of an OCI image (image-spec v1: index, manifest,
 * config), parsed from bytes a client sent. Only what husk uses is read;
 * every field read is type-checked and bounded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "oci.h"

static json_t *parse(const char *buf, size_t len, const char *what, char *err, size_t errlen)
{
	json_error_t je;
	json_t *j;

	if (len > OCI_JSON_MAX) {
		snprintf(err, errlen,
		         "the image's %s is %zu bytes; more than 4 MiB is not an image", what, len);
		return NULL;
	}
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		snprintf(err, errlen, "the image's %s is not valid JSON: %s (line %d)", what,
		         je.text, je.line);
		return NULL;
	}
	if (!json_is_object(j)) {
		snprintf(err, errlen, "the image's %s is not a JSON object", what);
		json_decref(j);
		return NULL;
	}
	return j;
}

static bool digest_ok(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) || strlen(d) != 7 + 64)
		return false;
	return strspn(d + 7, "0123456789abcdef") == 64;
}

/* A descriptor {mediaType, digest, size} into b. */
static int descriptor(json_t *d, const char *what, struct oci_blob *b, char *err, size_t errlen)
{
	const char *media = json_string_value(json_object_get(d, "mediaType"));
	const char *digest = json_string_value(json_object_get(d, "digest"));
	json_t *size = json_object_get(d, "size");

	if (!json_is_object(d) || !digest_ok(digest)) {
		snprintf(err, errlen,
		         "the image's %s has no sha256 digest (only sha256 images are taken)",
		         what);
		return -EINVAL;
	}
	if (!json_is_integer(size) || json_integer_value(size) < 0) {
		snprintf(err, errlen, "the image's %s has no size", what);
		return -EINVAL;
	}
	if (media && strlen(media) >= sizeof(b->media)) {
		snprintf(err, errlen, "the image's %s has a media type of %zu bytes", what,
		         strlen(media));
		return -EINVAL;
	}
	snprintf(b->digest, sizeof(b->digest), "%s", digest);
	snprintf(b->media, sizeof(b->media), "%s", media ? media : "");
	b->size = (uint64_t)json_integer_value(size);
	return 0;
}

int oci_index_pick(const char *buf, size_t len, const char *ref, struct oci_blob *m, char *err,
                   size_t errlen)
{
	json_t *idx = parse(buf, len, "index.json", err, errlen), *list, *d, *found = NULL;
	size_t i, n = 0;
	int ret;

	if (!idx)
		return -EINVAL;
	list = json_object_get(idx, "manifests");
	json_array_foreach(list, i, d)
	{
		json_t *ann = json_object_get(d, "annotations");
		const char *name = json_string_value(
			json_object_get(ann, "org.opencontainers.image.ref.name"));

		if (ref && *ref ? name && !strcmp(name, ref) : true) {
			found = d;
			n++;
		}
	}
	if (n != 1) {
		if (n)
			snprintf(err, errlen,
			         "the image layout holds %zu images; name one (DIR:TAG)", n);
		else
			snprintf(err, errlen, "the image layout has no image%s%s",
			         ref && *ref ? " tagged " : "", ref && *ref ? ref : "");
		json_decref(idx);
		return -ENOENT;
	}
	ret = descriptor(found, "index entry", m, err, errlen);
	json_decref(idx);
	return ret;
}

static bool layer_media_ok(const char *m)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.v1.tar+zstd",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
		"application/vnd.docker.image.rootfs.diff.tar",
		NULL,
	};
	for (unsigned i = 0; ok[i]; i++)
		if (!strcmp(m, ok[i]))
			return true;
	return false;
}

int oci_manifest_parse(const char *buf, size_t len, const struct oci_limits *lim,
                       struct oci_image *img, char *err, size_t errlen)
{
	json_t *man = parse(buf, len, "manifest", err, errlen), *layers, *d;
	size_t i;
	int ret;

	if (!man)
		return -EINVAL;
	ret = descriptor(json_object_get(man, "config"), "config descriptor", &img->config, err,
	                 errlen);
	layers = json_object_get(man, "layers");
	if (!ret && (!json_is_array(layers) || json_array_size(layers) > OCI_LAYERS_MAX)) {
		snprintf(err, errlen, "the image's manifest has %s layers (at most %u are taken)",
		         json_is_array(layers) ? "too many" : "no list of", OCI_LAYERS_MAX);
		ret = -EINVAL;
	}
	img->nlayers = 0;
	json_array_foreach(layers, i, d)
	{
		struct oci_blob *b = &img->layers[i];
		char what[32];

		if (ret)
			break;
		snprintf(what, sizeof(what), "layer %zu", i + 1);
		ret = descriptor(d, what, b, err, errlen);
		if (!ret && !layer_media_ok(b->media)) {
			snprintf(
				err, errlen,
				"layer %zu has media type '%s'; husk takes tar layers, plain, gzip "
				"or zstd",
				i + 1, b->media);
			ret = -EINVAL;
		}
		if (!ret && b->size > lim->max_blob) {
			snprintf(err, errlen,
			         "layer %zu claims %llu bytes, more than huskd takes "
			         "(huskd --import-max-bytes: %llu)",
			         i + 1, (unsigned long long)b->size,
			         (unsigned long long)lim->max_blob);
			ret = -EFBIG;
		}
		img->nlayers += !ret;
	}
	json_decref(man);
	return ret;
}

/* A JSON array of at most max strings of at most 64 KiB each, or null; NULL if neither. */
static json_t *strings(json_t *a, size_t max)
{
	json_t *v;
	size_t i;

	if (!a || json_is_null(a))
		return json_null();
	if (!json_is_array(a) || json_array_size(a) > max)
		return NULL;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || json_string_length(v) > 65536)
			return NULL;
	}
	return json_incref(a);
}

static json_t *env_object(json_t *list, char *err, size_t errlen)
{
	json_t *env = json_object(), *v;
	size_t i;

	json_array_foreach(list, i, v)
	{
		const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
		char key[256];

		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key) ||
		    strspn(kv, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
		            (size_t)(eq - kv)) {
			snprintf(err, errlen, "the image's Env entry %zu is not NAME=VALUE", i + 1);
			json_decref(env);
			return NULL;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
		json_object_set_new(env, key, json_string(eq + 1));
	}
	return env;
}

int oci_config_parse(const char *buf, size_t len, struct oci_image *img, char *err, size_t errlen)
{
	json_t *cfg = parse(buf, len, "config", err, errlen), *c, *env = NULL, *ep, *cmd;
	const char *arch, *os, *wd, *user;

	if (!cfg)
		return -EINVAL;
	arch = json_string_value(json_object_get(cfg, "architecture"));
	os = json_string_value(json_object_get(cfg, "os"));
	if (!arch || strcmp(arch, "amd64") || !os || strcmp(os, "linux")) {
		snprintf(err, errlen,
		         "the image is for %.32s/%.32s; husk runs linux/amd64 guests (pull that "
		         "platform: skopeo copy --override-arch amd64)",
		         os ? os : "?", arch ? arch : "?");
		json_decref(cfg);
		return -EINVAL;
	}
	c = json_object_get(cfg, "config");
	wd = json_string_value(json_object_get(c, "WorkingDir"));
	user = json_string_value(json_object_get(c, "User"));
	ep = strings(json_object_get(c, "Entrypoint"), 4096);
	cmd = strings(json_object_get(c, "Cmd"), 4096);
	if (!ep || !cmd || !(env = strings(json_object_get(c, "Env"), 4096)) ||
	    (wd && (wd[0] != '/' || strlen(wd) >= OCI_PATH_MAX)) || (user && strlen(user) > 256)) {
		snprintf(err, errlen,
		         "the image's config has a malformed Entrypoint, Cmd, Env, WorkingDir (an "
		         "absolute path) or User");
		json_decref(ep);
		json_decref(cmd);
		json_decref(env);
		json_decref(cfg);
		return -EINVAL;
	}
	json_t *envo = env_object(env, err, errlen);

	json_decref(env);
	if (!envo) {
		json_decref(ep);
		json_decref(cmd);
		json_decref(cfg);
		return -EINVAL;
	}
	img->defaults = json_pack("{s:o, s:s*, s:s*, s:o, s:o}", "env", envo, "workingDir",
	                          wd && *wd ? wd : NULL, "user", user && *user ? user : NULL,
	                          "entrypoint", ep, "cmd", cmd);
	json_decref(cfg);
	return img->defaults ? 0 : -ENOMEM;
}

void oci_image_free(struct oci_image *img)
{
	json_decref(img->defaults);
	img->defaults = NULL;
}
