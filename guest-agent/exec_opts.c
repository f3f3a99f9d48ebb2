// SPDX-License-Identifier: MIT
#include "exec_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int get_ms(json_t *req, const char *key, uint64_t def, uint64_t *out, const char **why)
{
	json_t *v = json_object_get(req, key);

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		*why = "timeout_ms and grace_ms must be non-negative integers";
		return -EINVAL;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* Running as another user: HOME (and USER) become its, unless the request set them. */
static int home_for(struct exec_opts *o, json_t *req_env, const char **why)
{
	const char *keys[] = {"HOME", "USER"};
	const char *vals[] = {o->spawn.as.home, o->spawn.as.name};

	for (int k = 0; k < 2; k++) {
		size_t n = strlen(keys[k]), i;
		char *kv;

		if (json_object_get(req_env, keys[k]) || !vals[k][0])
			continue;
		if (asprintf(&kv, "%s=%s", keys[k], vals[k]) < 0) {
			*why = "out of memory";
			return -ENOMEM;
		}
		for (i = 0; o->env[i]; i++)
			if (!strncmp(o->env[i], keys[k], n) && o->env[i][n] == '=')
				break;
		if (o->env[i]) {
			free(o->env[i]);
			o->env[i] = kv;
		} else {
			char **grown = realloc(o->env, (i + 2) * sizeof(*grown));

			if (!grown) {
				free(kv);
				*why = "out of memory";
				return -ENOMEM;
			}
			grown[i] = kv;
			grown[i + 1] = NULL;
			o->env = grown;
		}
	}
	o->spawn.envp = o->env;
	return 0;
}

int exec_opts_parse(struct agent *a, json_t *req, struct exec_opts *o, const char **why)
{
	json_t *argv = json_object_get(req, "argv"), *cwd = json_object_get(req, "cwd");
	json_t *pty = json_object_get(req, "pty"), *in = json_object_get(req, "stdin");
	json_t *user = json_object_get(req, "user"), *keep = json_object_get(req, "keep");
	size_t n = json_array_size(argv);

	memset(o, 0, sizeof(*o));
	if (!json_is_array(argv) || n == 0 || n > MAX_ARGS) {
		*why = "argv must be a non-empty array of strings";
		return -EINVAL;
	}
	if (cwd && !json_is_null(cwd) && !json_is_string(cwd)) {
		*why = "cwd must be a string";
		return -EINVAL;
	}
	if (in && !json_is_boolean(in)) {
		*why = "stdin must be true or false";
		return -EINVAL;
	}
	if (keep && !json_is_boolean(keep)) {
		*why = "keep must be true or false";
		return -EINVAL;
	}
	o->keep = json_is_true(keep);
	if (pty && !json_is_boolean(pty) && !json_is_object(pty)) {
		*why = "pty must be true or an object {rows, cols}";
		return -EINVAL;
	}
	if (get_ms(req, "timeout_ms", 0, &o->timeout_ms, why) ||
	    get_ms(req, "grace_ms", DEFAULT_GRACE_MS, &o->grace_ms, why))
		return -EINVAL;
	o->argv = calloc(n + 1, sizeof(*o->argv));
	if (!o->argv) {
		*why = "out of memory";
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(argv, i));

		if (!s || (i == 0 && !*s)) {
			*why = "argv must be a non-empty array of strings";
			exec_opts_free(o);
			return -EINVAL;
		}
		o->argv[i] = strdup(s);
		if (!o->argv[i]) {
			*why = "out of memory";
			exec_opts_free(o);
			return -ENOMEM;
		}
	}
	o->env = proc_build_env(a->env, json_object_get(req, "env"), why);
	if (!o->env) {
		exec_opts_free(o);
		return -EINVAL;
	}
	if (user && !json_is_null(user) &&
	    (!json_is_string(user) || user_resolve(json_string_value(user), &o->spawn.as, why) ||
	     home_for(o, json_object_get(req, "env"), why))) {
		if (!json_is_string(user))
			*why = "user must be a string: name, uid, name:group or uid:gid";
		exec_opts_free(o);
		return -EINVAL;
	}
	if (json_is_string(cwd) && !(o->cwd = strdup(json_string_value(cwd)))) {
		*why = "out of memory";
		exec_opts_free(o);
		return -ENOMEM;
	}
	o->spawn.argv = o->argv;
	o->spawn.envp = o->env;
	o->spawn.cwd = o->cwd;
	o->spawn.stdin_pipe = json_is_true(in);
	o->spawn.pty = json_is_true(pty) || json_is_object(pty);
	if (json_is_object(pty)) {
		o->spawn.rows = (unsigned short)json_integer_value(json_object_get(pty, "rows"));
		o->spawn.cols = (unsigned short)json_integer_value(json_object_get(pty, "cols"));
	}
	if (o->spawn.pty)
		o->spawn.stdin_pipe = true;
	return 0;
}

void exec_opts_free(struct exec_opts *o)
{
	for (size_t i = 0; o->argv && o->argv[i]; i++)
		free(o->argv[i]);
	free(o->argv);
	proc_free_env(o->env);
	free(o->cwd);
	memset(o, 0, sizeof(*o));
}

void exec_report_spawn_failure(struct conn *c, uint32_t id, const struct exec_opts *o, int err)
{
	char msg[512];
	int n;

	if (o->cwd && err == ENOENT)
		n = snprintf(msg, sizeof(msg), "husk-agent: cannot run '%s' in '%s': %s\n",
		             o->argv[0], o->cwd, strerror(err));
	else
		n = snprintf(msg, sizeof(msg), "husk-agent: cannot run '%s': %s\n", o->argv[0],
		             strerror(err));
	conn_send(c, FRAME_STDERR, 0, id, msg, n > 0 && (size_t)n < sizeof(msg) ? (size_t)n : 0);
	conn_send_json(c, FRAME_RESULT, id,
	               json_pack("{s:i, s:n, s:i, s:b, s:b, s:s}", "exit_code",
	                         err == ENOENT ? 127 : 126, "signal", "duration_ms", 0, "timed_out",
	                         0, "cancelled", 0, "error", strerror(err)));
}
