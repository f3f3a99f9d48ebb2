// SPDX-License-Identifier: MIT
/*
 * The fake's snapshot file: the line "husk-fake-snapshot 1", then one JSON
 * object with the guest's state (README.md), file contents in base64.
 * Written to FILE.tmp and renamed; checked field by field when loaded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake.h"

#define SNAP_MAGIC "husk-fake-snapshot 1\n"
#define MAX_VCPUS 255

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *b64_encode(const uint8_t *p, size_t n)
{
	char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
	json_t *j;

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
		             (i + 2 < n ? p[i + 2] : 0);

		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? b64[v & 63] : '=';
	}
	*o = '\0';
	j = json_stringn(s, (size_t)(o - s));
	free(s);
	return j;
}

/* A blob of s's bytes, or NULL if s is not padded base64. */
static struct blob *b64_decode(const char *s, size_t n)
{
	struct blob *b;
	size_t len = 0;

	if (n % 4)
		return NULL;
	b = blob_new(n / 4 * 3);
	for (size_t i = 0; b && i < n; i += 4) {
		uint32_t v = 0;
		int pad = 0;

		for (int k = 0; k < 4; k++) {
			const char *c = s[i + k] ? strchr(b64, s[i + k]) : NULL;

			if (s[i + k] == '=' && i + 4 == n && k >= 2 &&
			    (k == 3 || s[i + 3] == '=')) {
				pad++;
				v <<= 6;
			} else if (c && !pad) {
				v = v << 6 | (uint32_t)(c - b64);
			} else {
				blob_put(b);
				return NULL;
			}
		}
		b->data[len++] = (uint8_t)(v >> 16);
		if (pad < 2)
			b->data[len++] = (uint8_t)(v >> 8);
		if (pad < 1)
			b->data[len++] = (uint8_t)v;
	}
	if (b)
		b->len = len;
	return b;
}

static json_t *guest_json(const struct guest *g)
{
	json_t *root = json_pack("{s:s, s:I, s:i, s:i, s:I, s:i, s:O, s:[]}", "boot_id", g->boot_id,
	                         "dial_port", (json_int_t)g->dial_port, "dials", (int)g->dials,
	                         "resumed", (int)g->resumed, "mem", (json_int_t)g->mem, "vcpus",
	                         (int)g->vcpus, "env", g->env, "files");
	json_t *files = json_object_get(root, "files");

	for (const struct fentry *e = g->files; e && files; e = e->next) {
		json_t *o = json_pack("{s:s, s:s, s:i, s:I}", "path", e->path, "type",
		                      e->dir ? "dir" : "file", "mode", (int)e->mode, "mtime_ms",
		                      (json_int_t)e->mtime_ms);

		if (!o ||
		    (!e->dir &&
		     json_object_set_new(o, "data", b64_encode(e->blob->data, e->blob->len)))) {
			json_decref(o);
			json_decref(root);
			return NULL;
		}
		json_array_append_new(files, o);
	}
	return root;
}

int snap_save(const struct fake *fk, const char *path, bool diff, char *err, size_t errlen)
{
	json_t *root = guest_json(&fk->g);

	if (root && diff)
		json_object_set_new(root, "base", json_string(fk->g.base));
	/* Sealed as husk-vmm would: the key's fingerprint recorded, never the key. */
	if (root && fk->key[0])
		json_object_set_new(root, "sealed", json_string(fk->key));
	char *tmp = NULL;
	FILE *f = NULL;
	int e = ENOMEM;

	if (!root || asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		goto err;
	}
	errno = 0;
	f = fopen(tmp, "we");
	if (!f || fputs(SNAP_MAGIC, f) < 0 || json_dumpf(root, f, JSON_COMPACT) ||
	    fputc('\n', f) < 0 || fflush(f) || fsync(fileno(f))) {
		e = errno ? errno : EIO;
		goto err;
	}
	if (fclose(f)) {
		f = NULL;
		e = errno;
		goto err;
	}
	f = NULL;
	if (rename(tmp, path)) {
		e = errno;
		goto err;
	}
	free(tmp);
	json_decref(root);
	return 0;

err:
	snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
	if (f)
		fclose(f);
	if (tmp)
		unlink(tmp);
	free(tmp);
	json_decref(root);
	return -e;
}

