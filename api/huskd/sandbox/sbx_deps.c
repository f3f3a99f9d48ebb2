// SPDX-License-Identifier: MIT
/*
 * A create's dependencies (Debian packages, through apt) and packages
 * (npm or bun packages, installed globally), as the reference means them:
 * checked at create, installed in the sandbox's setup before it counts as
 * idle. Both fetch from the network, so they need network.enabled; a
 * failure fails the create with the installer's own message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx_int.h"

/* apt's list of sources replaced by huskd's (--apt-source) when one is given: $1. */
static const char apt_script[] =
	"if [ -n \"$1\" ]; then\n"
	"  mkdir -p /etc/apt/husk-replaced &&\n"
	"  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do\n"
	"    [ -e \"$f\" ] && mv \"$f\" /etc/apt/husk-replaced/; done\n"
	"  printf '%s\\n' \"$1\" >/etc/apt/sources.list.d/husk.list || exit 1\n"
	"fi\n"
	"shift\n"
	/* apt's first error line goes to stderr alone: it becomes the create's reason. */
	"say() { printf '%s\\n' \"$1\" | grep -m1 '^E:' >&2 || printf '%s\\n' \"$1\" | tail -n 1 "
	">&2; }\n"
	"out=$(apt-get update -qq 2>&1) || { say \"$out\"; exit 1; }\n"
	"out=$(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
	"\"$@\" 2>&1) || { say \"$out\"; exit 1; }\n";

static const char pkg_script[] =
	"if command -v npm >/dev/null; then out=$(npm install -g --no-audit --no-fund \"$@\" "
	"2>&1)\n"
	"elif command -v bun >/dev/null; then out=$(bun add -g \"$@\" 2>&1)\n"
	"else echo 'packages need npm or bun in the runtime (node:lts, bun:1)' >&2; exit 1; fi ||\n"
	"{ printf '%s\\n' \"$out\" | grep -m1 -i 'err' >&2 || printf '%s\\n' \"$out\" | tail -n 1 "
	">&2; "
	"exit 1; }\n";

bool sbx_deb_name(const char *s)
{
	/* What apt-get takes, and nothing it would read as an option. */
	return s && *s && s[0] != '-' && strlen(s) < 256 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.+-:=") == strlen(s);
}

/* An npm package spec (name, @scope/name, with @version): no option, no white space. */
static bool pkg_name(const char *s)
{
	if (!s || !*s || s[0] == '-' || strlen(s) > 256)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f ||
		    strchr("\"'`$\\;|&", *p))
			return false;
	return true;
}

static int list_plan(json_t *body, const char *field, bool (*ok)(const char *), const char *eg,
                     json_t **out, struct sbx_err *err)
{
	json_t *arr = json_object_get(body, field), *v;
	size_t i;

	if (!arr || json_is_null(arr) || (json_is_array(arr) && !json_array_size(arr)))
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > 256)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "%s must be an array of at most 256 package names", field);
	json_array_foreach(arr, i, v)
	{
		if (!ok(json_string_value(v)))
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "%s[%zu] is not a package name (e.g. %s)", field, i, eg);
	}
	*out = json_incref(arr);
	return 0;
}

int sbx_deps_plan(struct sandbox *sb, json_t *body, struct sbx_err *err)
{
	int rc = list_plan(body, "dependencies", sbx_deb_name, "curl", &sb->deps, err);

	if (!rc)
		rc = list_plan(body, "packages", pkg_name, "left-pad or @scope/pkg@1.2.3",
		               &sb->packages, err);
	if (!rc && (sb->deps || sb->packages) && !sb->net)
		rc = sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		              "%s are fetched from the network: add network.enabled: true (husk "
		              "create --network)",
		              sb->deps ? "dependencies" : "packages");
	return rc;
}

struct install {
	sbx_files_fn done;
	void *arg;
};

static void install_end(struct sandbox *sb, struct install *in, const struct sbx_err *err)
{
	sbx_files_fn done = in->done;
	void *arg = in->arg;

	free(in);
	done(sb, err, arg);
}

/* Whether a step went; else the create's reason, with the installer's words. */
static bool step_ok(struct sandbox *sb, struct install *in, const struct sbx_err *err,
                    const struct sbx_run_out *out, const char *what)
{
	struct sbx_err e;

	if (err) {
		install_end(sb, in, err);
		return false;
	}
	if (out->exit_code == 0)
		return true;
	sbx_fail(&e, SBX_STEP_FAILED, -EIO, "installing its %s failed (exit code %d): %s", what,
	         out->exit_code, out->err[0] ? out->err : "no error output");
	install_end(sb, in, &e);
	return false;
}

static void packages_done(struct sandbox *sb, const struct sbx_err *err,
                          const struct sbx_run_out *out, void *arg)
{
	if (!step_ok(sb, arg, err, out, "packages"))
		return;
	json_decref(sb->packages);
	sb->packages = NULL;
	install_end(sb, arg, NULL);
}

static void packages(struct sandbox *sb, struct install *in)
{
	json_t *argv;

	if (!sb->packages) {
		install_end(sb, in, NULL);
		return;
	}
	argv = json_pack("[ssss]", "sh", "-c", pkg_script, "sh");
	json_array_extend(argv, sb->packages);
	sbx_run_now(sb, argv, packages_done, in);
}

static void deps_done(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                      void *arg)
{
	if (!step_ok(sb, arg, err, out, "dependencies"))
		return;
	json_decref(sb->deps);
	sb->deps = NULL;
	packages(sb, arg);
}

void sbx_deps_install(struct sandbox *sb, sbx_files_fn done, void *arg)
{
	struct install *in = calloc(1, sizeof(*in));
	const char *src = sb->m->cfg.apt_source;
	struct sbx_err err;
	json_t *argv;

	if (!in) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(sb, &err, arg);
		return;
	}
	in->done = done;
	in->arg = arg;
	if (!sb->deps) {
		packages(sb, in);
		return;
	}
	argv = json_pack("[sssss]", "sh", "-c", apt_script, "sh", src ? src : "");
	json_array_extend(argv, sb->deps);
	sbx_run_now(sb, argv, deps_done, in);
}
