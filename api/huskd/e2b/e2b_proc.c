// SPDX-License-Identifier: MIT
/*
 * envd's process.Process (API.md §11.2), over the manager's commands beside
 * executions (sbx_shell_spawn): Start runs a command and streams its start
 * ({pid}), output and end; the command goes on when that stream's client
 * goes (E2B's disconnect), and Connect attaches another stream to it by pid
 * or tag. List, SendInput, CloseStdin, SendSignal and Update act on the
 * running ones. A pid is huskd's handle for the command (unique while
 * huskd runs), not the guest's process id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "proto.h"

/* Commands one sandbox runs for envd at once. */
#define E2B_PROCS_MAX 256
/* Output a stream's client has not read, at most: past it that stream is ended. */
#define E2B_UNREAD_MAX (16u << 20)

struct e2b_proc;

struct e2b_watch {
	struct e2b_watch *next;
	struct e2b_proc *p;
	struct http_req *r;
};

struct e2b_proc {
	struct e2b_proc *next;
	struct e2b *e;
	char sandbox[STORE_ID_LEN];
	uint32_t pid;
	char *tag;
	json_t *config; /* {cmd, args, envs, cwd?}: as List gives it */
	bool pty;
	bool starting; /* inside sbx_shell_spawn, which may end it at once */
	bool ended;    /* it ended while starting */
	struct sbx_shell *sh;
	struct e2b_watch *watchers;
};

int e2b_open(struct routes *rt, struct e2b **out)
{
	struct e2b *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->rt = rt;
	e->next_pid = 1000;
	*out = e;
	return 0;
}

