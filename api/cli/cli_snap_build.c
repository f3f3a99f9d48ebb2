// SPDX-License-Identifier: MIT
/*
 * husk snapshot build DIR: reads the declarative build file (JSON, or the
 * YAML of `husk snapshot generate`: scalars, lists and one-level maps,
 * which is all that format uses; there is no YAML library among our
 * dependencies), substitutes ${NAME} from --env, and starts the build
 * (POST /sandbox/snapshots/build, API.md §5.8 (38)).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static json_t *yaml_scalar(char *v)
{
	size_t n = strlen(v);
	char *end;
	long long num;

	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
		v[n - 1] = '\0';
		return json_string(v + 1);
	}
	errno = 0;
	num = strtoll(v, &end, 10);
	if (*v && !*end && !errno)
		return json_integer(num);
	return json_string(v);
}

/* Cuts a " # comment" (outside quotes) and trailing blanks off line. */
static void yaml_trim(char *line)
{
	char quote = 0;
	size_t n;

	for (char *p = line; *p; p++) {
		if (quote) {
			quote = *p == quote ? 0 : quote;
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == '#' && (p == line || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			break;
		}
	}
	n = strlen(line);
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		line[--n] = '\0';
}

/* The subset of YAML the build file uses; NULL with err set on anything else. */
static json_t *yaml_parse(char *text, char *err, size_t errlen)
{
	json_t *root = json_object(), *cur = NULL;
	char *save = NULL, *line, *key = NULL;
	int lineno = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t indent = strspn(line, " ");
		char *colon, *v;
		json_t *val;

		lineno++;
		yaml_trim(line);
		if (!line[indent])
			continue;
		if (indent && key && line[indent] == '-' &&
		    (line[indent + 1] == ' ' || !line[indent + 1])) {
			if (!cur)
				json_object_set_new(root, key, cur = json_array());
			v = line + indent + 1 + strspn(line + indent + 1, " ");
			if (!json_is_array(cur) || json_array_append_new(cur, yaml_scalar(v)))
				goto bad;
			continue;
		}
		colon = strstr(line + indent, ": ");
		if (!colon && line[strlen(line) - 1] == ':')
			colon = line + strlen(line) - 1;
		if (!colon || (indent && !key))
			goto bad;
		*colon = '\0';
		v = colon + 1 + strspn(colon + 1, " ");
		if (indent) {
			if (!cur)
				json_object_set_new(root, key, cur = json_object());
			val = yaml_scalar(v);
			if (!json_is_object(cur) || !val ||
			    json_object_set_new(cur, line + indent, val))
				goto bad;
			continue;
		}
		key = line;
		cur = NULL;
		if (*v && json_object_set_new(root, key, yaml_scalar(v)))
			goto bad;
		if (*v)
			key = NULL;
	}
	return root;
bad:
	snprintf(err, errlen,
	         "line %d is not KEY: VALUE, an indented '- ITEM' or 'KEY: VALUE' "
	         "under a KEY:",
	         lineno);
	json_decref(root);
	return NULL;
}

/* ${NAME} replaced by --env NAME=VALUE, outside comment lines; an unknown name is an error. */
static char *substitute(struct cli *c, const char *text, json_t *vars, int *rc)
{
	struct sbuf out = {0};
	const char *p = text;

	sb_printf(&out, "%s", "");
	while (*p) {
		size_t line = strcspn(p, "\n") + (p[strcspn(p, "\n")] ? 1 : 0);
		const char *d = p[strspn(p, " \t")] == '#' ? NULL : strstr(p, "${");
		const char *end = d && d < p + line ? strchr(d, '}') : NULL;
		char name[128];
		json_t *v;

		if (!d || d >= p + line) {
			sb_append(&out, p, line);
			p += line;
			continue;
		}
		sb_append(&out, p, (size_t)(d - p));
		if (!end || end - d - 2 >= (long)sizeof(name)) {
			*rc = args_bad(c, "the build file has an unclosed ${...}");
			sb_free(&out);
			return NULL;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(end - d - 2), d + 2);
		v = json_object_get(vars, name);
		if (!v) {
			*rc = args_bad(c, "the build file uses ${%s}: give --env %s=VALUE", name,
			               name);
			sb_free(&out);
			return NULL;
		}
		sb_printf(&out, "%s", json_string_value(v));
		p = end + 1;
	}
	return out.s;
}

