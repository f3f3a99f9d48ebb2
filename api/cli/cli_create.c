// SPDX-License-Identifier: MIT
/*
 * husk create, and the POST /sandbox body (API.md §5.1 (1)) it shares with
 * husk run: resources, timeouts, environment, files and the rest, each
 * value checked before anything is sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void create_opts_free(struct sbx_opts *o)
{
	free(o->env.v);
	free(o->files.v);
	free(o->deps.v);
	free(o->scopes.v);
	free(o->allow.v);
	free(o->deny.v);
}

static void set_str(json_t *obj, const char *key, const char *v)
{
	if (v)
		json_object_set_new(obj, key, json_string(v));
}

static json_t *str_array(const struct strlist *l)
{
	json_t *a = json_array();

	for (int i = 0; i < l->n; i++)
		json_array_append_new(a, json_string(l->v[i]));
	return a;
}

/* --file sandboxpath:localpath entries as files[] with base64 contents. */
static int add_files(struct cli *c, const struct strlist *l, json_t *body)
{
	json_t *files = json_array();

	for (int i = 0; i < l->n; i++) {
		const char *colon = strchr(l->v[i], ':');
		char *data, *b64, *path;
		size_t len;
		int rc;

		if (!colon || colon == l->v[i] || !colon[1]) {
			json_decref(files);
			return args_bad(c, "--file '%s' must be SANDBOX_PATH:LOCAL_PATH", l->v[i]);
		}
		rc = cli_read_file(colon + 1, &data, &len);
		if (rc) {
			json_decref(files);
			return args_bad(c, "--file: cannot read '%s': %s", colon + 1,
			                strerror(-rc));
		}
		b64 = cli_base64(data, len);
		path = strndup(l->v[i], (size_t)(colon - l->v[i]));
		json_array_append_new(files, json_pack("{s:s?,s:s}", "path", path, "content", b64));
		free(path);
		free(b64);
		free(data);
	}
	json_object_set_new(body, "files", files);
	return 0;
}

/* The POST /sandbox body (API.md §5.1 (1)) from o, checking every value: 0 or EXIT_USAGE. */
int create_body(struct cli *c, struct sbx_opts *o, json_t *body)
{
	json_t *res = json_object(), *timeout = json_object(), *env = json_object(), *meta;
	long port = 0, rate = 0;
	int rc = 0;

	if (o->snapshot && (o->runtime || o->runtime_id))
		rc = args_bad(c,
		              "--snapshot already fixes the runtime: drop --runtime/--runtime-id");
	if (!rc && o->memory && !(rc = args_size(c, "memory", o->memory)))
		set_str(res, "memory", o->memory);
	if (!rc && o->cpu && !(rc = args_cpu(c, "cpu", o->cpu)))
		set_str(res, "cpu", o->cpu);
	if (!rc && o->disk && !(rc = args_size(c, "disk", o->disk)))
		set_str(res, "disk", o->disk);
	if (!rc && o->timeout && !(rc = args_duration(c, "timeout", o->timeout)))
		set_str(timeout, "execution", o->timeout);
	if (!rc && o->idle && !(rc = args_duration(c, "idle-timeout", o->idle)))
		set_str(timeout, "idle", o->idle);
	if (!rc && o->paused && !(rc = args_duration(c, "paused-timeout", o->paused)))
		set_str(timeout, "paused", o->paused);
	for (int i = 0; !rc && i < o->env.n; i++)
		rc = args_keyval(c, "--env", o->env.v[i], env);
	if (!rc && o->port && !(rc = args_uint(c, "port", o->port, 65535, &port)) && port < 1024)
		rc = args_bad(c, "--port %ld: give a port from 1024 to 65535", port);
	if (!rc && o->url_token && !port && !o->all_ports)
		rc = args_bad(c,
		              "--url-token guards --port's url: give --port (or --all-ports) too");
	if (!rc && o->egress_rate &&
	    !(rc = args_uint(c, "egress-rate", o->egress_rate, 100000000000L, &rate)) &&
	    rate < 1000)
		rc = args_bad(c, "--egress-rate %ld: give bytes per second, 1000 or more", rate);
	if (!rc && o->metadata) {
		meta = json_loads(o->metadata, 0, NULL);
		if (!json_is_object(meta))
			rc = args_bad(c,
			              "--metadata must be a JSON object, e.g. '{\"team\":\"ml\"}'");
		else
			json_object_set(body, "metadata", meta);
		json_decref(meta);
	}
	if (!rc)
		rc = o->files.n ? add_files(c, &o->files, body) : 0;
	if (!rc) {
		set_str(body, "runtime", o->runtime);
		set_str(body, "runtimeId", o->runtime_id);
		set_str(body, "snapshot", o->snapshot);
		set_str(body, "name", o->name);
		set_str(body, "description", o->description);
		set_str(body, "projectId", o->project);
		if (json_object_size(res))
			json_object_set(body, "resources", res);
		if (json_object_size(timeout))
			json_object_set(body, "timeout", timeout);
		if (json_object_size(env))
			json_object_set(body, "env", env);
		if (o->network || port || rate || o->allow.n || o->deny.n || o->all_ports) {
			/* --all-ports alone serves the guest's ports and gives it no internet. */
			json_t *net =
				json_pack("{sb}", "enabled",
			                  o->network || port || rate || o->allow.n || o->deny.n);

			if (o->all_ports)
				json_object_set_new(net, "allPorts", json_true());
			if (rate)
				json_object_set_new(net, "egressBytesPerSec", json_integer(rate));
			if (port)
				json_object_set_new(net, "port", json_integer(port));
			if (o->url_token)
				json_object_set_new(net, "urlToken", json_true());
			if (o->allow.n)
				json_object_set_new(net, "allow", str_array(&o->allow));
			if (o->deny.n)
				json_object_set_new(net, "deny", str_array(&o->deny));
			json_object_set_new(body, "network", net);
		}
		if (o->deps.n)
			json_object_set_new(body, "dependencies", str_array(&o->deps));
		if (o->scopes.n)
			json_object_set_new(body, "scopes", str_array(&o->scopes));
	}
	json_decref(res);
	json_decref(timeout);
	json_decref(env);
	return rc;
}

