// SPDX-License-Identifier: MIT
/*
 * agent_session (api/agent/agent_session.h) on a libuv loop against a real
 * agent on a Unix socket, then (session_fake.c) against a fake one, for
 * what a real agent never does. Every wait is for an event, bounded by a
 * 60 s watchdog; every callback checks that it does not run inside the API
 * call that caused it. One PASS/FAIL line per check.
 * usage: session-test AGENT_SOCKET TMPDIR
 */
#include "session_test.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

uv_loop_t *loop;
const char *tmpdir;
int in_api;
int callbacks;
static uv_timer_t watchdog;
static bool expired;
static int failed;
static int api_violations; /* callbacks that ran inside the API call that caused them */

void check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s agent/session_%s", ok ? "PASS" : "FAIL", name);
	if (!ok) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		failed = 1;
	}
	printf("\n");
	fflush(stdout);
}

static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	expired = true;
	uv_stop(loop);
}

/* Runs the loop until *count reaches want; false after 60 s without it. */
bool wait_for(const int *count, int want)
{
	expired = false;
	uv_ref((uv_handle_t *)&watchdog);
	uv_timer_start(&watchdog, on_watchdog, 60000, 0);
	while (*count < want && !expired)
		uv_run(loop, UV_RUN_ONCE);
	uv_timer_stop(&watchdog);
	return !expired;
}

/* Runs the loop until nothing is left on it (closed sessions freed); false if that hangs. */
bool drain(void)
{
	expired = false;
	uv_unref((uv_handle_t *)&watchdog);
	uv_timer_start(&watchdog, on_watchdog, 60000, 0);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_timer_stop(&watchdog);
	return !expired;
}

static void cb_enter(void)
{
	api_violations += in_api > 0;
	callbacks++;
}

static void on_hello(void *arg, json_t *j)
{
	struct sess *x = arg;

	cb_enter();
	x->hellos++;
	json_decref(x->hello);
	x->hello = json_incref(j);
}

static void on_closed(void *arg, int rc)
{
	struct sess *x = arg;

	cb_enter();
	x->closed++;
	x->closed_rc = rc;
	x->dones_at_closed = x->dones ? *x->dones : 0;
}

const struct agent_session_ops sess_ops = {.hello = on_hello, .closed = on_closed};

static void on_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct call *k = arg;
	char *n;

	cb_enter();
	if (k->done)
		k->data_after_done++;
	if (type == FRAME_STDERR)
		return;
	n = realloc(k->out, k->out_len + len + 1);
	if (!n)
		abort();
	k->out = n;
	memcpy(k->out + k->out_len, p, len);
	k->out_len += len;
	k->out[k->out_len] = '\0';
	if (k->cancel_on && strstr(k->out, k->cancel_on)) {
		k->cancel_on = NULL;
		in_api++;
		agent_call_cancel(k->c);
		agent_call_cancel(k->c); /* a second one sends nothing */
		in_api--;
	}
	if (k->close_on_data) {
		k->close_on_data = false;
		agent_session_close(k->ses); /* from inside the session's own read */
		k->callbacks_at_close = callbacks;
	}
}

static void on_done(void *arg, int rc, json_t *reply)
{
	struct call *k = arg;

	cb_enter();
	k->done++;
	k->rc = rc;
	k->reply = json_incref(reply);
	k->c = NULL;
	if (k->dones)
		(*k->dones)++;
}

void on_release(void *arg)
{
	cb_enter();
	((struct call *)arg)->releases++;
}

const struct agent_call_ops call_ops = {.data = on_data, .done = on_done};

void call_free(struct call *k)
{
	json_decref(k->reply);
	free(k->out);
	memset(k, 0, sizeof(*k));
}

int start(struct agent_session *s, json_t *req, const struct agent_input *in, struct call *k)
{
	int ret;

	in_api++;
	ret = agent_call_start(s, req, in, &call_ops, k, &k->c);
	in_api--;
	json_decref(req);
	return ret;
}

const char *code_of(const struct call *k)
{
	const char *c = json_string_value(json_object_get(k->reply, "code"));

	return c ? c : "(none)";
}

int connect_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct agent_session *open_agent(const char *sock, struct sess *x)
{
	int fd = connect_unix(sock);

	if (fd < 0 || agent_session_open_fd(loop, fd, &sess_ops, x, &x->s)) {
		printf("FAIL agent/session_connect: %s\n", strerror(errno));
		exit(1);
	}
	return x->s;
}

