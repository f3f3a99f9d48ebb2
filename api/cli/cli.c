// SPDX-License-Identifier: MIT
/*
 * husk: the command-line client of huskd's REST API (api/API.md; usage in
 * api/cli/README.md). main() picks the command; the requests and the error
 * messages every command shares are here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Longer than huskd holds any request (long-polls stop at 240 s, readiness at 180 s). */
#define CALL_TIMEOUT_MS 330000

volatile int cli_interrupted;

static void oom(void)
{
	fprintf(stderr, "husk: out of memory\n");
	exit(1);
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = (b->len + (size_t)n + 1) * 2;
		char *s = realloc(b->s, cap);

		if (!s)
			oom();
		b->s = s;
		b->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sb_append(struct sbuf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = (b->len + len + 1) * 2;
		char *s = realloc(b->s, cap);

		if (!s)
			oom();
		b->s = s;
		b->cap = cap;
	}
	memcpy(b->s + b->len, data, len);
	b->len += len;
	b->s[b->len] = '\0';
}

static void sb_escaped(struct sbuf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			sb_printf(b, "%c", *p);
		else
			sb_printf(b, "%%%02X", *p);
	}
}

void sb_seg(struct sbuf *b, const char *s)
{
	sb_printf(b, "/");
	sb_escaped(b, s);
}

void sb_query(struct sbuf *b, const char *key, const char *value)
{
	if (!value)
		return;
	sb_printf(b, "%c%s=", b->s && strchr(b->s, '?') ? '&' : '?', key);
	sb_escaped(b, value);
}

void sb_free(struct sbuf *b)
{
	free(b->s);
	memset(b, 0, sizeof(*b));
}

int cli_print_failure(struct cli *c, const struct cli_resp *r)
{
	if (r->unreachable)
		fprintf(stderr,
		        "husk: cannot reach huskd at %s: %s (start it with `make run` or "
		        "build/bin/huskd)\n",
		        c->url_text, r->err);
	else
		fprintf(stderr, "husk: the request to huskd at %s failed: %s\n", c->url_text,
		        r->err);
	return 1;
}

int cli_print_error(const struct cli_resp *r)
{
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));
	const char *code = json_string_value(json_object_get(j, "code"));

	if (!msg)
		msg = json_string_value(json_object_get(j, "error"));
	if (msg && code)
		fprintf(stderr, "husk: %s (%s)\n", msg, code);
	else if (msg)
		fprintf(stderr, "husk: %s (HTTP %d)\n", msg, r->status);
	else
		fprintf(stderr, "husk: huskd answered HTTP %d%s%.*s\n", r->status,
		        r->len ? ": " : "", (int)(r->len ? strcspn(r->body, "\r\n") % 200 : 0),
		        r->body ? r->body : "");
	if (r->status == 401)
		fprintf(stderr, "husk: the key comes from --api-key, HUSK_API_KEY or "
		                "${HUSK_STATE:-~/.local/state/husk}/api-keys\n");
	json_decref(j);
	return 1;
}

int cli_raw(struct cli *c, const char *method, const char *target, const char *ctype,
            const void *body, size_t len, cli_body_fn fn, void *arg, int timeout_ms,
            struct cli_resp *resp)
{
	struct sbuf t = {0};
	int rc;
	struct cli_req rq = {.method = method,
	                     .target = target,
	                     .key = c->key,
	                     .ctype = ctype,
	                     .body = body,
	                     .len = len,
	                     .fn = fn,
	                     .arg = arg,
	                     .timeout_ms = timeout_ms};

	/* As the published client does with an orgId: on every request, for huskd to check. */
	if (c->org_id && target[0] == '/') {
		sb_printf(&t, "%s", target);
		sb_query(&t, "orgId", c->org_id);
		rq.target = t.s;
	}
	rc = cli_http_do(&c->url, &rq, resp);
	sb_free(&t);
	if (rc < 0) {
		cli_print_failure(c, resp);
		cli_resp_free(resp);
		return 1;
	}
	if (resp->status < 200 || resp->status > 299) {
		cli_print_error(resp);
		cli_resp_free(resp);
		return 1;
	}
	return 0;
}

