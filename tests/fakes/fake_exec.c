// SPDX-License-Identifier: MIT
/*
 * exec, with built-in commands in place of processes (README.md lists
 * them). A command either ends at once, or runs on the guest's clock
 * (sleep), on its stdin (cat) or as the connection takes its output (yes);
 * SIGTERM, from a CANCEL, a timeout or job.stop, ends any of them at once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake.h"

struct exec_req {
	struct req r;
	struct run run;
	int64_t started, timeout_at; /* guest ms; timeout_at -1: none */
	uint64_t sent;               /* RUN_YES */
	bool pty;
};

static const char *arg(json_t *argv, size_t i)
{
	return json_string_value(json_array_get(argv, i));
}

static void out_str(out_fn *out, void *ctx, uint8_t type, const char *s)
{
	out(ctx, type, s, strlen(s));
}

void yes_fill(uint8_t *buf, uint64_t off, size_t n)
{
	static uint8_t pattern[FAKE_CHUNK + 1];

	if (!pattern[0])
		for (size_t i = 0; i < sizeof(pattern); i++)
			pattern[i] = i & 1 ? '\n' : 'y';
	while (n) {
		size_t k = n < FAKE_CHUNK ? n : FAKE_CHUNK;

		memcpy(buf, pattern + (off & 1), k);
		buf += k;
		off += k;
		n -= k;
	}
}

/* argv[from...] joined by spaces, and a newline. */
static void out_args(json_t *argv, size_t from, uint8_t type, out_fn *out, void *ctx)
{
	size_t len = 1, at = 0;
	char *s;

	for (size_t i = from; i < json_array_size(argv); i++)
		len += strlen(arg(argv, i)) + 1;
	s = malloc(len);
	if (!s)
		return;
	for (size_t i = from; i < json_array_size(argv); i++) {
		size_t n = strlen(arg(argv, i));

		if (i > from)
			s[at++] = ' ';
		memcpy(s + at, arg(argv, i), n);
		at += n;
	}
	s[at++] = '\n';
	out(ctx, type, s, at);
	free(s);
}

static void printenv(json_t *env, const char *name, struct run *r, out_fn *out, void *ctx)
{
	const char *k;
	json_t *v;

	if (name) {
		v = json_object_get(env, name);
		r->exit_code = v ? 0 : 1;
		if (v) {
			out_str(out, ctx, FRAME_STDOUT, json_string_value(v));
			out_str(out, ctx, FRAME_STDOUT, "\n");
		}
		return;
	}
	json_object_foreach(env, k, v)
	{
		out_str(out, ctx, FRAME_STDOUT, k);
		out_str(out, ctx, FRAME_STDOUT, "=");
		out_str(out, ctx, FRAME_STDOUT, json_string_value(v));
		out_str(out, ctx, FRAME_STDOUT, "\n");
	}
}

/*
 * bash [-l] -c 'WORDS': the words (split at spaces, no quoting) run as a
 * command; bash without -c (E2B's PTY: bash -i -l) is cat, its input echoed.
 */
static json_t *bash_words(json_t *argv)
{
	const char *cmd = arg(argv, 0), *line = NULL;
	json_t *words;
	char *copy, *w, *save;

	if (!cmd || (strcmp(cmd, "/bin/bash") && strcmp(cmd, "bash")))
		return NULL;
	for (size_t i = 1; i + 1 < json_array_size(argv); i++)
		if (!strcmp(arg(argv, i), "-c"))
			line = arg(argv, i + 1);
	if (!line)
		return json_pack("[s]", "cat");
	if (!(copy = strdup(line)))
		return NULL;
	words = json_array();
	for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
		json_array_append_new(words, json_string(w));
	free(copy);
	if (!json_array_size(words)) /* an empty line: true */
		json_array_append_new(words, json_string("true"));
	return words;
}

