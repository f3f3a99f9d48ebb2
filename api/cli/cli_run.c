// SPDX-License-Identifier: MIT
/*
 * run and exec: the commands that run something in a sandbox.
 * run and exec follow the published client (API.md §7.1, §7.2): read the
 * output streams to their end, writing them out as they come, then ask for
 * the execution until it is terminal, and exit with its exit code.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* huskd holds an execution long-poll up to 240 s; a minute keeps Ctrl-C prompt enough. */
#define EXEC_WAIT "60s"

/* One output stream: where its bytes go (an fd, or a buffer for --json). */
struct stream {
	const char *name;
	struct cli_conn *conn;
	struct cli_resp resp;
	int fd;
	bool capture;
	bool stamps; /* --timestamps: each line begins with when it arrived */
	bool mid;    /* the last byte written was not the end of a line */
	struct sbuf buf;
};

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1; /* our stdout is gone: stop reading */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* "2026-11-28T03:40:01.123Z ": when a line's first byte came. */
static int write_stamp(int fd)
{
	char text[40];
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(text + n, sizeof(text) - n, ".%03ldZ ", ts.tv_nsec / 1000000);
	return write_all(fd, text, n);
}

static int stream_write(void *arg, const void *data, size_t len)
{
	struct stream *s = arg;
	const char *p = data;

	if (s->capture) {
		sb_append(&s->buf, data, len);
		return 0;
	}
	while (s->stamps && len) {
		const char *nl = memchr(p, '\n', len);
		size_t n = nl ? (size_t)(nl - p) + 1 : len;

		if ((!s->mid && write_stamp(s->fd)) || write_all(s->fd, p, n))
			return -1;
		s->mid = !nl;
		p += n;
		len -= n;
	}
	return write_all(s->fd, p, len);
}

/* Opens the GET of a stream URL (absolute, from huskd); over a Unix socket, its path. */
static int stream_open(struct cli *c, struct stream *s, const char *url)
{
	const char *path = strncmp(url, "http://", 7) ? NULL : strchr(url + 7, '/');
	struct cli_req rq = {.method = "GET", .fn = stream_write, .arg = s};
	struct cli_url u = c->url;
	char *base, err[256];
	int rc;

	if (!path) {
		fprintf(stderr, "husk: cannot read the %s stream at '%s': not an http:// URL\n",
		        s->name, url);
		return -EINVAL;
	}
	rq.target = path;
	if (!c->url.is_unix) {
		base = strndup(url, (size_t)(path - url));
		rc = base ? cli_url_parse(base, &u, err, sizeof(err)) : -ENOMEM;
		free(base);
		if (rc) {
			fprintf(stderr, "husk: cannot read the %s stream: %s\n", s->name, err);
			return rc;
		}
		u.prefix[0] = '\0';
	}
	rc = cli_http_start(&u, &rq, &s->resp, &s->conn);
	if (rc)
		fprintf(stderr, "husk: cannot read the %s stream: %s\n", s->name, s->resp.err);
	return rc;
}

/* Reads both streams to their end (or until interrupted): 0, or -EINTR. */
static int streams_pump(struct stream *st, int n)
{
	for (;;) {
		struct pollfd pf[2];
		int k = 0, rc;

		for (int i = 0; i < n; i++)
			if (st[i].conn)
				pf[k++] = (struct pollfd){.fd = cli_http_fd(st[i].conn),
				                          .events = POLLIN};
		if (!k)
			return 0;
		rc = poll(pf, (nfds_t)k, -1);
		if (rc < 0 && errno == EINTR && cli_interrupted)
			return -EINTR;
		for (int i = 0, j = 0; rc > 0 && i < n; i++) {
			if (!st[i].conn)
				continue;
			if (pf[j++].revents && (rc = cli_http_step(st[i].conn)) != 0) {
				if (rc < 0 && rc != -ECANCELED)
					fprintf(stderr, "husk: the %s stream broke: %s\n",
					        st[i].name, st[i].resp.err);
				else if (st[i].resp.status != 200)
					fprintf(stderr, "husk: the %s stream answered HTTP %d\n",
					        st[i].name, st[i].resp.status);
				cli_http_close(st[i].conn);
				st[i].conn = NULL;
				rc = 1;
			}
		}
	}
}

static bool terminal(const char *status)
{
	return status && (!strcmp(status, "completed") || !strcmp(status, "failed") ||
	                  !strcmp(status, "timeout") || !strcmp(status, "cancelled"));
}

/*
 * Follows an execution to its end: output to stdout/stderr (or captured for
 * --json), then its record; returns the exit status husk should end with.
 * sandbox is destroyed on Ctrl-C when kill_on_interrupt (a oneshot's).
 */
