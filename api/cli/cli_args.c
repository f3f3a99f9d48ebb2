// SPDX-License-Identifier: MIT
/*
 * Command-line parsing for the CLI: options anywhere before "--" (as the
 * reference CLI takes them), global options on every command, and checks
 * of the values the API takes as strings (durations, sizes, CPU), so a
 * typo is a usage error here rather than a 400 from huskd.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_URL "http://127.0.0.1:8371"

int args_bad(struct cli *c, const char *fmt, ...)
{
	va_list ap;
	const char *u = c->usage ? c->usage : "husk COMMAND ...";

	fprintf(stderr, "husk: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %.*s\n(see '%s --help')\n", (int)strcspn(u, "\n"), u,
	        c->cmd ? c->cmd : "husk");
	return EXIT_USAGE;
}

static int set_opt(struct cli *c, const struct opt *o, const char *shown, const char *val)
{
	if (o->kind == OPT_FLAG) {
		if (val)
			return args_bad(c, "%s takes no value", shown);
		*(bool *)o->dst = true;
		return 0;
	}
	if (!val)
		return args_bad(c, "%s needs a value", shown);
	if (o->kind == OPT_STR) {
		*(const char **)o->dst = val;
	} else {
		struct strlist *l = o->dst;
		const char **v = realloc(l->v, (size_t)(l->n + 1) * sizeof(*v));

		if (!v) {
			fprintf(stderr, "husk: out of memory\n");
			exit(1);
		}
		l->v = v;
		l->v[l->n++] = val;
	}
	return 0;
}

static const struct opt *find_opt(const struct opt *opts, const struct opt *globals,
                                  const char *name, size_t len, char shrt)
{
	const struct opt *sets[] = {opts, globals};

	for (int i = 0; i < 2; i++)
		for (const struct opt *o = sets[i]; o && o->name; o++)
			if (shrt ? o->shrt == shrt
			         : strlen(o->name) == len && !strncmp(o->name, name, len))
				return o;
	return NULL;
}

/* First line of the key file: the first line that is neither empty nor a comment. */
static char *key_from_file(void)
{
	const char *state = getenv("HUSK_STATE"), *home = getenv("HOME");
	char path[4096], line[1024], *key = NULL;
	FILE *f;

	if (state && *state)
		snprintf(path, sizeof(path), "%s/api-keys", state);
	else
		snprintf(path, sizeof(path), "%s/.local/state/husk/api-keys",
		         home ? home : "/root");
	f = fopen(path, "re");
	if (!f)
		return NULL;
	while (!key && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] && line[0] != '#')
			key = strdup(line);
	}
	fclose(f);
	return key;
}

static int resolve(struct cli *c)
{
	const char *env_key = getenv("HUSK_API_KEY");
	char err[512];

	if (!c->url_text)
		c->url_text = getenv("HUSK_URL");
	if (!c->url_text || !*c->url_text)
		c->url_text = DEFAULT_URL;
	if (cli_url_parse(c->url_text, &c->url, err, sizeof(err)))
		return args_bad(c, "--url (or HUSK_URL) %s", err);
	free(c->key);
	c->key = NULL;
	if (c->key_opt)
		c->key = strdup(c->key_opt);
	else if (env_key && *env_key) /* huskd takes a list; any one of them will do */
		c->key = strndup(env_key, strcspn(env_key, ","));
	else
		c->key = key_from_file();
	if (c->key && strpbrk(c->key, "\r\n"))
		return args_bad(c, "the API key has a line break in it");
	return 0;
}

/* Counts the positionals the spec ("ID [PATH] [K=V...]") wants: *min required, *max allowed. */
static void spec_counts(const char *spec, int *min, int *max, char *first_missing, size_t len,
                        int have)
{
	int n = 0;

	*min = 0;
	*max = 0;
	first_missing[0] = '\0';
	for (const char *p = spec; p && *p;) {
		size_t w;

		p += strspn(p, " ");
		w = strcspn(p, " ");
		if (!w)
			break;
		if (p[0] != '[') {
			if (n++ == have)
				snprintf(first_missing, len, "%.*s", (int)w, p);
			(*min)++;
		}
		*max = w > 3 && !strncmp(p + w - 4, "...]", 4) ? ARGS_MAX_POS : *max + 1;
		p += w;
	}
}

int args_parse(struct cli *c, int argc, char **argv, const struct opt *opts, const char *spec,
               struct args *a)
{
	const struct opt globals[] = {
		{"url", 0, OPT_STR, &c->url_text},  {"api-key", 0, OPT_STR, &c->key_opt},
		{"org-id", 0, OPT_STR, &c->org_id}, {"json", 0, OPT_FLAG, &c->json},
		{"help", 'h', OPT_FLAG, &c->help},  {NULL, 0, 0, NULL},
	};
	/* husk exec ID ls -l: the -l is the command's, which belongs after "--". */
	const char *hint =
		strstr(spec, "CMD...") ? " (the command and its options go after '--')" : "";
	char missing[64];
	int min, max, rc;