uint8_t *random_bytes(size_t len, uint64_t seed)
{
	uint8_t *p = malloc(len);

	for (size_t i = 0; p && i < len; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)seed;
	}
	return p;
}

/* The largest agent_session_queued() seen on any loop turn, for the input pump's bound. */
static uv_check_t sampler;
static struct agent_session *sampled;
static size_t max_queued;

static void on_sample(uv_check_t *h)
{
	(void)h;
	if (sampled && agent_session_queued(sampled) > max_queued)
		max_queued = agent_session_queued(sampled);
}

static void t_hello_info_echo(const char *sock)
{
	struct sess x = {0};
	struct call info = {0}, echo = {0};
	uint8_t hello[FRAME_HDR_SIZE + 2];
	int fd = connect_unix(sock), dones = 0;

	/* The agent answers a HELLO; the session passes the answer to ops->hello. */
	frame_encode_hdr(hello, FRAME_HELLO, 0, 0, 2);
	memcpy(hello + FRAME_HDR_SIZE, "{}", 2);
	if (fd < 0 || write(fd, hello, sizeof(hello)) != (ssize_t)sizeof(hello) ||
	    agent_session_open_fd(loop, fd, &sess_ops, &x, &x.s)) {
		check(false, "info", "cannot connect to %s", sock);
		return;
	}
	info.dones = echo.dones = &dones;
	if (start(x.s, json_pack("{s:s}", "op", "info"), NULL, &info) ||
	    start(x.s, json_pack("{s:s, s:[s,s]}", "op", "exec", "argv", "echo", "hello session"),
	          NULL, &echo))
		check(false, "info", "cannot start");
	wait_for(&dones, 2);
	wait_for(&x.hellos, 1);
	check(x.hellos == 1 && json_integer_value(json_object_get(x.hello, "protocol")) == 1,
	      "hello", "%d hellos", x.hellos);
	check(info.done == 1 && info.rc == 0 &&
	              json_integer_value(json_object_get(info.reply, "protocol")) == 1 &&
	              json_is_object(json_object_get(info.reply, "memory")),
	      "info", "done %d rc %d", info.done, info.rc);
	check(echo.done == 1 && echo.rc == 0 && echo.out && !strcmp(echo.out, "hello session\n") &&
	              json_integer_value(json_object_get(echo.reply, "exit_code")) == 0,
	      "exec_echo", "done %d rc %d out '%s'", echo.done, echo.rc, echo.out ? echo.out : "");
	agent_session_close(x.s);
	drain();
	json_decref(x.hello);
	call_free(&info);
	call_free(&echo);
}

static void t_stdin_5mib(const char *sock)
{
	struct sess x = {0};
	size_t len = 5u << 20;
	uint8_t *in = random_bytes(len, 5);
	struct agent_input input = {.type = FRAME_STDIN,
	                            .data = in,
	                            .len = len,
	                            .release = on_release,
	                            .release_arg = NULL};
	struct call k = {0};
	int dones = 0;

	open_agent(sock, &x);
	input.release_arg = &k;
	k.dones = &dones;
	sampled = x.s;
	max_queued = 0;
	if (start(x.s, json_pack("{s:s, s:[s], s:b}", "op", "exec", "argv", "cat", "stdin", 1),
	          &input, &k))
		check(false, "stdin_5mib", "cannot start");
	if (agent_session_queued(x.s) > max_queued)
		max_queued = agent_session_queued(x.s);
	wait_for(&dones, 1);
	sampled = NULL;
	check(k.done == 1 && k.rc == 0 && k.out_len == len && !memcmp(k.out, in, len) &&
	              json_integer_value(json_object_get(k.reply, "exit_code")) == 0,
	      "stdin_5mib", "rc %d, %zu bytes back of %zu", k.rc, k.out_len, len);
	check(k.releases == 1, "input_released_once", "%d releases", k.releases);
	/* A chunk or so over the 256 KiB mark at most, never the whole input. */
	check(max_queued > 0 && max_queued <= (512u << 10), "input_queue_bounded",
	      "%zu bytes queued at most", max_queued);
	agent_session_close(x.s);
	drain();
	call_free(&k);
	free(in);
}

#define NCONC 50
#define NLINES 200

