// SPDX-License-Identifier: MIT
/*
 * husk snapshot and husk checkpoint (API.md §5.7, §5.8, §7.5, §7.6). Each
 * sends the documented request; huskd answers 501 for what it does not do
 * yet, and that message is what the user sees.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_snap.h"

const struct col snap_fields[] = {{"id", "snapshotId"},           {"name", "name"},
                                  {"full name", "fullName"},      {"tag", "tag"},
                                  {"description", "description"}, {"size bytes", "sizeBytes"},
                                  {"files", "fileCount"},         {"runtime", "runtimeId"},
                                  {"parent", "parentSnapshotId"}, {"public", "public"},
                                  {"created", "createdAt"},       {NULL, NULL}};

static const struct col ckpt_cols[] = {{"ID", "id"},
                                       {"NAME", "name"},
                                       {"PARENT", "parent"},
                                       {"CREATED", "createdAt"},
                                       {NULL, NULL}};

static int snap_create(struct cli *c, int argc, char **argv)
{
	const char *name = NULL, *desc = NULL, *tag = NULL;
	bool pub = false, no_mem = false;
	const struct opt opts[] = {
		{"name", 0, OPT_STR, &name},        {"no-memory", 0, OPT_FLAG, &no_mem},
		{"description", 0, OPT_STR, &desc}, {"tag", 0, OPT_STR, &tag},
		{"public", 0, OPT_FLAG, &pub},      {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	json_t *body;
	struct args a;
	int rc;

	c->usage = "husk snapshot create ID [--name N] [--description D] [--tag T] [--public] "
		   "[--no-memory] [--json]\n"
		   "  --no-memory  only the disk: sandboxes from it boot instead of resuming\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID", &a));
	body = json_pack("{s:s?,s:s?,s:s?}", "name", name, "description", desc, "tag", tag);
	if (!body)
		return args_bad(c, "--name, --description and --tag must be valid UTF-8");
	if (pub)
		json_object_set_new(body, "public", json_true());
	if (no_mem)
		json_object_set_new(body, "memory", json_false());
	sandbox_path(&t, "/sandbox", a.pos[0], "/snapshot");
	rc = cli_show(c, "POST", t.s, body, NULL, snap_fields);
	json_decref(body);
	sb_free(&t);
	return rc;
}

static int snap_list(struct cli *c, int argc, char **argv)
{
	static const char *const sorts[] = {"name", "created", "size", "files", NULL};
	static const char *const dirs[] = {"asc", "desc", NULL};
	static const struct col cols[] = {
		{"ID", "snapshotId"},  {"NAME", "name"},       {"TAG", "tag"},
		{"SIZE", "sizeBytes"}, {"FILES", "fileCount"}, {"CREATED", "createdAt"},
		{NULL, NULL}};
	const char *sandbox = NULL, *limit = NULL, *offset = NULL, *sort = NULL, *dir = NULL;
	const struct opt opts[] = {
		{"sandbox", 0, OPT_STR, &sandbox}, {"limit", 'n', OPT_STR, &limit},
		{"offset", 0, OPT_STR, &offset},   {"sort", 0, OPT_STR, &sort},
		{"direction", 0, OPT_STR, &dir},   {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	long n;
	int rc;

	c->usage = "husk snapshot list [--sandbox ID] [--limit N] [--offset N]\n"
		   "                   [--sort name|created|size|files] [--direction asc|desc] "
		   "[--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	rc = limit ? args_uint(c, "limit", limit, 100, &n) : 0;
	if (!rc && offset)
		rc = args_uint(c, "offset", offset, 1000000000, &n);
	if (!rc && sort)
		rc = args_enum(c, "sort", sort, sorts);
	if (!rc && dir)
		rc = args_enum(c, "direction", dir, dirs);
	sb_printf(&t, "/sandbox/snapshots");
	sb_query(&t, "sandboxId", sandbox);
	sb_query(&t, "limit", limit);
	sb_query(&t, "offset", offset);
	sb_query(&t, "sort", sort);
	sb_query(&t, "direction", dir);
	if (!rc)
		rc = cli_show(c, "GET", t.s, NULL, "snapshots", cols);
	sb_free(&t);
	return rc;
}

static int snap_get(struct cli *c, int argc, char **argv)
{
	c->usage = "husk snapshot get SNAPSHOT_ID [--json]\n";
	return cli_show_id(c, argc, argv, "SNAPSHOT_ID", "/sandbox/snapshots", NULL, NULL,
	                   snap_fields);
}

static int snap_tag(struct cli *c, int argc, char **argv)
{
	bool clear = false;
	const struct opt opts[] = {{"clear", 0, OPT_FLAG, &clear}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	json_t *body;
	struct args a;
	int rc;

	c->usage = "husk snapshot tag SNAPSHOT_ID (TAG | --clear) [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "SNAPSHOT_ID [TAG]", &a));
	if ((a.npos == 2) == clear)
		return args_bad(c, "give either a TAG or --clear");
	body = json_pack("{so}", "tag", clear ? json_null() : json_string(a.pos[1]));
	if (!body)
		return args_bad(c, "the tag must be valid UTF-8");
	sandbox_path(&t, "/sandbox/snapshots", a.pos[0], NULL);
	rc = cli_show(c, "PATCH", t.s, body, NULL, snap_fields);
	json_decref(body);
	sb_free(&t);
	return rc;
}

static int snap_delete(struct cli *c, int argc, char **argv)
{
	bool confirm = false;
	const struct opt opts[] = {{"confirm", 'y', OPT_FLAG, &confirm}, {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	char what[256];
	struct args a;
	int rc;

	c->usage = "husk snapshot delete SNAPSHOT_ID [--confirm] [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "SNAPSHOT_ID", &a));
	sandbox_path(&t, "/sandbox/snapshots", a.pos[0], NULL);
	snprintf(what, sizeof(what), "Delete snapshot %s", a.pos[0]);
	rc = sandbox_delete_confirmed(c, t.s, what, confirm, "deleted");
	sb_free(&t);
	return rc;
}

static const char yaml_template[] =
	"# husk snapshot build file (husk snapshot build DIR reads agentuity-snapshot.yaml)\n"
	"# Required: schema version\n"
	"version: 1\n"
	"# Required: the runtime to start from (husk runtime list)\n"
	"runtime: base:latest\n"
	"# Optional: snapshot name (letters, digits, _ and -)\n"
	"name: my-snapshot\n"
	"# Optional: description\n"
	"description: My sandbox snapshot\n"
	"# Optional: apt packages to install\n"
	"dependencies:\n"
	"  - curl\n"
	"# Optional: files to include, relative to DIR (globs; prefix ! to exclude)\n"
	"files:\n"
	"  - \"*.js\"\n"
	"  - src/**\n"
	"  - \"!**/*.test.js\"\n"
	"# Optional: environment variables (${NAME} is replaced from --env NAME=VALUE)\n"
	"env:\n"
	"  NODE_ENV: production\n"
	"# Optional: metadata\n"
	"metadata:\n"
	"  author: team-name\n";