void run_start(struct fake *fk, json_t *argv, json_t *env, struct run *r, out_fn *out, void *ctx)
{
	const char *cmd = arg(argv, 0), *a1 = arg(argv, 1), *a2 = arg(argv, 2);
	json_t *words = bash_words(argv);
	char msg[256], *end;
	double secs;

	if (words) {
		run_start(fk, words, env, r, out, ctx);
		json_decref(words);
		return;
	}
	memset(r, 0, sizeof(*r));
	if (!strcmp(cmd, "true") || !strcmp(cmd, "sync")) {
	} else if (!strcmp(cmd, "false")) {
		r->exit_code = 1;
	} else if (!strcmp(cmd, "echo")) {
		out_args(argv, 1, FRAME_STDOUT, out, ctx);
	} else if (!strcmp(cmd, "stderr")) {
		out_args(argv, 1, FRAME_STDERR, out, ctx);
		r->exit_code = 2;
	} else if (!strcmp(cmd, "printenv")) {
		printenv(env, a1, r, out, ctx);
	} else if (!strcmp(cmd, "exit")) {
		long code = a1 ? strtol(a1, &end, 10) : 0;

		if (a1 && (!*a1 || *end || code < 0)) {
			snprintf(msg, sizeof(msg), "exit: Illegal number: %.64s\n", a1);
			out_str(out, ctx, FRAME_STDERR, msg);
			code = 2;
		}
		r->exit_code = (int)(code & 255);
	} else if (!strcmp(cmd, "sleep")) {
		secs = a1 ? strtod(a1, &end) : -1;
		if (!a1 || !*a1 || *end || !isfinite(secs) || secs < 0 || secs > 1e9) {
			snprintf(msg, sizeof(msg), "sleep: invalid time interval '%.64s'\n",
			         a1 ? a1 : "");
			out_str(out, ctx, FRAME_STDERR, msg);
			r->exit_code = 1;
			return;
		}
		r->kind = RUN_SLEEP;
		r->until = guest_ms(fk) + (int64_t)(secs * 1000 + 0.5);
	} else if (!strcmp(cmd, "cat")) {
		r->kind = RUN_CAT;
	} else if (!strcmp(cmd, "yes")) {
		r->total = a1 && *a1 >= '0' && *a1 <= '9' ? strtoull(a1, &end, 10) : 0;
		if (!a1 || *a1 < '0' || *a1 > '9' || *end) {
			out_str(out, ctx, FRAME_STDERR, "yes: usage: yes BYTES\n");
			r->exit_code = 2;
			return;
		}
		r->kind = RUN_YES;
	} else if (!strcmp(cmd, "sh")) {
		/* Stands in for huskd's snapshot script ("sync; find ... | wc -l"). */
		if (a1 && !strcmp(a1, "-c") && a2 && strstr(a2, "wc -l"))
			out_str(out, ctx, FRAME_STDOUT, "0\n");
	} else {
		snprintf(msg, sizeof(msg), "fake-agent: %.200s: not found\n", cmd);
		out_str(out, ctx, FRAME_STDERR, msg);
		r->exit_code = 127;
		r->not_found = true;
	}
}

const char *exec_check_req(json_t *req)
{
	json_t *argv = json_object_get(req, "argv"), *env = json_object_get(req, "env"), *v;
	json_t *cwd = json_object_get(req, "cwd"), *in = json_object_get(req, "stdin");
	json_t *pty = json_object_get(req, "pty");
	static const char *const ms[] = {"timeout_ms", "grace_ms"};
	const char *k;
	size_t i;

	if (!json_array_size(argv))
		return "argv must be a non-empty array of strings";
	json_array_foreach(argv, i, v)
	{
		if (!json_is_string(v) || (i == 0 && !*json_string_value(v)))
			return "argv must be a non-empty array of strings";
	}
	if (env && !json_is_null(env) && !json_is_object(env))
		return "env must be an object";
	json_object_foreach(env, k, v)
	{
		if (!*k || strchr(k, '=') || (!json_is_string(v) && !json_is_null(v)))
			return "env: names need no '=', values are strings or null";
	}
	if (cwd && !json_is_null(cwd) && !json_is_string(cwd))
		return "cwd must be a string";
	if (in && !json_is_boolean(in))
		return "stdin must be true or false";
	if (pty && !json_is_boolean(pty) && !json_is_object(pty))
		return "pty must be true or an object {rows, cols}";
	for (i = 0; i < 2; i++) {
		v = json_object_get(req, ms[i]);
		if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0))
			return "timeout_ms and grace_ms must be non-negative integers";
	}
	return NULL;
}

json_t *exec_env(struct fake *fk, json_t *req)
{
	json_t *env = json_copy(fk->g.env), *v;
	const char *k;

	json_object_foreach(json_object_get(req, "env"), k, v)
	{
		if (json_is_null(v))
			json_object_del(env, k);
		else
			json_object_set(env, k, v);
	}
	return env;
}

static void exec_out(void *ctx, uint8_t type, const void *p, size_t n)
{
	struct exec_req *e = ctx;

	for (size_t off = 0; off < n; off += FAKE_CHUNK)
		conn_send(e->r.c, e->pty ? FRAME_STDOUT : type, 0, e->r.id,
		          (const uint8_t *)p + off, n - off < FAKE_CHUNK ? n - off : FAKE_CHUNK);
}

