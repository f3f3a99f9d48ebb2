// SPDX-License-Identifier: MIT
/* husk job: background processes beside the sandbox's executions (API.md §5.4). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const struct col job_fields[] = {{"id", "jobId"},
                                        {"sandbox", "sandboxId"},
                                        {"status", "status"},
                                        {"command", "command"},
                                        {"exit code", "exitCode"},
                                        {"started", "startedAt"},
                                        {"completed", "completedAt"},
                                        {"error", "error"},
                                        {"stdout", "stdoutStreamUrl"},
                                        {"stderr", "stderrStreamUrl"},
                                        {NULL, NULL}};

/* /sandbox/sandboxes/ID/jobs[/JOB] */
static void job_path(struct sbuf *t, const char *id, const char *job)
{
	sandbox_path(t, "/sandbox/sandboxes", id, "/jobs");
	if (job)
		sb_seg(t, job);
}

static int job_create(struct cli *c, int argc, char **argv)
{
	json_t *cmd = NULL, *body, *env = NULL;
	struct sbuf t = {0};
	char id[256];
	struct args a;
	int rc;

	c->usage = "husk job create ID [--json] -- CMD [ARGS...]\n"
		   "Starts CMD in the background and prints the job id.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ID [CMD...]", &a));
	cmd = run_command_of(c, &a, 1);
	if (!cmd)
		return EXIT_USAGE;
	body = json_pack("{so}", "command", cmd);
	job_path(&t, a.pos[0], NULL);
	rc = cli_call(c, "POST", t.s, body, &env);
	if (!rc && c->json)
		out_data(env);
	else if (!rc)
		printf("%s\n", out_cell(json_object_get(env, "data"), "jobId", id, sizeof(id)));
	json_decref(body);
	json_decref(env);
	sb_free(&t);
	return rc;
}

static int job_list(struct cli *c, int argc, char **argv)
{
	static const struct col cols[] = {{"ID", "jobId"},        {"STATUS", "status"},
	                                  {"EXIT", "exitCode"},   {"STARTED", "startedAt"},
	                                  {"COMMAND", "command"}, {NULL, NULL}};
	const char *limit = NULL;
	const struct opt opts[] = {{"limit", 'n', OPT_STR, &limit}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	long n;
	int rc;

	c->usage = "husk job list ID [--limit N] [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID", &a));
	job_path(&t, a.pos[0], NULL);
	rc = limit ? args_uint(c, "limit", limit, 1000, &n) : 0;
	sb_query(&t, "limit", limit);
	if (!rc)
		rc = cli_show(c, "GET", t.s, NULL, "jobs", cols);
	sb_free(&t);
	return rc;
}

static int job_get(struct cli *c, int argc, char **argv)
{
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk job get ID JOB_ID [--json]\n"
		   "Status, exit code, times and the output stream URLs of a job.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ID JOB_ID", &a));
	job_path(&t, a.pos[0], a.pos[1]);
	rc = cli_show(c, "GET", t.s, NULL, NULL, job_fields);
	sb_free(&t);
	return rc;
}

static int job_destroy(struct cli *c, int argc, char **argv)
{
	bool force = false;
	const struct opt opts[] = {{"force", 0, OPT_FLAG, &force}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk job destroy ID JOB_ID [--force] [--json]\n"
		   "Stops a job: SIGTERM, then SIGKILL after a grace period; --force kills at "
		   "once.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID JOB_ID", &a));
	job_path(&t, a.pos[0], a.pos[1]);
	if (force)
		sb_query(&t, "force", "true");
	rc = cli_show(c, "DELETE", t.s, NULL, NULL, job_fields);
	sb_free(&t);
	return rc;
}

int job_main(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"create|new|start", job_create, "start a background command: create ID -- CMD..."},
		{"list|ls", job_list, "the jobs of a sandbox: list ID [--limit N]"},
		{"get|show|info", job_get, "one job: get ID JOB_ID"},
		{"destroy|stop|kill|delete|rm", job_destroy,
	         "stop a job: destroy ID JOB_ID [--force]"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "job", table, argc, argv);
}