/* The build file: --file (under DIR unless absolute) or DIR/agentuity-snapshot.{yaml,yml,json}. */
static json_t *load_build_file(struct cli *c, const char *dir, const char *file, json_t *vars,
                               int *rc)
{
	static const char *const names[] = {"agentuity-snapshot.yaml", "agentuity-snapshot.yml",
	                                    "agentuity-snapshot.json", NULL};
	char path[4096], err[256], *text = NULL, *subst;
	size_t len;
	json_t *spec;
	int r = -ENOENT;

	for (int i = 0; r && (file ? i == 0 : names[i] != NULL); i++) {
		const char *f = file ? file : names[i];

		snprintf(path, sizeof(path), "%s%s%s", f[0] == '/' ? "" : dir,
		         f[0] == '/' ? "" : "/", f);
		r = cli_read_file(path, &text, &len);
	}
	if (r) {
		*rc = args_bad(c,
		               "cannot read the build file %s: %s (husk snapshot generate makes "
		               "one)",
		               file ? path : "agentuity-snapshot.yaml|json", strerror(-r));
		return NULL;
	}
	text[len] = '\0'; /* cli_read_file leaves room for it */
	subst = substitute(c, text, vars, rc);
	free(text);
	if (!subst)
		return NULL;
	len = strlen(path);
	spec = len > 5 && !strcmp(path + len - 5, ".json") ? json_loads(subst, 0, NULL)
	                                                   : yaml_parse(subst, err, sizeof(err));
	free(subst);
	if (!json_is_object(spec)) {
		*rc = args_bad(c, "%s: %s", path, spec ? "not a JSON object" : err);
		json_decref(spec);
		return NULL;
	}
	return spec;
}

int snap_build(struct cli *c, int argc, char **argv)
{
	const char *file = NULL, *tag = NULL, *name = NULL, *desc = NULL;
	struct strlist envs = {0}, metas = {0};
	bool force = false, pub = false, confirm = false;
	const struct opt opts[] = {
		{"file", 0, OPT_STR, &file},          {"tag", 0, OPT_STR, &tag},
		{"name", 0, OPT_STR, &name},          {"description", 0, OPT_STR, &desc},
		{"env", 'e', OPT_LIST, &envs},        {"metadata", 0, OPT_LIST, &metas},
		{"force", 0, OPT_FLAG, &force},       {"public", 0, OPT_FLAG, &pub},
		{"confirm", 'y', OPT_FLAG, &confirm}, {NULL, 0, 0, NULL}};
	json_t *vars = json_object(), *meta = json_object(), *spec = NULL, *body = NULL,
	       *env = NULL, *data;
	char id[256];
	struct args a;
	int rc;

	c->usage = "husk snapshot build DIR [--file F] [--tag T] [--name N] [--description D]\n"
		   "                    [--env K=V]... [--metadata K=V]... [--force] [--public "
		   "--confirm]\n"
		   "Builds a snapshot from DIR/agentuity-snapshot.yaml (or .json, or --file).\n";
	rc = args_parse(c, argc, argv, opts, "DIR", &a);
	for (int i = 0; !rc && i < envs.n; i++)
		rc = args_keyval(c, "--env", envs.v[i], vars);
	for (int i = 0; !rc && i < metas.n; i++)
		rc = args_keyval(c, "--metadata", metas.v[i], meta);
	if (!rc && pub && !confirm)
		rc = args_bad(c, "--public publishes the snapshot to everyone: add --confirm");
	if (!rc)
		spec = load_build_file(c, a.pos[0], file, vars, &rc);
	if (!rc && json_integer_value(json_object_get(spec, "version")) != 1)
		rc = args_bad(c, "the build file needs 'version: 1'");
	if (!rc && !json_is_string(json_object_get(spec, "runtime")))
		rc = args_bad(c, "the build file needs 'runtime:' (see husk runtime list)");
	if (!rc) {
		body = json_pack("{sO}", "runtime", json_object_get(spec, "runtime"));
		json_t *n = name ? json_string(name) : json_incref(json_object_get(spec, "name"));
		json_t *d = desc ? json_string(desc)
		                 : json_incref(json_object_get(spec, "description"));

		if (n)
			json_object_set_new(body, "name", n);
		if (d)
			json_object_set_new(body, "description", d);
		if (tag)
			json_object_set_new(body, "tag", json_string(tag));
		if (force)
			json_object_set_new(body, "force", json_true());
		if (pub)
			json_object_set_new(body, "public", json_true());
		rc = cli_call(c, "POST", "/sandbox/snapshots/build", body, &env);
	}
	data = json_object_get(env, "data");
	if (!rc && json_is_true(json_object_get(data, "unchanged"))) {
		if (c->json)
			out_data(env);
		else
			printf("unchanged: snapshot %s\n",
			       out_cell(data, "existingId", id, sizeof(id)));
	} else if (!rc) {
		/* The upload (§5.8 (39)) and finalize (40) steps are not written yet. */
		fprintf(stderr,
		        "husk: huskd started build %s, but this husk cannot upload a build "
		        "context yet\n",
		        out_cell(data, "snapshotId", id, sizeof(id)));
		rc = 1;
	}
	json_decref(vars);
	json_decref(meta);
	json_decref(spec);
	json_decref(body);
	json_decref(env);
	free(envs.v);
	free(metas.v);
	return rc < 0 ? 0 : rc;
}