int create_main(struct cli *c, int argc, char **argv)
{
	struct sbx_opts o = {0};
	const struct opt opts[] = {SBX_OPTS(o),
	                           {"name", 0, OPT_STR, &o.name},
	                           {"description", 0, OPT_STR, &o.description},
	                           {"idle-timeout", 0, OPT_STR, &o.idle},
	                           {"paused-timeout", 0, OPT_STR, &o.paused},
	                           {"metadata", 0, OPT_STR, &o.metadata},
	                           {"port", 0, OPT_STR, &o.port},
	                           {"url-token", 0, OPT_FLAG, &o.url_token},
	                           {"all-ports", 0, OPT_FLAG, &o.all_ports},
	                           {"egress-rate", 0, OPT_STR, &o.egress_rate},
	                           {NULL, 0, 0, NULL}};
	json_t *body = json_object(), *env = NULL, *data;
	char id[256];
	struct args a;
	int rc;

	c->usage = "husk create [--runtime R] [--runtime-id ID] [--memory 512Mi] [--cpu 500m] "
		   "[--disk 1Gi] [--network]\n"
		   "            [--timeout 30s] [--idle-timeout 10m] [--paused-timeout 1h] "
		   "[--env K=V]... "
		   "[--file SBXPATH:LOCAL]...\n"
		   "            [--snapshot X] [--dependency PKG]... [--name N] [--description D]\n"
		   "            [--metadata JSON] [--port 1024-65535] [--all-ports] [--url-token]\n"
		   "            [--json]\n"
		   "            [--allow-host HOST|CIDR]... [--deny-host HOST|CIDR]...\n"
		   "            [--egress-rate BYTES_PER_SEC]\n"
		   "Creates an interactive sandbox and prints its id (--json: huskd's answer).\n"
		   "--port serves that guest port at the sandbox's url (printed; also in get);\n"
		   "--url-token: only to requests with its token (printed; X-Husk-Url-Token\n"
		   "or ?husk_token=). --all-ports serves every guest port (port url printed:\n"
		   "{port} in it becomes the port).\n"
		   "--allow-host (only these) and --deny-host (not these) imply --network;\n"
		   "HOST is example.com or *.example.com, CIDR 203.0.113.0/24.\n"
		   "--timeout is each command's limit; --idle-timeout 0s keeps it forever;\n"
		   "--paused-timeout is how long it may stay paused (0s: for ever).\n";
	rc = args_parse(c, argc, argv, opts, "", &a);
	if (!rc && a.cmd)
		rc = args_bad(c, "create takes no command; use husk exec ID -- CMD afterwards");
	if (!rc)
		rc = create_body(c, &o, body);
	if (!rc)
		rc = cli_call(c, "POST", "/sandbox", body, &env);
	if (!rc && c->json) {
		out_data(env);
	} else if (!rc) {
		data = json_object_get(env, "data");
		printf("%s\n", out_cell(data, "sandboxId", id, sizeof(id)));
		if (*out_cell(data, "url", id, sizeof(id)))
			fprintf(stderr, "url: %s\n", id);
		if (*out_cell(data, "portUrl", id, sizeof(id)))
			fprintf(stderr, "port url: %s\n", id);
		if (*out_cell(data, "urlToken", id, sizeof(id)))
			fprintf(stderr, "url token: %s\n", id);
	}
	json_decref(body);
	json_decref(env);
	create_opts_free(&o);
	return rc < 0 ? 0 : rc;
}