static int follow(struct cli *c, const char *sandbox, json_t *data, bool kill_on_interrupt,
                  bool stamps)
{
	const char *eid = json_string_value(json_object_get(data, "executionId"));
	const char *urls[2] = {json_string_value(json_object_get(data, "stdoutStreamUrl")),
	                       json_string_value(json_object_get(data, "stderrStreamUrl"))};
	struct stream st[2] = {{.name = "stdout", .fd = 1, .capture = c->json, .stamps = stamps},
	                       {.name = "stderr", .fd = 2, .capture = c->json, .stamps = stamps}};
	json_t *env = NULL, *exec = NULL, *code;
	const char *status = NULL;
	struct sbuf t = {0};
	int rc = 0;

	for (int i = 0; i < 2; i++)
		if (urls[i] && (i == 0 || !urls[0] || strcmp(urls[0], urls[1])))
			(void)stream_open(c, &st[i], urls[i]);
	if (streams_pump(st, 2) == -EINTR)
		goto interrupted;
	if (!eid) {
		fprintf(stderr,
		        "husk: huskd gave no execution id; the command did not start in %s\n",
		        sandbox);
		rc = 1;
		goto out;
	}
	sb_printf(&t, "/sandbox/execution");
	sb_seg(&t, eid);
	sb_query(&t, "wait", EXEC_WAIT);
	while (!terminal(status)) {
		json_decref(env);
		env = NULL;
		if (cli_call(c, "GET", t.s, NULL, &env)) {
			rc = 1;
			if (cli_interrupted)
				goto interrupted;
			goto out;
		}
		exec = json_object_get(env, "data");
		status = json_string_value(json_object_get(exec, "status"));
		if (!status) {
			fprintf(stderr, "husk: huskd's execution record has no status\n");
			rc = 1;
			goto out;
		}
	}
	code = json_object_get(exec, "exitCode");
	rc = json_is_integer(code) ? (int)(json_integer_value(code) & 0xff)
	                           : strcmp(status, "completed") != 0;
	if (json_is_integer(code) && json_integer_value(code) && !rc)
		rc = 1; /* a code that is 0 modulo 256 must not look like success */
	/* "failed" with an error: the command did not end by itself (its sandbox failed, say). */
	if (strcmp(status, "completed") &&
	    (strcmp(status, "failed") || json_string_value(json_object_get(exec, "error"))))
		fprintf(stderr, "husk: the command ended with status %s%s%s\n", status,
		        json_string_value(json_object_get(exec, "error")) ? ": " : "",
		        json_string_value(json_object_get(exec, "error"))
		                ? json_string_value(json_object_get(exec, "error"))
		                : "");
	if (c->json) {
		json_object_set_new(exec, "sandboxId", json_string(sandbox));
		for (int i = 0; i < 2; i++)
			if (st[i].buf.s || urls[i])
				json_object_set_new(exec, st[i].name,
				                    out_string_bytes(st[i].buf.s ? st[i].buf.s : "",
				                                     st[i].buf.len));
		out_json(exec);
	}
	goto out;
interrupted:
	if (kill_on_interrupt) {
		sb_free(&t);
		sb_printf(&t, "/sandbox");
		sb_seg(&t, sandbox);
		fprintf(stderr, "\nhusk: interrupted; destroying sandbox %s\n", sandbox);
		(void)cli_call(c, "DELETE", t.s, NULL, NULL);
	} else {
		fprintf(stderr,
		        "\nhusk: interrupted; the command goes on in sandbox %s (execution "
		        "%s)\n",
		        sandbox, eid ? eid : "?");
	}
	rc = 130;
out:
	for (int i = 0; i < 2; i++) {
		cli_http_close(st[i].conn);
		cli_resp_free(&st[i].resp);
		sb_free(&st[i].buf);
	}
	sb_free(&t);
	json_decref(env);
	return rc;
}

static json_t *argv_json(char **argv, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++) {
		json_t *s = json_string(argv[i]);

		if (!s) {
			json_decref(a);
			return NULL;
		}
		json_array_append_new(a, s);
	}
	return a;
}

json_t *run_command_of(struct cli *c, const struct args *a, int rc_pos)
{
	json_t *cmd;

	if (!a->cmd && a->npos > rc_pos) {
		args_bad(c, "put the command after '--': %s%s%s -- %s ...", c->cmd,
		         rc_pos ? " " : "", rc_pos ? a->pos[0] : "", a->pos[rc_pos]);
		return NULL;
	}
	if (!a->cmd) {
		args_bad(c, "missing the command: %s ... -- CMD [ARGS...]", c->cmd);
		return NULL;
	}
	/* "--" and nothing after: an imported image's own command (Entrypoint and Cmd). */
	if (!a->ncmd)
		return json_array();
	cmd = argv_json(a->cmd, a->ncmd);
	if (!cmd)
		args_bad(c, "the command is not valid UTF-8");
	return cmd;
}

