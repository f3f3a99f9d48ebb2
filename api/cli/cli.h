/* SPDX-License-Identifier: MIT */
#ifndef HUSK_CLI_H
#define HUSK_CLI_H

/*
 * The husk CLI: shared state, argument parsing, requests to huskd and
 * output. Every command is `int cmd(struct cli *c, int argc, char **argv)`
 * with argv[0] its own name, returning the process's exit status:
 * 0 done, 1 huskd (or the command in the sandbox) failed, 2 bad usage.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli_http.h"

#define EXIT_USAGE 2

struct cli {
	const char *url_text; /* --url, HUSK_URL, or the default */
	const char *key_opt;  /* --api-key */
	const char *org_id;   /* --org-id: sent as orgId with every request (huskd checks it) */
	char *key;            /* the key in use, or NULL */
	struct cli_url url;
	bool json, help;
	const char *cmd;   /* "husk fs cp": for messages */
	const char *usage; /* the running command's usage text */
};

/* ---- Arguments (cli_args.c) ---------------------------------------------- */

enum opt_kind { OPT_FLAG, OPT_STR, OPT_LIST };

struct strlist {
	const char **v;
	int n;
};

/* One option of a command: --name or -s; dst is a bool, a const char * or a strlist. */
struct opt {
	const char *name;
	char shrt;
	enum opt_kind kind;
	void *dst;
};

#define ARGS_MAX_POS 64

struct args {
	const char *pos[ARGS_MAX_POS];
	int npos;
	char **cmd; /* after "--"; NULL without it */
	int ncmd;
};

/*
 * Parses argv[1..] against opts (ending with {NULL}) plus the global ones
 * (--url, --api-key, --json, --help), then resolves the URL and key. spec
 * names the positionals, e.g. "ID [PATH]" or "ID [K=V...]": missing or extra
 * ones are usage errors. Returns 0, -1 after printing help (exit 0), or
 * EXIT_USAGE after saying what is wrong.
 */
int args_parse(struct cli *c, int argc, char **argv, const struct opt *opts, const char *spec,
               struct args *a) __attribute__((warn_unused_result));
/* Turns args_parse's -1 into exit status 0. */
#define ARGS_OR_RETURN(call)                                \
	do {                                                \
		int args_rc_ = (call);                      \
		if (args_rc_)                               \
			return args_rc_ < 0 ? 0 : args_rc_; \
	} while (0)