static void watch_drop(struct e2b_watch *w, enum cx_code code, const char *err)
{
	struct e2b_watch **pp;

	for (pp = &w->p->watchers; *pp && *pp != w; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = w->next;
	http_on_close(w->r, NULL, NULL);
	cx_stream_end(w->r, code, err);
	free(w);
}

static void proc_free(struct e2b_proc *p)
{
	struct e2b_proc **pp;

	for (pp = &p->e->procs; *pp && *pp != p; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = p->next;
	while (p->watchers)
		watch_drop(p->watchers, CX_UNAVAILABLE, "huskd is stopping");
	free(p->tag);
	json_decref(p->config);
	free(p);
}

void e2b_close(struct e2b *e)
{
	if (!e)
		return;
	while (e->cpu) {
		struct e2b_cpu *next = e->cpu->next;

		free(e->cpu);
		e->cpu = next;
	}
	while (e->procs) {
		if (e->procs->sh)
			sbx_shell_close(e->procs->sh);
		proc_free(e->procs);
	}
	free(e);
}

static void send_all(struct e2b_proc *p, json_t *ev)
{
	struct e2b_watch *w, *next;

	for (w = p->watchers; w; w = next) {
		next = w->next;
		if (cx_stream_send(w->r, json_pack("{sO}", "event", ev)) == -ENOMEM ||
		    http_stream_queued(w->r) > E2B_UNREAD_MAX)
			watch_drop(
				w, CX_RESOURCE_EXHAUSTED,
				"the command's output waited unread past 16 MiB: this stream ended "
				"(the command goes on; Connect to it again)");
	}
	json_decref(ev);
}

static void proc_output(void *arg, int type, const void *bytes, size_t len)
{
	struct e2b_proc *p = arg;
	char *b = p->watchers ? e2b_b64(bytes, len) : NULL;

	if (!b)
		return;
	send_all(p, json_pack("{s{ss}}", "data",
	                      p->pty                 ? "pty"
	                      : type == FRAME_STDERR ? "stderr"
	                                             : "stdout",
	                      b));
	free(b);
}

static const char *signal_name(int sig)
{
	switch (sig) {
	case 1:
		return "hangup";
	case 2:
		return "interrupt";
	case 9:
		return "killed";
	case 15:
		return "terminated";
	default:
		return NULL;
	}
}

static void proc_ended(void *arg, json_t *result, const struct sbx_err *err)
{
	struct e2b_proc *p = arg;
	int sig = (int)json_integer_value(json_object_get(result, "signal"));
	int code = (int)json_integer_value(json_object_get(result, "exit_code"));
	const char *error = json_string_value(json_object_get(result, "error"));
	struct e2b_watch *w;
	char status[64];
	json_t *end;

	p->sh = NULL;
	if (err) {
		while ((w = p->watchers))
			watch_drop(w, cx_code_of(err), err->msg);
		if (p->starting)
			p->ended = true;
		else
			proc_free(p);
		return;
	}
	if (sig && signal_name(sig))
		snprintf(status, sizeof(status), "signal: %s", signal_name(sig));
	else if (sig)
		snprintf(status, sizeof(status), "signal: %d", sig);
	else
		snprintf(status, sizeof(status), "exit status %d", code);
	end = json_pack("{s{sisbss}}", "end", "exitCode", sig ? -1 : code, "exited", !sig, "status",
	                status);
	if (end && (error || sig))
		json_object_set_new(json_object_get(end, "end"), "error",
		                    json_string(error ? error : status));
	send_all(p, end);
	while ((w = p->watchers))
		watch_drop(w, 0, NULL);
	if (p->starting)
		p->ended = true;
	else
		proc_free(p);
}

static const struct sbx_shell_ops proc_ops = {.output = proc_output, .ended = proc_ended};

static void watcher_gone(struct http_req *r, void *arg)
{
	struct e2b_watch *w = arg;

	(void)r;
	watch_drop(w, 0, NULL);
}

/* Streams p's events to r from now on: its start event first. */
static void watch(struct e2b_proc *p, struct http_req *r)
{
	struct e2b_watch *w = calloc(1, sizeof(*w));

	cx_stream_begin(r);
	if (!w) {
		cx_stream_end(r, CX_UNAVAILABLE, "out of memory");
		return;
	}
	*w = (struct e2b_watch){.next = p->watchers, .p = p, .r = r};
	p->watchers = w;
	http_on_close(r, watcher_gone, w);
	if (cx_stream_send(r, json_pack("{s{s{si}}}", "event", "start", "pid", (int)p->pid)))
		watch_drop(w, CX_UNAVAILABLE, "out of memory");
}

/* A server stream that fails before it starts: its end carries the error. */
static void stream_fail(struct http_req *r, enum cx_code code, const char *msg)
{
	cx_stream_begin(r);
	cx_stream_end(r, code, msg);
}

/* The command a ProcessSelector {pid | tag} names in sandbox id, or NULL. */
static struct e2b_proc *find(struct e2b *e, const char *id, json_t *sel)
{
	json_t *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	uint32_t n = json_is_integer(pid)  ? (uint32_t)json_integer_value(pid)
	             : json_is_string(pid) ? (uint32_t)strtoul(json_string_value(pid), NULL, 10)
	                                   : 0;

	for (struct e2b_proc *p = e->procs; p; p = p->next)
		if (!strcmp(p->sandbox, id) && p->sh &&
		    ((n && p->pid == n) || (tag && p->tag && !strcmp(p->tag, tag))))
			return p;
	return NULL;
}

static unsigned count(struct e2b *e, const char *id)
{
	unsigned n = 0;

	for (struct e2b_proc *p = e->procs; p; p = p->next)
		n += !strcmp(p->sandbox, id);
	return n;
}

/* The user of "Authorization: Basic base64(user:)" (E2B's per-call user), or "" for none. */
static int basic_user(struct http_req *r, char *out, size_t len)
{
	const char *h = http_header(r, "Authorization");
	unsigned char *dec;
	size_t n;
	char *colon;

	out[0] = '\0';
	if (!h)
		return 0;
	if (strncmp(h, "Basic ", 6) || !(dec = e2b_unb64(h + 6, &n)))
		return -1;
	colon = memchr(dec, ':', n);
	if (!colon || (size_t)((unsigned char *)colon - dec) >= len) {
		free(dec);
		return -1;
	}
	memcpy(out, dec, (size_t)((unsigned char *)colon - dec));
	out[(unsigned char *)colon - dec] = '\0';
	free(dec);
	return 0;
}

static void proc_start(struct e2b *e, struct http_req *r, const char *id, json_t *msg)
{
	json_t *proc = json_object_get(msg, "process"), *pty = json_object_get(msg, "pty");
	json_t *size = json_object_get(pty, "size"), *argv, *envs = json_object_get(proc, "envs");
	const char *cmd = json_string_value(json_object_get(proc, "cmd"));
	const char *cwd = json_string_value(json_object_get(proc, "cwd"));
	const char *tag = json_string_value(json_object_get(msg, "tag"));
	/* As on E2B, a pause does not end it (its stream does end: see API.md §11.2). */
	struct sbx_shell_opts o = {.env = json_is_object(envs) ? envs : NULL,
	                           .cwd = cwd && *cwd ? cwd : NULL,
	                           .keep = true};
	struct sbx_shell *sh;
	struct e2b_proc *p;
	struct sbx_err err;
	char user[64];
	int rc;

	if (!cmd || !*cmd) {
		stream_fail(r, CX_INVALID_ARGUMENT, "process.cmd must name the program to run");
		return;
	}
	if (basic_user(r, user, sizeof(user))) {
		stream_fail(
			r, CX_INVALID_ARGUMENT,
			"Authorization must be 'Basic base64(user:)' naming the user to run as");
		return;
	}
	if (count(e, id) >= E2B_PROCS_MAX) {
		stream_fail(r, CX_RESOURCE_EXHAUSTED,
		            "this sandbox runs 256 commands for envd already: wait for one to end");
		return;
	}
	argv = json_pack("[s]", cmd);
	if (json_is_array(json_object_get(proc, "args")))
		json_array_extend(argv, json_object_get(proc, "args"));
	o.argv = argv;
	o.user = user[0] ? user : NULL;
	if (json_is_object(pty)) {
		o.rows = (unsigned)json_integer_value(json_object_get(size, "rows"));
		o.cols = (unsigned)json_integer_value(json_object_get(size, "cols"));
		if (!o.rows || !o.cols)
			o.rows = 24, o.cols = 80;
	} else {
		o.no_stdin = !json_is_true(json_object_get(msg, "stdin"));
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->config = json_pack("{sss[]s{}}", "cmd", cmd, "args", "envs"))) {
		free(p);
		json_decref(argv);
		stream_fail(r, CX_UNAVAILABLE, "out of memory");
		return;
	}
	if (json_is_array(json_object_get(proc, "args")))
		json_object_set(p->config, "args", json_object_get(proc, "args"));
	if (o.env)
		json_object_set(p->config, "envs", o.env);
	if (o.cwd)
		json_object_set_new(p->config, "cwd", json_string(o.cwd));
	*p = (struct e2b_proc){.e = e,
	                       .pid = e->next_pid++,
	                       .tag = tag ? strdup(tag) : NULL,
	                       .config = p->config,
	                       .pty = o.rows != 0};
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", id);
	p->next = e->procs;
	e->procs = p;
	watch(p, r); /* its start event goes first */
	p->starting = true;
	rc = sbx_shell_spawn(e->rt->m, id, &o, &proc_ops, p, &sh, &err);
	p->starting = false;
	json_decref(argv);
	if (rc) {
		while (p->watchers)
			watch_drop(p->watchers, cx_code_of(&err), err.msg);
		proc_free(p);
	} else if (p->ended) {
		proc_free(p);
	} else {
		p->sh = sh;
	}
}

static void proc_list(struct e2b *e, struct http_req *r, const char *id)
{
	json_t *list = json_array(), *info;

	for (struct e2b_proc *p = e->procs; p; p = p->next) {
		if (strcmp(p->sandbox, id) || !p->sh)
			continue;
		info = json_pack("{sOsi}", "config", p->config, "pid", (int)p->pid);
		if (info && p->tag)
			json_object_set_new(info, "tag", json_string(p->tag));
		if (info)
			json_array_append_new(list, info);
	}
	cx_reply(r, json_pack("{so}", "processes", list));
}

static void proc_input(struct e2b_proc *p, struct http_req *r, json_t *in, bool close)
{
	json_t *v = json_object_get(in, "stdin") ?: json_object_get(in, "pty");
	unsigned char *bytes = NULL;
	size_t len = 0;
	int rc;

	if (!close && !(bytes = e2b_unb64(json_string_value(v), &len))) {
		cx_error(r, CX_INVALID_ARGUMENT, "input must be {stdin: base64} or {pty: base64}");
		return;
	}
	rc = sbx_shell_input(p->sh, bytes, len, close);
	free(bytes);
	if (rc == -EPIPE)
		cx_error(r, CX_FAILED_PRECONDITION,
		         "process %u takes no more input: its stdin is closed, or it was started "
		         "without stdin: true",
		         p->pid);
	else if (rc == -ENOBUFS)
		cx_error(r, CX_RESOURCE_EXHAUSTED,
		         "process %u has 2 MiB of input it has not read yet: send more later",
		         p->pid);
	else if (rc)
		cx_error(r, CX_UNAVAILABLE, "out of memory");
	else
		cx_reply(r, json_object());
}

void e2b_process_call(struct routes *rt, struct http_req *r, const char *id, const char *method)
{
	struct e2b *e = rt->e2b;
	bool streaming = !strcmp(method, "Start") || !strcmp(method, "Connect");
	json_t *msg = cx_request(r, streaming);
	struct e2b_proc *p = NULL;
	int rc;

	if (!msg)
		return;
	if (!strcmp(method, "Start")) {
		proc_start(e, r, id, msg);
	} else if (!strcmp(method, "List")) {
		proc_list(e, r, id);
	} else if (!strcmp(method, "StreamInput")) {
		cx_error(r, CX_UNIMPLEMENTED,
		         "StreamInput is not served by huskd: send input with SendInput");
	} else if (!(p = find(e, id, json_object_get(msg, "process")))) {
		if (streaming)
			stream_fail(r, CX_NOT_FOUND, "no running process has that pid or tag");
		else if (strcmp(method, "SendInput") && strcmp(method, "CloseStdin") &&
		         strcmp(method, "SendSignal") && strcmp(method, "Update"))
			cx_error(r, CX_UNIMPLEMENTED, "process.Process has no method %s", method);
		else
			cx_error(r, CX_NOT_FOUND, "no running process has that pid or tag");
	} else if (!strcmp(method, "Connect")) {
		watch(p, r);
	} else if (!strcmp(method, "SendInput")) {
		proc_input(p, r, json_object_get(msg, "input"), false);
	} else if (!strcmp(method, "CloseStdin")) {
		proc_input(p, r, NULL, true);
	} else if (!strcmp(method, "SendSignal")) {
		/* SIGTERM, then SIGKILL after the agent's grace: the command ends either way. */
		sbx_shell_cancel(p->sh);
		cx_reply(r, json_object());
	} else if (!strcmp(method, "Update")) {
		json_t *size = json_object_get(json_object_get(msg, "pty"), "size");

		rc = sbx_shell_window(p->sh,
		                      (unsigned)json_integer_value(json_object_get(size, "rows")),
		                      (unsigned)json_integer_value(json_object_get(size, "cols")));
		if (rc == -ENOTTY)
			cx_error(r, CX_FAILED_PRECONDITION, "process %u has no terminal", p->pid);
		else if (rc)
			cx_error(r, CX_INVALID_ARGUMENT,
			         "pty.size must have rows and cols 1..1000");
		else
			cx_reply(r, json_object());
	} else {
		cx_error(r, CX_UNIMPLEMENTED, "process.Process has no method %s", method);
	}
	json_decref(msg);
}