static void exec_finish(struct exec_req *e, int code, int sig, bool timed_out, bool cancelled)
{
	struct fake *fk = conn_fake(e->r.c);
	json_t *res = json_pack("{s:i, s:I, s:b, s:b}", "exit_code", code, "duration_ms",
	                        (json_int_t)(guest_ms(fk) - e->started), "timed_out", timed_out,
	                        "cancelled", cancelled);

	json_object_set_new(res, "signal", sig ? json_integer(sig) : json_null());
	if (e->run.not_found)
		json_object_set_new(res, "error", json_string("No such file or directory"));
	req_unregister(&e->r);
	conn_send_json(e->r.c, FRAME_RESULT, e->r.id, res);
	free(e);
}

static void exec_tick(struct req *r)
{
	struct exec_req *e = (struct exec_req *)r;
	int64_t now = guest_ms(conn_fake(r->c));
	uint8_t buf[FAKE_CHUNK];

	if (e->timeout_at >= 0 && now >= e->timeout_at) {
		exec_finish(e, 128 + FAKE_SIGTERM, FAKE_SIGTERM, true, false);
		return;
	}
	if (e->run.kind == RUN_SLEEP && now >= e->run.until) {
		exec_finish(e, 0, 0, false, false);
	} else if (e->run.kind == RUN_YES) {
		while (e->sent < e->run.total && conn_queued(r->c) < FAKE_OUTQ_HIGH &&
		       !conn_dead(r->c)) {
			size_t n = e->run.total - e->sent < FAKE_CHUNK ? e->run.total - e->sent
			                                               : FAKE_CHUNK;

			yes_fill(buf, e->sent, n);
			conn_send(r->c, FRAME_STDOUT, 0, r->id, buf, n);
			e->sent += n;
		}
		if (e->sent == e->run.total && !conn_dead(r->c))
			exec_finish(e, 0, 0, false, false);
	}
}

static int64_t exec_deadline(struct req *r)
{
	struct exec_req *e = (struct exec_req *)r;
	int64_t t = e->run.kind == RUN_SLEEP ? e->run.until : -1;

	if (e->timeout_at >= 0 && (t < 0 || e->timeout_at < t))
		t = e->timeout_at;
	return t;
}

static void exec_frame(struct req *r, const struct frame *f)
{
	struct exec_req *e = (struct exec_req *)r;

	if (f->type == FRAME_CANCEL) {
		exec_finish(e, 128 + FAKE_SIGTERM, FAKE_SIGTERM, false, true);
	} else if (f->type == FRAME_STDIN && e->run.kind == RUN_CAT) {
		if (f->len)
			conn_send(r->c, FRAME_STDOUT, 0, r->id, f->payload, f->len);
		if (f->flags & FRAME_F_END)
			exec_finish(e, 0, 0, false, false);
	}
}

static void exec_drop(struct req *r)
{
	free(r);
}

static const struct req_ops exec_ops = {
	.on_frame = exec_frame, .tick = exec_tick, .deadline = exec_deadline, .drop = exec_drop};

void op_exec(struct conn *c, uint32_t id, json_t *req)
{
	struct fake *fk = conn_fake(c);
	json_t *t = json_object_get(req, "timeout_ms"), *pty = json_object_get(req, "pty"), *env;
	const char *why;
	struct exec_req *e;

	if (fk->fail & FAIL_EXIT_ON_EXEC) {
		fprintf(stderr, "fake: exiting at an exec request (FAKE_VMM=exit-on-exec)\n");
		_exit(1);
	}
	why = exec_check_req(req);
	if (why) {
		conn_send_error(c, id, "bad_request", "%s", why);
		return;
	}
	e = calloc(1, sizeof(*e));
	env = exec_env(fk, req);
	if (!e || !env) {
		free(e);
		json_decref(env);
		conn_send_error(c, id, "io_error", "out of memory");
		return;
	}
	e->r.c = c;
	e->r.id = id;
	e->pty = json_is_true(pty) || json_is_object(pty);
	e->started = guest_ms(fk);
	e->timeout_at = json_integer_value(t) > 0 ? e->started + json_integer_value(t) : -1;
	fk->execs++;
	run_start(fk, json_object_get(req, "argv"), env, &e->run, exec_out, e);
	json_decref(env);
	if (e->run.kind == RUN_DONE)
		exec_finish(e, e->run.exit_code, 0, false, false);
	else if (e->run.kind == RUN_CAT && !json_is_true(json_object_get(req, "stdin")))
		exec_finish(e, 0, 0, false, false); /* cat of /dev/null */
	else
		req_register(c, &e->r, id, &exec_ops);
}