/* Prints "husk: <why>" and the usage; returns EXIT_USAGE. */
int args_bad(struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Checks a duration (30s, 5m, 1h, 1m30s, 250ms, 0) for option name. 0 or EXIT_USAGE. */
int args_duration(struct cli *c, const char *name, const char *v);
/* The same, and its length in milliseconds into *ms. */
int args_duration_ms(struct cli *c, const char *name, const char *v, long long *ms);
/* Checks a size (512Mi, 1Gi, 1G, 1048576). 0 or EXIT_USAGE. */
int args_size(struct cli *c, const char *name, const char *v);
/* Checks CPU as millicores (500m) or cores (1, 0.5). 0 or EXIT_USAGE. */
int args_cpu(struct cli *c, const char *name, const char *v);
/* A non-negative integer within max into *out. 0 or EXIT_USAGE. */
int args_uint(struct cli *c, const char *name, const char *v, long max, long *out);
/* Is v one of the NULL-terminated list? Else a usage error naming them. 0 or EXIT_USAGE. */
int args_enum(struct cli *c, const char *name, const char *v, const char *const *list);
/* KEY=VALUE into a JSON object (for --env and env). 0 or EXIT_USAGE. */
int args_keyval(struct cli *c, const char *name, const char *kv, json_t *obj);

/* ---- Requests (cli.c) ----------------------------------------------------- */

/* A growing string for request targets; out of memory ends the process. */
struct sbuf {
	char *s;
	size_t len, cap;
};
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends len bytes (which may hold NULs); b->s stays NUL-terminated. */
void sb_append(struct sbuf *b, const void *data, size_t len);
/* Appends s percent-encoded as one path segment. */
void sb_seg(struct sbuf *b, const char *s);
/* Appends ?key=value or &key=value (value encoded); skips a NULL value. */
void sb_query(struct sbuf *b, const char *key, const char *value);
void sb_free(struct sbuf *b);

/*
 * A JSON request (body may be NULL; it is not consumed). On a 2xx JSON
 * answer *out (if not NULL) gets the whole envelope and it returns 0;
 * otherwise it prints why ("husk: <message> (<code>)", or that huskd cannot
 * be reached) and returns 1.
 */
int cli_call(struct cli *c, const char *method, const char *target, json_t *body, json_t **out);
/*
 * A request with a raw body or answer: body/len sent as ctype; a 2xx
 * answer's bytes go to fn (or, with fn NULL, stay in resp). Errors printed
 * as cli_call; returns 0 or 1. timeout_ms 0: no limit on silence.
 */
int cli_raw(struct cli *c, const char *method, const char *target, const char *ctype,
            const void *body, size_t len, cli_body_fn fn, void *arg, int timeout_ms,
            struct cli_resp *resp);
/* Prints huskd's error from a non-2xx answer; returns 1. */
int cli_print_error(const struct cli_resp *r);
/* Prints "husk: cannot reach huskd at URL: why (start it ...)" or the failure; returns 1. */
int cli_print_failure(struct cli *c, const struct cli_resp *r);
struct col;
/*
 * cli_call, then prints the answer: --json its data; else data[list_key] as
 * a table of cols, or without list_key data's fields. Returns 0 or 1.
 */
int cli_show(struct cli *c, const char *method, const char *target, json_t *body,
             const char *list_key, const struct col *cols);
/* cli_call; then --json prints the answer, else the line done (if not NULL). 0 or 1. */
int cli_act(struct cli *c, const char *method, const char *target, json_t *body, const char *done);
/*
 * A command that is one GET about one id (spec names it, e.g. "ID"): the
 * path pre/ID/suffix, shown as cli_show does. The exit status.
 */
int cli_show_id(struct cli *c, int argc, char **argv, const char *spec, const char *pre,
                const char *suffix, const char *list_key, const struct col *cols);
/* Standard base64 with padding of len bytes (malloc'd). */
char *cli_base64(const void *data, size_t len);
/*
 * A local file read whole (up to 128 MiB): 0 or -errno (-EISDIR, -EFBIG).
 * Free *data; it has room for a NUL after *len bytes.
 */
int cli_read_file(const char *path, char **data, size_t *len) __attribute__((warn_unused_result));
/* Set by SIGINT: long waits stop and clean up. */
extern volatile int cli_interrupted;

/* ---- Output (cli_out.c) --------------------------------------------------- */

/* A table column or a field line: title and the key in each object ("a.b" reaches in). */
struct col {
	const char *title;
	const char *key;
};
/* Prints j as indented JSON and a newline. */
void out_json(json_t *j);
/* --json: the envelope's data, or its other fields when it has none. Returns 0. */
int out_data(json_t *envelope);
/* Prints rows (an array of objects) as a table with a header line; "(none)" if empty. */
void out_table(json_t *rows, const struct col *cols);
/* Prints "title: value" lines for the fields present in obj. */
void out_fields(json_t *obj, const struct col *fields);
/* obj's value at key as text (strings bare, arrays space-joined); "" if absent. */
const char *out_cell(json_t *obj, const char *key, char *buf, size_t len);
/* A JSON string of bytes that may not be UTF-8 (invalid bytes become U+FFFD). */
json_t *out_string_bytes(const char *s, size_t len);
/* Bytes as 1.5 KiB, 3.0 MiB. */
const char *out_bytes(double n, char *buf, size_t len);

/* ---- Commands --------------------------------------------------------------- */

/* pre, then id as one path segment, then suffix (may be NULL): "/sandbox" "/ID" "/pause". */
void sandbox_path(struct sbuf *t, const char *pre, const char *id, const char *suffix);
/*
 * DELETE target after asking "what? [y/N]" on a terminal (not with --confirm,
 * nor without a terminal); prints done. The exit status.
 */
int sandbox_delete_confirmed(struct cli *c, const char *target, const char *what, bool confirmed,
                             const char *done);
/* DELETE pre/ID for a command "... ID [--confirm]" (asks first, as sandbox_delete_confirmed). */
int delete_one(struct cli *c, int argc, char **argv, const char *pre, const char *noun);
/* husk key ... (cli_key.c). */
int key_main(struct cli *c, int argc, char **argv);
/* husk audit ... (cli_audit.c). */
int audit_main(struct cli *c, int argc, char **argv);
/* husk runtime import / delete (cli_runtime.c). */
int runtime_import(struct cli *c, int argc, char **argv);
int runtime_delete(struct cli *c, int argc, char **argv);
/* The command after "--" as a JSON array, or NULL after a usage error (cli_run.c). */
json_t *run_command_of(struct cli *c, const struct args *a, int npos_before);

/* The options run and create share (the reference CLI's resource flags). */
struct sbx_opts {
	const char *runtime, *runtime_id, *memory, *cpu, *disk, *timeout, *snapshot, *name,
		*description, *idle, *paused, *metadata, *port, *project, *egress_rate;
	bool network, quiet, url_token, all_ports;
	struct strlist env, files, deps, scopes, allow, deny;
};

/* One table of options, not an expression. */
// clang-format off
#define SBX_OPTS(o)                                                                               \
	{"runtime", 0, OPT_STR, &(o).runtime}, {"runtime-id", 0, OPT_STR, &(o).runtime_id},       \
	{"memory", 0, OPT_STR, &(o).memory}, {"cpu", 0, OPT_STR, &(o).cpu},                       \
	{"disk", 0, OPT_STR, &(o).disk}, {"network", 0, OPT_FLAG, &(o).network},                  \
	{"timeout", 0, OPT_STR, &(o).timeout}, {"env", 'e', OPT_LIST, &(o).env},                  \
	{"file", 'f', OPT_LIST, &(o).files}, {"snapshot", 0, OPT_STR, &(o).snapshot},             \
	{"dependency", 0, OPT_LIST, &(o).deps}, {"scope", 0, OPT_LIST, &(o).scopes},              \
	{"project-id", 0, OPT_STR, &(o).project}, {"allow-host", 0, OPT_LIST, &(o).allow},        \
	{"deny-host", 0, OPT_LIST, &(o).deny}
// clang-format on

/* The POST /sandbox body from o (cli_create.c): 0, or EXIT_USAGE after saying what is wrong. */
int create_body(struct cli *c, struct sbx_opts *o, json_t *body);
void create_opts_free(struct sbx_opts *o);

int run_run(struct cli *c, int argc, char **argv);
int run_exec(struct cli *c, int argc, char **argv);
int create_main(struct cli *c, int argc, char **argv);
int sandbox_list(struct cli *c, int argc, char **argv);
int sandbox_get(struct cli *c, int argc, char **argv);
/* husk ssh / husk shell (cli_shell.c). */
int sandbox_shell(struct cli *c, int argc, char **argv);
int sandbox_delete(struct cli *c, int argc, char **argv);
int sandbox_pause(struct cli *c, int argc, char **argv);
int sandbox_resume(struct cli *c, int argc, char **argv);
int sandbox_events(struct cli *c, int argc, char **argv);
int sandbox_env(struct cli *c, int argc, char **argv);
int sandbox_stats(struct cli *c, int argc, char **argv);
int sandbox_execution(struct cli *c, int argc, char **argv);
int sandbox_runtime(struct cli *c, int argc, char **argv);
int fs_main(struct cli *c, int argc, char **argv);
int job_main(struct cli *c, int argc, char **argv);
int snap_main(struct cli *c, int argc, char **argv);
int snap_build(struct cli *c, int argc, char **argv);
int fs_cp(struct cli *c, int argc, char **argv);
/* A cli_body_fn writing to the fd at *(int *)arg. */
int fs_write_fd(void *arg, const void *data, size_t len);
/* The temporary file a download is being written to, or NULL: removed if husk is cut short. */
extern const char *volatile cli_partial_file;
/* GET target into the file out (through a temporary beside it): 0 or 1 (printed). */
int fs_get_to_file(struct cli *c, const char *target, const char *out, size_t *bytes);
/* Runs tar with argv; stdin from in_fd and stdout to out_fd (-1: ours). Its exit status or -errno.
 */
int fs_tar(char *const argv[], int in_fd, int out_fd);
int snap_checkpoint(struct cli *c, int argc, char **argv);

/* A subcommand table: names separated by '|' (the first is the real one). */
struct subcmd {
	const char *names;
	int (*fn)(struct cli *c, int argc, char **argv);
	const char *usage;
};
/*
 * Runs the subcommand argv[1] of group (e.g. "fs") from table, or prints
 * the group's usage (exit 0 for --help, EXIT_USAGE for a missing/unknown one).
 */
int cli_subcommand(struct cli *c, const char *group, const struct subcmd *table, int argc,
                   char **argv);
/* Does name match one of the '|'-separated names? */
bool cli_name_is(const char *names, const char *name);

#endif