int cli_call(struct cli *c, const char *method, const char *target, json_t *body, json_t **out)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct cli_resp r;
	json_t *j;
	int rc;

	if (body && !text)
		oom();
	rc = cli_raw(c, method, target, body ? "application/json" : NULL, text,
	             text ? strlen(text) : 0, NULL, NULL, CALL_TIMEOUT_MS, &r);
	free(text);
	if (rc)
		return rc;
	j = r.body ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	if (!json_is_true(json_object_get(j, "success"))) {
		fprintf(stderr,
		        "husk: huskd answered HTTP %d without its JSON envelope "
		        "({\"success\":true,...})\n",
		        r.status);
		json_decref(j);
		cli_resp_free(&r);
		return 1;
	}
	cli_resp_free(&r);
	if (out)
		*out = j;
	else
		json_decref(j);
	return 0;
}

int cli_show(struct cli *c, const char *method, const char *target, json_t *body,
             const char *list_key, const struct col *cols)
{
	json_t *env = NULL, *data;
	int rc = cli_call(c, method, target, body, &env);

	if (rc)
		return rc;
	data = json_object_get(env, "data");
	if (c->json)
		out_data(env);
	else if (list_key)
		out_table(json_object_get(data, list_key), cols);
	else
		out_fields(data, cols);
	json_decref(env);
	return 0;
}

int cli_act(struct cli *c, const char *method, const char *target, json_t *body, const char *done)
{
	json_t *env = NULL;
	int rc = cli_call(c, method, target, body, &env);

	if (!rc && c->json)
		out_data(env);
	else if (!rc && done)
		printf("%s\n", done);
	json_decref(env);
	return rc;
}

int cli_show_id(struct cli *c, int argc, char **argv, const char *spec, const char *pre,
                const char *suffix, const char *list_key, const struct col *cols)
{
	struct sbuf t = {0};
	struct args a;
	int rc;

	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, spec, &a));
	sandbox_path(&t, pre, a.pos[0], suffix);
	rc = cli_show(c, "GET", t.s, NULL, list_key, cols);
	sb_free(&t);
	return rc;
}