	memset(a, 0, sizeof(*a));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--")) {
			a->cmd = argv + i + 1;
			a->ncmd = argc - i - 1;
			break;
		}
		if (s[0] == '-' && s[1] == '-') {
			const char *eq = strchr(s + 2, '=');
			size_t len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
			const struct opt *o = find_opt(opts, globals, s + 2, len, 0);
			const char *val = eq ? eq + 1 : NULL;

			if (!o)
				return args_bad(c, "unknown option '%.*s'%s", (int)(len + 2), s,
				                hint);
			if (!val && o->kind != OPT_FLAG && i + 1 < argc)
				val = argv[++i];
			rc = set_opt(c, o, o->name, val);
			if (rc)
				return rc;
			continue;
		}
		if (s[0] == '-' && s[1]) {
			for (const char *p = s + 1; *p; p++) {
				const struct opt *o = find_opt(opts, globals, NULL, 0, *p);
				const char *val = NULL;
				char shown[3] = {'-', *p, '\0'};

				if (!o)
					return args_bad(c, "unknown option '-%c'%s", *p, hint);
				if (o->kind != OPT_FLAG) {
					val = p[1] ? p + 1 : i + 1 < argc ? argv[++i] : NULL;
					rc = set_opt(c, o, shown, val);
					if (rc)
						return rc;
					break;
				}
				rc = set_opt(c, o, shown, NULL);
				if (rc)
					return rc;
			}
			continue;
		}
		if (a->npos == ARGS_MAX_POS)
			return args_bad(c, "too many arguments (at '%s')", s);
		a->pos[a->npos++] = s;
	}
	if (c->help) {
		printf("usage: %s", c->usage ? c->usage : "husk COMMAND\n");
		return -1;
	}
	spec_counts(spec, &min, &max, missing, sizeof(missing), a->npos);
	if (a->npos < min)
		return args_bad(c, "missing %s", missing);
	if (a->npos > max)
		return args_bad(c, "unexpected argument '%s'", a->pos[max]);
	return resolve(c);
}

int args_duration_ms(struct cli *c, const char *name, const char *v, long long *ms)
{
	double total = 0;
	const char *p = v;
	int rc = args_duration(c, name, v);

	while (!rc && *p) {
		char *end;
		double n = strtod(p, &end);

		p = end;
		total += !strncmp(p, "ms", 2) ? n
		         : *p == 's'          ? n * 1000
		         : *p == 'm'          ? n * 60000
		         : *p == 'h'          ? n * 3600000
		                              : 0;
		p += !strncmp(p, "ms", 2) ? 2 : *p ? 1 : 0;
	}
	*ms = (long long)total;
	return rc;
}

int args_duration(struct cli *c, const char *name, const char *v)
{
	const char *p = v;

	if (!strcmp(v, "0"))
		return 0;
	while (*p && strlen(v) < 32) {
		const char *start = p;

		p += strspn(p, "0123456789");
		if (*p == '.')
			p += 1 + strspn(p + 1, "0123456789");
		if (p == start || (p - start == 1 && *start == '.'))
			break;
		if (!strncmp(p, "ms", 2))
			p += 2;
		else if (*p == 's' || *p == 'm' || *p == 'h')
			p++;
		else
			break;
		if (!*p)
			return 0;
	}
	return args_bad(c, "--%s '%s' is not a duration: use e.g. 30s, 5m, 1h or 1m30s", name, v);
}

/* digits[.digits] then one of the suffixes; true if the number is above zero. */
static bool number_with(const char *v, const char *const *suffixes)
{
	const char *p = v + strspn(v, "0123456789");
	char *end;
	double d;

	if (*p == '.')
		p += 1 + strspn(p + 1, "0123456789");
	if (p == v || strlen(v) > 32)
		return false;
	for (const char *const *s = suffixes; *s; s++) {
		if (!strcmp(p, *s)) {
			errno = 0;
			d = strtod(v, &end);
			return end == p && !errno && d > 0;
		}
	}
	return false;
}

int args_size(struct cli *c, const char *name, const char *v)
{
	static const char *const units[] = {"",   "k",  "K",  "M",  "G", "T",
	                                    "Ki", "Mi", "Gi", "Ti", NULL};

	if (number_with(v, units))
		return 0;
	return args_bad(c, "--%s '%s' is not a size: use e.g. 512Mi, 1Gi or 2G", name, v);
}

int args_cpu(struct cli *c, const char *name, const char *v)
{
	static const char *const units[] = {"", "m", NULL};

	if (number_with(v, units))
		return 0;
	return args_bad(c, "--%s '%s' is not a CPU amount: use millicores (500m) or cores (1, 0.5)",
	                name, v);
}

int args_uint(struct cli *c, const char *name, const char *v, long max, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
	if (n < 0 || *end || errno || n > max)
		return args_bad(c, "--%s '%s' is not a whole number from 0 to %ld", name, v, max);
	*out = n;
	return 0;
}

int args_enum(struct cli *c, const char *name, const char *v, const char *const *list)
{
	char all[256] = "";

	for (const char *const *p = list; *p; p++) {
		if (!strcmp(v, *p))
			return 0;
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s",
		         p == list ? "" : ", ", *p);
	}
	return args_bad(c, "--%s '%s' is not one of: %s", name, v, all);
}

int args_keyval(struct cli *c, const char *name, const char *kv, json_t *obj)
{
	const char *eq = strchr(kv, '=');
	char *k;
	json_t *v;

	if (!eq || eq == kv)
		return args_bad(c, "%s '%s' must be KEY=VALUE", name, kv);
	k = strndup(kv, (size_t)(eq - kv));
	v = json_string(eq + 1);
	if (!k || !v || json_object_set_new(obj, k, v)) {
		free(k);
		return args_bad(c, "%s '%s' is not valid UTF-8", name, kv);
	}
	free(k);
	return 0;
}