int run_run(struct cli *c, int argc, char **argv)
{
	struct sbx_opts o = {0};
	bool stamps = false;
	const struct opt opts[] = {SBX_OPTS(o),
	                           {"quiet", 'q', OPT_FLAG, &o.quiet},
	                           {"timestamps", 0, OPT_FLAG, &stamps},
	                           {NULL, 0, 0, NULL}};
	json_t *body = json_object(), *cmd = NULL, *env = NULL;
	struct args a;
	int rc;

	c->usage =
		"husk run [--runtime R] [--runtime-id ID] [--memory 512Mi] [--cpu 500m] "
		"[--disk 1Gi]\n"
		"         [--network] [--timeout 30s] [--env K=V]... [--file SBXPATH:LOCAL]...\n"
		"         [--snapshot X] [--dependency PKG]... [--quiet] [--timestamps] [--json]\n"
		"         -- CMD [ARGS...]\n"
		"Runs CMD in a new sandbox that is destroyed when it ends; its output is\n"
		"streamed as it comes and husk exits with its exit code. --json prints the\n"
		"execution record with the output in it instead. --timestamps begins each\n"
		"line of output with the UTC time it arrived.\n";
	rc = args_parse(c, argc, argv, opts, "[CMD...]", &a);
	if (!rc && !(cmd = run_command_of(c, &a, 0)))
		rc = EXIT_USAGE;
	if (!rc)
		rc = create_body(c, &o, body);
	if (!rc) {
		json_object_set_new(body, "command",
		                    json_pack("{sOss}", "exec", cmd, "mode", "oneshot"));
		json_object_set_new(
			body, "stream",
			o.quiet ? json_pack("{ssss}", "stdout", "ignore", "stderr", "ignore")
				: json_object());
		rc = cli_call(c, "POST", "/sandbox", body, &env);
	}
	if (!rc) {
		json_t *data = json_object_get(env, "data");
		const char *sid = json_string_value(json_object_get(data, "sandboxId"));

		rc = sid ? follow(c, sid, data, true, stamps) : 1;
		if (!sid)
			fprintf(stderr, "husk: huskd's answer has no sandboxId\n");
	}
	json_decref(cmd);
	json_decref(body);
	json_decref(env);
	create_opts_free(&o);
	return rc < 0 ? 0 : rc;
}

int run_exec(struct cli *c, int argc, char **argv)
{
	const char *timeout = NULL;
	bool quiet = false, stamps = false;
	const struct opt opts[] = {{"timeout", 0, OPT_STR, &timeout},
	                           {"quiet", 'q', OPT_FLAG, &quiet},
	                           {"timestamps", 0, OPT_FLAG, &stamps},
	                           {NULL, 0, 0, NULL}};
	json_t *body = NULL, *cmd = NULL, *env = NULL;
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk exec ID [--timeout 5m] [--quiet] [--timestamps] [--json] -- CMD "
		   "[ARGS...]\n"
		   "Runs CMD in sandbox ID (one command at a time per sandbox), streams its\n"
		   "output as it comes and exits with its exit code. --timestamps begins each\n"
		   "line of output with the UTC time it arrived.\n";
	rc = args_parse(c, argc, argv, opts, "ID [CMD...]", &a);
	if (!rc && !(cmd = run_command_of(c, &a, 1)))
		rc = EXIT_USAGE;
	if (!rc && timeout)
		rc = args_duration(c, "timeout", timeout);
	if (!rc) {
		body = json_pack("{sO}", "command", cmd);
		if (timeout)
			json_object_set_new(body, "timeout", json_string(timeout));
		if (quiet)
			json_object_set_new(
				body, "stream",
				json_pack("{ssss}", "stdout", "ignore", "stderr", "ignore"));
		sb_printf(&t, "/sandbox");
		sb_seg(&t, a.pos[0]);
		sb_printf(&t, "/execute");
		rc = cli_call(c, "POST", t.s, body, &env);
	}
	if (!rc)
		rc = follow(c, a.pos[0], json_object_get(env, "data"), false, stamps);
	sb_free(&t);
	json_decref(cmd);
	json_decref(body);
	json_decref(env);
	return rc < 0 ? 0 : rc;
}