static int snap_generate(struct cli *c, int argc, char **argv)
{
	static const char *const formats[] = {"yaml", "json", NULL};
	const char *format = "yaml";
	const struct opt opts[] = {{"format", 0, OPT_STR, &format}, {NULL, 0, 0, NULL}};
	json_t *j;
	struct args a;

	c->usage = "husk snapshot generate [--format yaml|json]\n"
		   "Prints a template build file for husk snapshot build (made here, no "
		   "request).\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	if (args_enum(c, "format", format, formats))
		return EXIT_USAGE;
	if (!strcmp(format, "yaml") && !c->json) {
		fputs(yaml_template, stdout);
		return 0;
	}
	j = json_pack("{sisssssss[s]s[sss]s{ss}s{ss}}", "version", 1, "runtime", "base:latest",
	              "name", "my-snapshot", "description", "My sandbox snapshot", "dependencies",
	              "curl", "files", "*.js", "src/**", "!**/*.test.js", "env", "NODE_ENV",
	              "production", "metadata", "author", "team-name");
	out_json(j);
	json_decref(j);
	return 0;
}

int snap_main(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"create|new", snap_create, "snapshot a sandbox: create ID [--name --tag ...]"},
		{"list|ls", snap_list, "list snapshots"},
		{"get|show|info", snap_get, "one snapshot: get SNAPSHOT_ID"},
		{"tag", snap_tag, "set or clear a tag: tag SNAPSHOT_ID TAG|--clear"},
		{"delete|rm|del|remove", snap_delete, "delete a snapshot: delete SNAPSHOT_ID"},
		{"build", snap_build, "build from a declarative file: build DIR [--file F]"},
		{"generate|gen", snap_generate, "print a template build file"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "snapshot", table, argc, argv);
}