char *cli_base64(const void *data, size_t len)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		oom();
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
		             (i + 2 < len ? p[i + 2] : 0);

		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? tab[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

int cli_read_file(const char *path, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;
	struct stat st;
	char *buf = NULL;
	size_t have = 0, cap = 0;

	*data = NULL;
	*len = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	for (;;) {
		ssize_t n;

		if (have + 65536 > cap) {
			char *b;

			cap = cap ? cap * 2 : 65536;
			/* huskd takes JSON bodies up to 64 MiB, so base64 of 48 MiB at most. */
			if (cap > (128u << 20) || !(b = realloc(buf, cap))) {
				err = -EFBIG;
				break;
			}
			buf = b;
		}
		n = read(fd, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		have += (size_t)n;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*data = buf;
	*len = have;
	return 0;
}

bool cli_name_is(const char *names, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = names; p;) {
		size_t len = strcspn(p, "|");

		if (len == n && !strncmp(p, name, n))
			return true;
		p = p[len] ? p + len + 1 : NULL;
	}
	return false;
}

static void list_commands(FILE *f, const char *group, const struct subcmd *table)
{
	fprintf(f,
	        "usage: husk %s%sCOMMAND ... [--json] [--url URL] [--api-key KEY] [--org-id ID]\n"
	        "\ncommands:\n",
	        group ? group : "", group ? " " : "");
	for (const struct subcmd *t = table; t->names; t++) {
		const char *bar = strchr(t->names, '|');

		fprintf(f, "  %-12.*s %s", (int)strcspn(t->names, "|"), t->names, t->usage);
		if (bar) {
			fprintf(f, " (also: ");
			for (const char *p = bar + 1; *p; p++)
				fputs(*p == '|' ? ", " : (char[]){*p, '\0'}, f);
			fprintf(f, ")");
		}
		fputc('\n', f);
	}
	if (!group)
		fprintf(f,
		        "\nhusk sandbox COMMAND and husk sb COMMAND work too. Each command has "
		        "--help.\nhuskd: --url URL or HUSK_URL (default http://127.0.0.1:8371, or "
		        "unix:/PATH);\nkey: --api-key, HUSK_API_KEY, or "
		        "${HUSK_STATE:-~/.local/state/husk}/api-keys.\n");
}

int cli_subcommand(struct cli *c, const char *group, const struct subcmd *table, int argc,
                   char **argv)
{
	static char name[128];
	const char *want = argc > 1 ? argv[1] : NULL;

	if (!want || !strcmp(want, "--help") || !strcmp(want, "-h") || !strcmp(want, "help")) {
		list_commands(want ? stdout : stderr, group, table);
		if (!want)
			fprintf(stderr, "husk: give a %s command\n", group ? group : "husk");
		return want ? 0 : EXIT_USAGE;
	}
	for (const struct subcmd *t = table; t->names; t++) {
		if (cli_name_is(t->names, want)) {
			snprintf(name, sizeof(name), "husk%s%s %.*s", group ? " " : "",
			         group ? group : "", (int)strcspn(t->names, "|"), t->names);
			c->cmd = name;
			return t->fn(c, argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "husk: unknown %s%scommand '%s'\n", group ? group : "", group ? " " : "",
	        want);
	list_commands(stderr, group, table);
	return EXIT_USAGE;
}

static const struct subcmd commands[] = {
	{"run", run_run, "one-shot: run a command in a new sandbox, stream its output"},
	{"create|new", create_main, "create an interactive sandbox; prints its id"},
	{"exec", run_exec, "run a command in a sandbox: husk exec ID -- CMD..."},
	{"list|ls", sandbox_list, "list sandboxes"},
	{"get|show|info", sandbox_get, "show one sandbox"},
	{"ssh|shell", sandbox_shell, "a terminal in a sandbox: husk ssh ID [-- CMD]"},
	{"delete|rm|del|remove|destroy|terminate", sandbox_delete, "destroy a sandbox"},
	{"pause|hibernate", sandbox_pause, "pause a sandbox"},
	{"resume|wake", sandbox_resume, "resume a paused sandbox"},
	{"fs|files|file", fs_main, "files: cp, ls, mkdir, rm, rmdir, download, upload"},
	{"snapshot|snap", snap_main, "snapshots: create, list, get, tag, delete, build, generate"},
	{"checkpoint|ckpt", snap_checkpoint, "checkpoints: create, list, restore, delete"},
	{"execution", sandbox_execution, "executions: list ID, get EXEC_ID"},
	{"events", sandbox_events, "a sandbox's lifecycle events"},
	{"runtime|rt", sandbox_runtime, "runtimes: list, import, delete"},
	{"env", sandbox_env, "set or delete environment variables: husk env ID K=V -d K"},
	{"job", job_main, "background jobs: create, list, get, destroy"},
	{"stats", sandbox_stats, "usage statistics"},
	{"key", key_main, "API keys and orgs: create, list, revoke, whoami"},
	{"audit", audit_main, "the org's audit trail: list, verify"},
	{NULL, NULL, NULL},
};

static void on_sigint(int sig)
{
	(void)sig;
	cli_interrupted = 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: waits see EINTR */
	struct cli c = {0};
	int i = 1, rc;

	sigaction(SIGINT, &sa, NULL);
	/* Global options may come first too: husk --url U list. */
	while (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--help") &&
	       strcmp(argv[i], "-h")) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			c.json = true;
		} else if ((!strcmp(a, "--url") || !strcmp(a, "--api-key") ||
		            !strcmp(a, "--org-id")) &&
		           i + 1 < argc) {
			*(a[2] == 'u'   ? &c.url_text
			  : a[2] == 'a' ? &c.key_opt
			                : &c.org_id) = argv[++i];
		} else if (!strncmp(a, "--org-id=", 9)) {
			c.org_id = a + 9;
		} else if (!strncmp(a, "--url=", 6)) {
			c.url_text = a + 6;
		} else if (!strncmp(a, "--api-key=", 10)) {
			c.key_opt = a + 10;
		} else {
			c.cmd = "husk";
			return args_bad(&c,
			                "unknown option '%s' (a command comes first: husk COMMAND "
			                "[OPTIONS])",
			                a);
		}
		i++;
	}
	/* "husk sandbox list" and "husk sb list" as in the reference CLI. */
	if (i < argc && (!strcmp(argv[i], "sandbox") || !strcmp(argv[i], "sb")))
		i++;
	rc = cli_subcommand(&c, NULL, commands, argc - i + 1, argv + i - 1);
	free(c.key);
	return rc;
}