static void t_concurrent(const char *sock)
{
	static struct call k[NCONC];
	struct sess x = {0};
	int dones = 0, good = 0, started = 0;
	unsigned in_flight;
	char arg[16], want[NLINES * 24], *w;
	const char *script = "i=0; while [ $i -lt 200 ]; do echo c$1-$i; i=$((i+1)); done";

	open_agent(sock, &x);
	for (int i = 0; i < NCONC; i++) {
		snprintf(arg, sizeof(arg), "%d", i);
		k[i].dones = &dones;
		started += !start(x.s,
		                  json_pack("{s:s, s:[s,s,s,s,s]}", "op", "exec", "argv", "sh",
		                            "-c", script, "sh", arg),
		                  NULL, &k[i]);
	}
	in_flight = agent_session_calls(x.s);
	wait_for(&dones, NCONC);
	for (int i = 0; i < NCONC; i++) {
		w = want;
		for (int l = 0; l < NLINES; l++)
			w += sprintf(w, "c%d-%d\n", i, l);
		if (k[i].done == 1 && k[i].rc == 0 && k[i].out && !strcmp(k[i].out, want))
			good++;
		else if (good == i) /* the first wrong one, for the log */
			printf("# exec %d: done %d rc %d out '%.60s'\n", i, k[i].done, k[i].rc,
			       k[i].out ? k[i].out : "");
	}
	check(started == NCONC && in_flight == NCONC && good == NCONC &&
	              agent_session_calls(x.s) == 0,
	      "concurrent_50", "%d started, %u in flight, %d right", started, in_flight, good);
	agent_session_close(x.s);
	drain();
	for (int i = 0; i < NCONC; i++)
		call_free(&k[i]);
}

static void t_cancel(const char *sock)
{
	struct sess x = {0};
	struct call k = {0};
	int dones = 0;

	open_agent(sock, &x);
	k.dones = &dones;
	k.cancel_on = "ready";
	if (start(x.s,
	          json_pack("{s:s, s:[s,s,s]}", "op", "exec", "argv", "sh", "-c",
	                    "echo ready; exec sleep 600"),
	          NULL, &k))
		check(false, "cancel", "cannot start");
	wait_for(&dones, 1);
	check(k.done == 1 && k.rc == 0 && json_is_true(json_object_get(k.reply, "cancelled")),
	      "cancel", "done %d rc %d cancelled %d", k.done, k.rc,
	      json_is_true(json_object_get(k.reply, "cancelled")));
	agent_session_close(x.s);
	drain();
	call_free(&k);
}

static void t_files(const char *sock)
{
	struct sess x = {0};
	size_t len = 3u << 20;
	uint8_t *data = random_bytes(len, 3);
	struct agent_input input = {
		.type = FRAME_DATA, .data = data, .len = len, .release = NULL, .release_arg = NULL};
	struct call wr = {0}, rd = {0}, missing = {0}, empty = {0};
	struct agent_input none = {.type = FRAME_DATA,
	                           .data = NULL,
	                           .len = 0,
	                           .release = on_release,
	                           .release_arg = &empty};
	char path[4096], nopath[4096], epath[4096];
	int dones = 0;

	snprintf(path, sizeof(path), "%s/files/sub/three-mib", tmpdir);
	snprintf(nopath, sizeof(nopath), "%s/files/missing", tmpdir);
	snprintf(epath, sizeof(epath), "%s/files/empty", tmpdir);
	open_agent(sock, &x);
	wr.dones = rd.dones = missing.dones = empty.dones = &dones;
	if (start(x.s, json_pack("{s:s, s:s, s:b}", "op", "file.write", "path", path, "mkdirs", 1),
	          &input, &wr))
		check(false, "file_write", "cannot start");
	wait_for(&dones, 1);
	check(wr.done == 1 && wr.rc == 0 &&
	              json_integer_value(json_object_get(wr.reply, "size")) == (json_int_t)len,
	      "file_write_3mib", "rc %d code %s", wr.rc, code_of(&wr));
	if (start(x.s, json_pack("{s:s, s:s}", "op", "file.read", "path", path), NULL, &rd) ||
	    start(x.s, json_pack("{s:s, s:s}", "op", "file.read", "path", nopath), NULL, &missing))
		check(false, "file_read", "cannot start");
	wait_for(&dones, 3);
	check(rd.done == 1 && rd.rc == 0 && rd.out_len == len && !memcmp(rd.out, data, len),
	      "file_read_back", "rc %d, %zu bytes of %zu", rd.rc, rd.out_len, len);
	check(missing.done == 1 && missing.rc == 1 && !strcmp(code_of(&missing), "not_found"),
	      "error_reply", "rc %d code %s", missing.rc, code_of(&missing));
	/* An empty input: one empty DATA frame flagged END, sent (and released) at once. */
	if (start(x.s, json_pack("{s:s, s:s}", "op", "file.write", "path", epath), &none, &empty))
		check(false, "file_write_empty", "cannot start");
	wait_for(&dones, 4);
	check(empty.done == 1 && empty.rc == 0 && empty.releases == 1 &&
	              json_integer_value(json_object_get(empty.reply, "size")) == 0,
	      "file_write_empty", "rc %d code %s, %d releases", empty.rc, code_of(&empty),
	      empty.releases);
	agent_session_close(x.s);
	drain();
	call_free(&wr);
	call_free(&rd);
	call_free(&missing);
	call_free(&empty);
	free(data);
}