static bool int_in(json_t *j, json_int_t lo, json_int_t hi)
{
	return json_is_integer(j) && json_integer_value(j) >= lo && json_integer_value(j) <= hi;
}

/* One entry of "files", appended at *tail; false if it is not one. */
static bool load_entry(struct guest *g, json_t *o, struct fentry ***tail)
{
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *type = json_string_value(json_object_get(o, "type"));
	json_t *data = json_object_get(o, "data"), *mtime = json_object_get(o, "mtime_ms");
	struct fentry *e;
	char *norm;

	if (!path || path[0] != '/' || !type || (strcmp(type, "dir") && strcmp(type, "file")) ||
	    !int_in(json_object_get(o, "mode"), 0, 07777) || !json_is_integer(mtime) ||
	    !(norm = fs_path_norm(path)))
		return false;
	e = calloc(1, sizeof(*e));
	if (!e || strcmp(norm, path)) {
		free(norm);
		free(e);
		return false;
	}
	e->path = norm;
	e->dir = !strcmp(type, "dir");
	e->mode = (unsigned)json_integer_value(json_object_get(o, "mode"));
	e->mtime_ms = json_integer_value(mtime);
	if (!e->dir &&
	    (!json_is_string(data) ||
	     !(e->blob = b64_decode(json_string_value(data), json_string_length(data))))) {
		fs_entry_free(e);
		return false;
	}
	g->stored += e->dir ? 0 : e->blob->len;
	**tail = e;
	*tail = &e->next;
	return true;
}

int snap_load(struct guest *g, const char *path)
{
	const char *id, *k;
	char magic[sizeof(SNAP_MAGIC)];
	struct fentry **tail = &g->files;
	json_t *root = NULL, *v, *files;
	FILE *f = fopen(path, "re");
	size_t i;

	memset(g, 0, sizeof(*g));
	if (!f || !fgets(magic, sizeof(magic), f) || strcmp(magic, SNAP_MAGIC))
		goto bad;
	root = json_loadf(f, JSON_REJECT_DUPLICATES, NULL);
	id = json_string_value(json_object_get(root, "boot_id"));
	files = json_object_get(root, "files");
	g->env = json_incref(json_object_get(root, "env"));
	if (!id || strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32 ||
	    !int_in(json_object_get(root, "dial_port"), 0, UINT32_MAX - 1) ||
	    !int_in(json_object_get(root, "dials"), 0, INT32_MAX) ||
	    !int_in(json_object_get(root, "resumed"), 0, INT32_MAX) ||
	    !int_in(json_object_get(root, "mem"), 1, INT64_MAX) ||
	    !int_in(json_object_get(root, "vcpus"), 1, MAX_VCPUS) || !json_is_object(g->env) ||
	    !json_is_array(files))
		goto bad;
	json_object_foreach(g->env, k, v)
	{
		if (!json_is_string(v))
			goto bad;
	}
	json_array_foreach(files, i, v)
	{
		if (!load_entry(g, v, &tail))
			goto bad;
	}
	if (g->stored > FAKE_FILES_MAX)
		goto bad;
	memcpy(g->boot_id, id, 33);
	g->dial_port = (unsigned)json_integer_value(json_object_get(root, "dial_port"));
	g->dials = (unsigned)json_integer_value(json_object_get(root, "dials"));
	g->resumed = (unsigned)json_integer_value(json_object_get(root, "resumed"));
	g->mem = (uint64_t)json_integer_value(json_object_get(root, "mem"));
	g->vcpus = (unsigned)json_integer_value(json_object_get(root, "vcpus"));
	if (json_is_string(json_object_get(root, "sealed")))
		snprintf(g->sealed, sizeof(g->sealed), "%s",
		         json_string_value(json_object_get(root, "sealed")));
	if (json_is_string(json_object_get(root, "base"))) {
		g->diff = true;
		snprintf(g->base, sizeof(g->base), "%s",
		         json_string_value(json_object_get(root, "base")));
	}
	json_decref(root);
	fclose(f);
	return 0;

bad:
	json_decref(root);
	if (f)
		fclose(f);
	guest_free(g);
	return -1;
}

void guest_free(struct guest *g)
{
	while (g->files) {
		struct fentry *e = g->files;

		g->files = e->next;
		fs_entry_free(e);
	}
	json_decref(g->env);
	memset(g, 0, sizeof(*g));
}
