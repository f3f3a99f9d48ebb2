// SPDX-License-Identifier: MIT
/*
 * husk key create / list / revoke / whoami / shred-org: API keys and the orgs they
 * belong to (husk's own routes, API.md §9). A new key is shown once, alone
 * on the last line of create's output, so a script takes it with tail -n 1.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *const roles[] = {"admin", "member", "read-only", NULL};

static int key_create(struct cli *c, int argc, char **argv)
{
	const char *org = NULL, *role = NULL, *name = NULL;
	const struct opt opts[] = {{"org", 0, OPT_STR, &org},
	                           {"role", 0, OPT_STR, &role},
	                           {"name", 0, OPT_STR, &name},
	                           {NULL, 0, 0, NULL}};
	json_t *body, *env = NULL, *d;
	struct args a;
	int rc;

	c->usage = "husk key create [--org NAME] [--role admin|member|read-only] [--name TEXT] "
		   "[--json]\n"
		   "Makes an API key (an admin key is needed). --org: the org it belongs to,\n"
		   "made if new (default: this key's; other orgs need an admin key of org\n"
		   "'local'). --role: default member; read-only keys only read. The key is\n"
		   "shown once: it is the last line of the output.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	if (role && args_enum(c, "role", role, roles))
		return EXIT_USAGE;
	body = json_object();
	if (org)
		json_object_set_new(body, "org", json_string(org));
	if (role)
		json_object_set_new(body, "role", json_string(role));
	if (name)
		json_object_set_new(body, "name", json_string(name));
	rc = cli_call(c, "POST", "/keys", body, &env);
	json_decref(body);
	d = json_object_get(env, "data");
	if (!rc && c->json) {
		out_data(env);
	} else if (!rc) {
		printf("key %s: %s of org %s (%s)\n", json_string_value(json_object_get(d, "id")),
		       json_string_value(json_object_get(d, "role")),
		       json_string_value(json_object_get(d, "orgName")),
		       json_string_value(json_object_get(d, "orgId")));
		printf("%s\n", json_string_value(json_object_get(d, "key")));
	}
	json_decref(env);
	return rc;
}

static int key_list(struct cli *c, int argc, char **argv)
{
	static const struct col cols[] = {{"ID", "id"},
	                                  {"ORG", "orgName"},
	                                  {"ORG ID", "orgId"},
	                                  {"ROLE", "role"},
	                                  {"NAME", "name"},
	                                  {"CREATED", "createdAt"},
	                                  {"AT START", "fromStart"},
	                                  {NULL, NULL}};
	struct args a;

	c->usage = "husk key list [--json]\n"
		   "The keys of this key's org (every org's for an admin of org 'local'); no key\n"
		   "text is shown, only ids.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "", &a));
	return cli_show(c, "GET", "/keys", NULL, "keys", cols);
}

static int key_revoke(struct cli *c, int argc, char **argv)
{
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk key revoke ID [--json]\n"
		   "Revokes a key at once (ids: husk key list). Keys huskd was started with are\n"
		   "removed from HUSK_API_KEY or STATE/api-keys instead.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ID", &a));
	sandbox_path(&t, "/keys", a.pos[0], NULL);
	rc = cli_act(c, "DELETE", t.s, NULL, "revoked");
	sb_free(&t);
	return rc;
}

static int key_shred(struct cli *c, int argc, char **argv)
{
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage =
		"husk key shred-org ORG [--json]\n"
		"Deletes ORG's key at rest (operator only): the memory of its paused\n"
		"sandboxes and snapshots, sealed with keys it wrapped, can never be read again.\n"
		"What the org seals later gets a new key.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "ORG", &a));
	sandbox_path(&t, "/orgs", a.pos[0], "/key");
	rc = cli_act(c, "DELETE", t.s, NULL, "key deleted");
	sb_free(&t);
	return rc;
}

static int key_whoami(struct cli *c, int argc, char **argv)
{
	static const struct col fields[] = {{"key", "id"},
	                                    {"org", "orgName"},
	                                    {"org id", "orgId"},
	                                    {"role", "role"},
	                                    {NULL, NULL}};
	struct args a;

	c->usage = "husk key whoami [--json]\nThe key in use: its id, org and role.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "", &a));
	return cli_show(c, "GET", "/whoami", NULL, NULL, fields);
}

int key_main(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"create|new", key_create, "make an API key (of an org, with a role)"},
		{"list|ls", key_list, "the keys you may see"},
		{"revoke|delete|rm", key_revoke, "revoke a key by id"},
		{"whoami", key_whoami, "the key in use: org and role"},
		{"shred-org", key_shred, "delete an org's key at rest: its sealed memory is lost"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "key", table, argc, argv);
}