static int ckpt_create(struct cli *c, int argc, char **argv)
{
	struct sbuf t = {0};
	json_t *body;
	struct args a;
	int rc;

	c->usage = "husk checkpoint create ID NAME [--json]\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ID NAME", &a));
	body = json_pack("{ss}", "name", a.pos[1]);
	if (!body)
		return args_bad(c, "NAME must be valid UTF-8");
	sandbox_path(&t, "/sandbox", a.pos[0], "/checkpoint");
	rc = cli_show(c, "POST", t.s, body, NULL, ckpt_cols + 0);
	json_decref(body);
	sb_free(&t);
	return rc;
}

static int ckpt_list(struct cli *c, int argc, char **argv)
{
	c->usage = "husk checkpoint list ID [--json]\n";
	return cli_show_id(c, argc, argv, "ID", "/sandbox/checkpoints", NULL, "checkpoints",
	                   ckpt_cols);
}

/* restore and delete: /sandbox/ID/checkpoint/CKPT[/restore]. */
static int ckpt_one(struct cli *c, int argc, char **argv, bool restore)
{
	bool confirm = false;
	const struct opt opts[] = {{"confirm", 'y', OPT_FLAG, &confirm}, {NULL, 0, 0, NULL}};
	char what[256], done[256];
	struct sbuf t = {0};
	struct args a;
	int rc;

	ARGS_OR_RETURN(args_parse(c, argc, argv, restore ? NULL : opts, "ID CHECKPOINT", &a));
	sandbox_path(&t, "/sandbox", a.pos[0], "/checkpoint");
	sb_seg(&t, a.pos[1]);
	snprintf(what, sizeof(what), "Delete checkpoint %s of %s", a.pos[1], a.pos[0]);
	snprintf(done, sizeof(done), "%s checkpoint %s of %s", restore ? "restored" : "deleted",
	         a.pos[1], a.pos[0]);
	if (restore) {
		sb_printf(&t, "/restore");
		rc = cli_act(c, "POST", t.s, NULL, done);
	} else {
		rc = sandbox_delete_confirmed(c, t.s, what, confirm, done);
	}
	sb_free(&t);
	return rc;
}

static int ckpt_restore(struct cli *c, int argc, char **argv)
{
	c->usage = "husk checkpoint restore ID CHECKPOINT_ID_OR_NAME [--json]\n";
	return ckpt_one(c, argc, argv, true);
}

static int ckpt_delete(struct cli *c, int argc, char **argv)
{
	c->usage = "husk checkpoint delete ID CHECKPOINT_ID [--confirm] [--json]\n";
	return ckpt_one(c, argc, argv, false);
}

int snap_checkpoint(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"create|new", ckpt_create, "save the sandbox's files: create ID NAME"},
		{"list|ls", ckpt_list, "the checkpoints of a sandbox: list ID"},
		{"restore", ckpt_restore, "go back to one: restore ID CHECKPOINT"},
		{"delete|rm|del|remove", ckpt_delete, "delete one: delete ID CHECKPOINT"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "checkpoint", table, argc, argv);
}
