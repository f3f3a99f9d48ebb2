// SPDX-License-Identifier: MIT
/*
 * The build file of husk snapshot build (the reference CLI's
 * agentuity-snapshot.yaml format): found, parsed (JSON by jansson, anything
 * else as YAML), ${NAME} filled from --env, then checked and normalized so
 * the rest of the command sees one shape whatever the file said.
 *
 * ${NAME} is replaced in the parsed strings, not in the file's text: a value
 * holding ": " or a line break then stays one value instead of rewriting the
 * file's structure, and comments are never looked at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_snap.h"

static bool name_char(char ch, bool first)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
	       (!first && ch >= '0' && ch <= '9');
}

/* One string with ${NAME} replaced: a new string, or NULL after a usage error in *rc. */
static json_t *subst_one(struct cli *c, const char *s, json_t *vars, int *rc)
{
	struct sbuf out = {0};
	json_t *j;

	sb_append(&out, "", 0);
	for (const char *p = s; *p;) {
		const char *d = strstr(p, "${"), *q;
		json_t *v;

		if (!d) {
			sb_append(&out, p, strlen(p));
			break;
		}
		sb_append(&out, p, (size_t)(d - p));
		for (q = d + 2; name_char(*q, q == d + 2); q++)
			;
		if (*q != '}' || q == d + 2) {
			*rc = args_bad(c,
			               "the build file has '%.*s', which is not ${NAME} (letters, "
			               "digits and _)",
			               (int)strcspn(d, "}") + (d[strcspn(d, "}")] ? 1 : 0), d);
			sb_free(&out);
			return NULL;
		}
		v = json_object_getn(vars, d + 2, (size_t)(q - d - 2));
		if (!v) {
			*rc = args_bad(c, "the build file uses ${%.*s}: give --env %.*s=VALUE",
			               (int)(q - d - 2), d + 2, (int)(q - d - 2), d + 2);
			sb_free(&out);
			return NULL;
		}
		sb_append(&out, json_string_value(v), strlen(json_string_value(v)));
		p = q + 1;
	}
	j = json_stringn(out.s, out.len);
	sb_free(&out);
	if (!j)
		*rc = args_bad(c, "an --env value must be valid UTF-8");
	return j;
}

static int subst_tree(struct cli *c, json_t *j, json_t *vars);

/* v's replacement if it is a string (a new reference), else NULL after substituting inside it. */
static json_t *subst_value(struct cli *c, json_t *v, json_t *vars, int *rc)
{
	if (json_is_string(v))
		return subst_one(c, json_string_value(v), vars, rc);
	*rc = subst_tree(c, v, vars);
	return NULL;
}

/* Every string value under j (not keys), in place: 0 or EXIT_USAGE. */
static int subst_tree(struct cli *c, json_t *j, json_t *vars)
{
	const char *k;
	json_t *v, *n;
	size_t i;
	int rc = 0;

	json_object_foreach(j, k, v)
	{
		if ((n = subst_value(c, v, vars, &rc)))
			json_object_set_new(j, k, n);
		if (rc)
			return rc;
	}
	json_array_foreach(j, i, v)
	{
		if ((n = subst_value(c, v, vars, &rc)))
			json_array_set_new(j, i, n);
		if (rc)
			return rc;
	}
	return 0;
}

/* spec[key]; when missing or null, empty is put there instead (empty is consumed). */
static json_t *field_or(json_t *spec, const char *key, json_t *empty)
{
	json_t *v = json_object_get(spec, key);

	if (v && !json_is_null(v)) {
		json_decref(empty);
		return v;
	}
	json_object_set_new(spec, key, empty);
	return empty;
}

/* spec[key], when present, must be a list of strings; missing becomes []. */
static int want_strings(struct cli *c, json_t *spec, const char *key)
{
	json_t *a = field_or(spec, key, json_array()), *v;
	size_t i;

	if (!json_is_array(a))
		return args_bad(c, "the build file's '%s' must be a list ('- item' lines)", key);
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v))
			return args_bad(c, "item %zu of the build file's '%s' must be text", i + 1,
			                key);
	}
	return 0;
}