/* Closing from inside a data callback, with calls and a big input still going. */
static void t_close_in_flight(const char *sock)
{
	struct sess x = {0};
	struct call k[4] = {{0}};
	size_t len = 8u << 20;
	uint8_t *in = random_bytes(len, 8);
	struct agent_input input = {.type = FRAME_STDIN,
	                            .data = in,
	                            .len = len,
	                            .release = on_release,
	                            .release_arg = &k[3]};
	int dones = 0, started = 0;

	open_agent(sock, &x);
	for (int i = 0; i < 4; i++)
		k[i].dones = &dones;
	k[0].close_on_data = true;
	k[0].ses = x.s;
	started += !start(x.s,
	                  json_pack("{s:s, s:[s,s,s]}", "op", "exec", "argv", "sh", "-c",
	                            "echo ready; exec sleep 600"),
	                  NULL, &k[0]);
	for (int i = 1; i < 3; i++)
		started += !start(x.s,
		                  json_pack("{s:s, s:[s,s]}", "op", "exec", "argv", "sleep", "600"),
		                  NULL, &k[i]);
	/* Nothing reads this stdin: the agent holds 1 MiB, the rest stays with the session. */
	started += !start(
		x.s,
		json_pack("{s:s, s:[s,s], s:b}", "op", "exec", "argv", "sleep", "600", "stdin", 1),
		&input, &k[3]);
	wait_for(&dones, 4);
	drain();
	check(started == 4 && dones == 4 && k[0].rc == -ECANCELED && k[1].rc == -ECANCELED &&
	              k[2].rc == -ECANCELED && k[3].rc == -ECANCELED && !k[0].reply &&
	              k[3].releases == 1,
	      "close_in_flight", "%d started, %d done, rc %d %d %d %d, %d releases", started, dones,
	      k[0].rc, k[1].rc, k[2].rc, k[3].rc, k[3].releases);
	check(k[0].callbacks_at_close == callbacks && !x.closed && !k[0].data_after_done,
	      "nothing_after_close", "%d callbacks after close, closed %d",
	      callbacks - k[0].callbacks_at_close, x.closed);
	for (int i = 0; i < 4; i++)
		call_free(&k[i]);
	free(in);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: session-test AGENT_SOCKET TMPDIR\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* libuv writes with write(2): a hung-up peer is EPIPE */
	tmpdir = argv[2];
	loop = uv_default_loop();
	uv_timer_init(loop, &watchdog);
	uv_check_init(loop, &sampler);
	uv_check_start(&sampler, on_sample);
	uv_unref((uv_handle_t *)&sampler);

	t_hello_info_echo(argv[1]);
	t_stdin_5mib(argv[1]);
	t_concurrent(argv[1]);
	t_cancel(argv[1]);
	t_files(argv[1]);
	t_close_in_flight(argv[1]);
	session_pull_tests(argv[1]);
	session_fake_tests();

	check(!api_violations, "no_callback_inside_api", "%d callbacks ran inside the call",
	      api_violations);
	uv_close((uv_handle_t *)&watchdog, NULL);
	uv_close((uv_handle_t *)&sampler, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	check(uv_loop_close(loop) == 0, "all_handles_closed", "handles left on the loop");
	return failed;
}
