// SPDX-License-Identifier: MIT
/*
 * Commands about sandboxes that exist: list, get, delete, pause, resume,
 * events, env, executions; and runtimes and stats. Each is one request
 * (API.md §5) and its answer as a table, as fields, or as JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *const directions[] = {"asc", "desc", NULL};

void sandbox_path(struct sbuf *t, const char *pre, const char *id, const char *suffix)
{
	sb_printf(t, "%s", pre);
	sb_seg(t, id);
	sb_printf(t, "%s", suffix ? suffix : "");
}

/* --limit/--offset checked and added to the query. 0 or EXIT_USAGE. */
static int paging(struct cli *c, struct sbuf *t, const char *limit, const char *offset,
                  long max_limit)
{
	long n;
	int rc = 0;

	if (limit && !(rc = args_uint(c, "limit", limit, max_limit, &n)))
		sb_query(t, "limit", limit);
	if (!rc && offset && !(rc = args_uint(c, "offset", offset, 1000000000, &n)))
		sb_query(t, "offset", offset);
	return rc;
}

int sandbox_list(struct cli *c, int argc, char **argv)
{
	static const char *const statuses[] = {"creating", "idle",      "running",    "paused",
	                                       "stopping", "suspended", "terminated", "failed",
	                                       "deleted",  NULL};
	static const char *const modes[] = {"oneshot", "interactive", NULL};
	static const char *const sorts[] = {"name", "created",         "updated", "status",
	                                    "mode", "execution_count", NULL};
	static const struct col cols[] = {{"ID", "sandboxId"},         {"NAME", "name"},
	                                  {"STATUS", "status"},        {"MODE", "mode"},
	                                  {"RUNTIME", "runtime.name"}, {"EXECS", "executions"},
	                                  {"CREATED", "createdAt"},    {NULL, NULL}};
	const char *status = NULL, *name = NULL, *mode = NULL, *limit = NULL, *offset = NULL,
		   *sort = NULL, *dir = NULL, *project = NULL;
	bool all = false;
	const struct opt opts[] = {
		{"status", 0, OPT_STR, &status}, {"name", 0, OPT_STR, &name},
		{"mode", 0, OPT_STR, &mode},     {"limit", 0, OPT_STR, &limit},
		{"offset", 0, OPT_STR, &offset}, {"sort", 0, OPT_STR, &sort},
		{"direction", 0, OPT_STR, &dir}, {"project-id", 0, OPT_STR, &project},
		{"all", 0, OPT_FLAG, &all},      {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	json_t *env = NULL, *data;
	struct args a;
	int rc;

	c->usage = "husk list [--status S] [--name N] [--mode oneshot|interactive] [--limit N]\n"
		   "          [--offset N] [--sort name|created|updated|status|mode|"
		   "execution_count]\n"
		   "          [--direction asc|desc] [--project-id ID | --all] [--json]\n"
		   "Lists the org's sandboxes; with --project-id only that project's. --all\n"
		   "lists them all, which is what husk does without --project-id anyway.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	sb_printf(&t, "/sandbox");
	rc = status ? args_enum(c, "status", status, statuses) : 0;
	if (!rc && all && project)
		rc = args_bad(c,
		              "--all lists every project's sandboxes: drop --project-id or --all");
	if (!rc && mode)
		rc = args_enum(c, "mode", mode, modes);
	if (!rc && sort)
		rc = args_enum(c, "sort", sort, sorts);
	if (!rc && dir)
		rc = args_enum(c, "direction", dir, directions);
	if (!rc)
		rc = paging(c, &t, limit, offset, 100);
	sb_query(&t, "status", status);
	sb_query(&t, "name", name);
	sb_query(&t, "mode", mode);
	sb_query(&t, "sort", sort);
	sb_query(&t, "direction", dir);
	sb_query(&t, "projectId", project);
	if (!rc)
		rc = cli_call(c, "GET", t.s, NULL, &env);
	if (!rc && c->json) {
		out_data(env);
	} else if (!rc) {
		data = json_object_get(env, "data");
		out_table(json_object_get(data, "sandboxes"), cols);
		if (json_array_size(json_object_get(data, "sandboxes")))
			printf("%zu of %lld\n", json_array_size(json_object_get(data, "sandboxes")),
			       (long long)json_integer_value(json_object_get(data, "total")));
	}
	json_decref(env);
	sb_free(&t);
	return rc;
}

int sandbox_get(struct cli *c, int argc, char **argv)
{
	static const struct col fields[] = {{"id", "sandboxId"},
	                                    {"name", "name"},
	                                    {"description", "description"},
	                                    {"status", "status"},
	                                    {"mode", "mode"},
	                                    {"runtime", "runtime.name"},
	                                    {"created", "createdAt"},
	                                    {"executions", "executions"},
	                                    {"exit code", "exitCode"},
	                                    {"memory", "resources.memory"},
	                                    {"cpu", "resources.cpu"},
	                                    {"disk", "resources.disk"},
	                                    {"network", "networkEnabled"},
	                                    {"port", "networkPort"},
	                                    {"url", "url"},
	                                    {"egress bytes", "networkEgressBytes"},
	                                    {"idle timeout", "timeout.idle"},
	                                    {"exec timeout", "timeout.execution"},
	                                    {"command", "command.exec"},
	                                    {"dependencies", "dependencies"},
	                                    {"metadata", "metadata"},
	                                    {"cpu time ms", "cpuTimeMs"},
	                                    {"region", "region"},
	                                    {NULL, NULL}};
	c->usage = "husk get ID [--json]\nShows a sandbox: status, runtime, resources, "
		   "executions; a deleted one too, as the reference CLI does.\n";
	return cli_show_id(c, argc, argv, "ID", "/sandbox", "?includeDeleted=true", NULL, fields);
}

int sandbox_delete_confirmed(struct cli *c, const char *target, const char *what, bool confirmed,
                             const char *done)
{
	char line[16];

	if (!confirmed && isatty(0)) {
		fprintf(stderr, "%s? [y/N] ", what);
		if (!fgets(line, sizeof(line), stdin) || (line[0] != 'y' && line[0] != 'Y')) {
			fprintf(stderr, "husk: not deleted\n");
			return 1;
		}
	}
	return cli_act(c, "DELETE", target, NULL, done);
}

int delete_one(struct cli *c, int argc, char **argv, const char *pre, const char *noun)
{
	bool confirm = false;
	const struct opt opts[] = {{"confirm", 'y', OPT_FLAG, &confirm}, {NULL, 0, 0, NULL}};
	char what[256], done[256];
	struct sbuf t = {0};
	struct args a;
	int rc;

	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID", &a));
	snprintf(what, sizeof(what), "Delete %s %s", noun, a.pos[0]);
	snprintf(done, sizeof(done), "deleted %s", a.pos[0]);
	sandbox_path(&t, pre, a.pos[0], NULL);
	rc = sandbox_delete_confirmed(c, t.s, what, confirm, done);
	sb_free(&t);
	return rc;
}

int sandbox_delete(struct cli *c, int argc, char **argv)
{
	c->usage = "husk delete ID [--confirm] [--json]\nDestroys the sandbox (asks first on a "
		   "terminal unless --confirm).\n";
	return delete_one(c, argc, argv, "/sandbox", "sandbox");
}

/* pause and resume: a bodiless POST. */
static int post_state(struct cli *c, int argc, char **argv, const char *verb, const char *done)
{
	struct sbuf t = {0};
	char line[256];
	struct args a;
	int rc;

	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ID", &a));
	sandbox_path(&t, "/sandbox", a.pos[0], verb);
	snprintf(line, sizeof(line), "%s %s", done, a.pos[0]);
	rc = cli_act(c, "POST", t.s, NULL, line);
	sb_free(&t);
	return rc;
}

int sandbox_pause(struct cli *c, int argc, char **argv)
{
	c->usage = "husk pause ID [--json]\nPauses a sandbox; its files are kept.\n";
	return post_state(c, argc, argv, "/pause", "paused");
}

int sandbox_resume(struct cli *c, int argc, char **argv)
{
	c->usage = "husk resume ID [--json]\nResumes a paused sandbox.\n";
	return post_state(c, argc, argv, "/resume", "resumed");
}

int sandbox_events(struct cli *c, int argc, char **argv)
{
	static const struct col cols[] = {
		{"TIME", "createdAt"}, {"TYPE", "type"}, {"EVENT", "event"}, {NULL, NULL}};
	const char *limit = NULL;
	bool reverse = false;
	const struct opt opts[] = {{"limit", 'n', OPT_STR, &limit},
	                           {"reverse", 'r', OPT_FLAG, &reverse},
	                           {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk events ID [--limit N] [--reverse] [--json]\n"
		   "Lifecycle events, oldest first (--reverse: newest first); at most 100.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID", &a));
	sandbox_path(&t, "/sandbox/sandboxes", a.pos[0], "/events");
	rc = paging(c, &t, limit, NULL, 100);
	sb_query(&t, "direction", reverse ? "desc" : "asc");
	if (!rc)
		rc = cli_show(c, "GET", t.s, NULL, "events", cols);
	sb_free(&t);
	return rc;
}

int sandbox_env(struct cli *c, int argc, char **argv)
{
	struct strlist del = {0};
	const struct opt opts[] = {{"delete", 'd', OPT_LIST, &del}, {NULL, 0, 0, NULL}};
	json_t *vars = json_object(), *env = NULL, *v;
	struct sbuf t = {0};
	const char *k;
	struct args a;
	int rc;

	c->usage = "husk env ID [KEY=VALUE...] [--delete|-d KEY]... [--json]\n"
		   "Sets and deletes environment variables of later commands; prints them all.\n";
	rc = args_parse(c, argc, argv, opts, "ID [KEY=VALUE...]", &a);
	for (int i = 1; !rc && i < a.npos; i++)
		rc = args_keyval(c, "env", a.pos[i], vars);
	for (int i = 0; !rc && i < del.n; i++)
		if (!del.v[i][0] || json_object_set_new(vars, del.v[i], json_null()))
			rc = args_bad(c, "--delete '%s' is not a variable name", del.v[i]);
	if (!rc) {
		json_t *body = json_pack("{sO}", "env", vars);

		sandbox_path(&t, "/sandbox/env", a.pos[0], NULL);
		rc = cli_call(c, "PATCH", t.s, body, &env);
		json_decref(body);
	}
	if (!rc && c->json) {
		out_data(env);
	} else if (!rc) {
		json_object_foreach(json_object_get(json_object_get(env, "data"), "env"), k, v)
			printf("%s=%s\n", k, json_string_value(v) ? json_string_value(v) : "");
	}
	free(del.v);
	json_decref(vars);
	json_decref(env);
	sb_free(&t);
	return rc < 0 ? 0 : rc;
}

int sandbox_stats(struct cli *c, int argc, char **argv)
{
	static const struct col fields[] = {{"active", "totalActive"},
	                                    {"running", "running"},
	                                    {"idle", "idle"},
	                                    {"creating", "creating"},
	                                    {"executions", "totalExecutions"},
	                                    {"cpu time ms", "totalCpuTimeMs"},
	                                    {"memory byte-sec", "totalMemoryByteSec"},
	                                    {"network egress bytes", "totalNetworkEgressBytes"},
	                                    {NULL, NULL}};
	const char *start = NULL, *end = NULL, *org;
	const struct opt opts[] = {
		{"start", 0, OPT_STR, &start}, {"end", 0, OPT_STR, &end}, {NULL, 0, 0, NULL}};
	json_t *env = NULL, *sb;
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk stats [--start ISO8601] [--end ISO8601] [--json]\n"
		   "Usage statistics of the sandboxes (GET /services/stats, API.md §5.12).\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	/* The stats are of the key's org: ask which that is. */
	rc = cli_call(c, "GET", "/whoami", NULL, &env);
	if (rc)
		return rc;
	org = json_string_value(json_object_get(json_object_get(env, "data"), "orgId"));
	sandbox_path(&t, "/services/stats", org ? org : "-", NULL);
	json_decref(env);
	env = NULL;
	sb_query(&t, "service", "sandbox");
	sb_query(&t, "start", start);
	sb_query(&t, "end", end);
	rc = cli_call(c, "GET", t.s, NULL, &env);
	sb = json_object_get(json_object_get(json_object_get(env, "data"), "services"), "sandbox");
	if (!rc && (c->json || !sb))
		out_data(env);
	else if (!rc)
		out_fields(sb, fields);
	json_decref(env);
	sb_free(&t);
	return rc;
}

static int execution_list(struct cli *c, int argc, char **argv)
{
	static const struct col cols[] = {
		{"ID", "executionId"}, {"STATUS", "status"},     {"EXIT", "exitCode"},
		{"MS", "durationMs"},  {"STARTED", "startedAt"}, {"COMMAND", "command"},
		{NULL, NULL}};
	const char *limit = NULL;
	const struct opt opts[] = {{"limit", 'n', OPT_STR, &limit}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk execution list ID [--limit N] [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID", &a));
	sandbox_path(&t, "/sandbox/sandboxes", a.pos[0], "/executions");
	rc = paging(c, &t, limit, NULL, 1000);
	if (!rc)
		rc = cli_show(c, "GET", t.s, NULL, "executions", cols);
	sb_free(&t);
	return rc;
}

static int execution_get(struct cli *c, int argc, char **argv)
{
	static const struct col fields[] = {{"id", "executionId"},
	                                    {"sandbox", "sandboxId"},
	                                    {"status", "status"},
	                                    {"command", "command"},
	                                    {"exit code", "exitCode"},
	                                    {"duration ms", "durationMs"},
	                                    {"started", "startedAt"},
	                                    {"completed", "completedAt"},
	                                    {"error", "error"},
	                                    {"stdout", "stdoutStreamUrl"},
	                                    {"stderr", "stderrStreamUrl"},
	                                    {"truncated", "outputTruncated"},
	                                    {NULL, NULL}};
	c->usage = "husk execution get EXEC_ID [--json]\nCommand, exit code, duration and "
		   "stream URLs.\n";
	return cli_show_id(c, argc, argv, "EXEC_ID", "/sandbox/execution", NULL, NULL, fields);
}

int sandbox_execution(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"list|ls", execution_list, "the executions of a sandbox: list ID [--limit N]"},
		{"get|show|info", execution_get, "one execution: get EXEC_ID"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "execution", table, argc, argv);
}

static int runtime_list(struct cli *c, int argc, char **argv)
{
	static const char *const sorts[] = {"name", "created", NULL};
	static const struct col cols[] = {{"NAME", "name"},
	                                  {"ID", "id"},
	                                  {"DESCRIPTION", "description"},
	                                  {"TAGS", "tags"},
	                                  {NULL, NULL}};
	const char *limit = NULL, *offset = NULL, *sort = NULL, *dir = NULL;
	const struct opt opts[] = {{"limit", 'n', OPT_STR, &limit},
	                           {"offset", 0, OPT_STR, &offset},
	                           {"sort", 0, OPT_STR, &sort},
	                           {"direction", 0, OPT_STR, &dir},
	                           {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk runtime list [--limit N] [--offset N] [--sort name|created] "
		   "[--direction asc|desc] [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	sb_printf(&t, "/sandbox/runtimes");
	rc = paging(c, &t, limit, offset, 100);
	if (!rc && sort && !(rc = args_enum(c, "sort", sort, sorts)))
		sb_query(&t, "sort", sort);
	if (!rc && dir && !(rc = args_enum(c, "direction", dir, directions)))
		sb_query(&t, "direction", dir);
	if (!rc)
		rc = cli_show(c, "GET", t.s, NULL, "runtimes", cols);
	sb_free(&t);
	return rc;
}

int sandbox_runtime(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"list|ls", runtime_list, "the runtimes sandboxes can start from"},
		{"import", runtime_import, "an OCI or Docker image as a runtime: NAME SOURCE"},
		{"delete|rm", runtime_delete, "delete an imported runtime"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "runtime", table, argc, argv);
}