/* spec[key], when present, must map names to scalars; they become strings. */
static int want_string_map(struct cli *c, json_t *spec, const char *key)
{
	json_t *m = field_or(spec, key, json_object()), *v;
	const char *k;
	char buf[64];

	if (!json_is_object(m))
		return args_bad(c, "the build file's '%s' must be a mapping of NAME: value", key);
	json_object_foreach(m, k, v)
	{
		if (json_is_integer(v))
			snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
		else if (json_is_boolean(v))
			snprintf(buf, sizeof(buf), "%s", json_is_true(v) ? "true" : "false");
		else if (json_is_real(v)) /* JSON files only: YAML keeps 1.5 as text */
			snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
		else if (!json_is_string(v))
			return args_bad(
				c,
				"the build file's %s.%s must be a value (write %s: \"\" for "
				"an empty one)",
				key, k, k);
		if (!json_is_string(v))
			json_object_set_new(m, k, json_string(buf));
	}
	return 0;
}

/* Checks the fields the format has; says which ones it ignores. 0 or EXIT_USAGE. */
static int check_spec(struct cli *c, json_t *spec)
{
	static const char *const known[] = {"version",     "runtime",      "name",
	                                    "description", "dependencies", "files",
	                                    "env",         "metadata",     NULL};
	const char *k;
	json_t *v;
	int rc = 0;

	if (!json_is_integer(json_object_get(spec, "version")) ||
	    json_integer_value(json_object_get(spec, "version")) != 1)
		return args_bad(c, "the build file needs 'version: 1'");
	if (!json_is_string(json_object_get(spec, "runtime")) ||
	    !*json_string_value(json_object_get(spec, "runtime")))
		return args_bad(c, "the build file needs 'runtime:' (see husk runtime list)");
	for (const char *const *t = (const char *const[]){"name", "description", NULL}; *t; t++) {
		v = json_object_get(spec, *t);
		if (json_is_null(v))
			json_object_del(spec, *t);
		else if (v && !json_is_string(v))
			return args_bad(c, "the build file's '%s' must be text", *t);
	}
	json_object_foreach(spec, k, v)
	{
		bool ok = false;

		for (const char *const *n = known; *n && !ok; n++)
			ok = !strcmp(*n, k);
		if (!ok)
			fprintf(stderr,
			        "husk: the build file's '%s' is not part of the format; "
			        "ignored\n",
			        k);
	}
	rc = want_strings(c, spec, "dependencies");
	if (!rc)
		rc = want_strings(c, spec, "files");
	if (!rc)
		rc = want_string_map(c, spec, "env");
	if (!rc)
		rc = want_string_map(c, spec, "metadata");
	return rc;
}

int snap_spec_load(struct cli *c, const char *dir, const char *file, json_t *vars, json_t **spec)
{
	static const char *const names[] = {"agentuity-snapshot.yaml", "agentuity-snapshot.yml",
	                                    "agentuity-snapshot.json", NULL};
	char path[4096], err[512], *text = NULL;
	size_t tlen, plen;
	json_error_t jerr;
	int r = -ENOENT, rc;

	*spec = NULL;
	for (int i = 0; r == -ENOENT && (file ? i == 0 : names[i] != NULL); i++) {
		const char *f = file ? file : names[i];

		snprintf(path, sizeof(path), "%s%s%s", f[0] == '/' ? "" : dir,
		         f[0] == '/' ? "" : "/", f);
		r = cli_read_file(path, &text, &tlen);
	}
	if (r)
		return args_bad(c,
		                "cannot read the build file %s: %s (husk snapshot generate > "
		                "%s/agentuity-snapshot.yaml makes one)",
		                file ? path : "agentuity-snapshot.yaml|yml|json", strerror(-r),
		                dir);
	text[tlen] = '\0'; /* cli_read_file leaves room for it */
	plen = strlen(path);
	if (plen > 5 && !strcmp(path + plen - 5, ".json")) {
		*spec = json_loadb(text, tlen, 0, &jerr);
		if (!*spec)
			snprintf(err, sizeof(err), "line %d, column %d: %s", jerr.line, jerr.column,
			         jerr.text);
	} else if (snap_yaml_parse(text, tlen, spec, err, sizeof(err))) {
		*spec = NULL;
	}
	free(text);
	if (!json_is_object(*spec)) {
		rc = args_bad(c, "%s: %s", path,
		              *spec ? "the top level must be a mapping (version: 1, runtime: ...)"
		                    : err);
		json_decref(*spec);
		*spec = NULL;
		return rc;
	}
	rc = subst_tree(c, *spec, vars);
	if (!rc)
		rc = check_spec(c, *spec);
	if (rc) {
		json_decref(*spec);
		*spec = NULL;
	}
	return rc;
}
