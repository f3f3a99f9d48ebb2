// SPDX-License-Identifier: MIT
/*
 * husk-agentctl: talk to a guest agent from the shell. Runs one command or
 * moves one file; prints results as JSON; exits with the command's status.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_client.h"
#include "vmm_ctl.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: husk-agentctl (--unix PATH | --vsock PATH [--port N]) COMMAND [ARGS]\n"
	        "       husk-agentctl --control PATH status|pause|resume\n"
	        "\n"
	        "  --control PATH a VMM's control socket (husk-vmm --control PATH)\n"
	        "  --unix PATH    the agent's own Unix socket (husk-agent --listen unix:PATH)\n"
	        "  --vsock PATH   a VMM's vsock socket (husk-vmm --vsock PATH); agent port %d\n"
	        "\n"
	        "commands:\n"
	        "  exec [--stdin] [--pty] [--keep] [--timeout MS] [--cwd DIR] [--user U] [--env "
	        "K=V]... -- "
	        "ARGV...\n"
	        "                 runs ARGV, streams its output, exits with its exit code\n"
	        "  put LOCAL REMOTE [MODE]   write a file (atomically)\n"
	        "  get REMOTE LOCAL          read a file ('-' for stdout)\n"
	        "  tar-put LOCALDIR REMOTEDIR, tar-get REMOTEDIR LOCALDIR\n"
	        "  ls|stat|mkdir|rm PATH, rmdir [-r] PATH\n"
	        "  job-start -- ARGV..., job-list, job-get ID, job-output ID [stderr] [--follow], "
	        "job-stop ID "
	        "[force]\n"
	        "  env-set K=V|K=..., env-get, info\n"
	        "  watch DIR [-r] TEXT  prints DIR's changes as JSON lines; stops after one with "
	        "TEXT\n"
	        "  call JSON      any request; prints its result\n",
	        AGENT_VSOCK_PORT);
}

/* file.watch: its lines on stdout (flushed, so a reader sees them) until one holds until. */
static int cmd_watch(struct agent_client *c, const char *dir, bool recursive, const char *until)
{
	json_t *req = json_pack("{s:s, s:s, s:b}", "op", "file.watch", "path", dir, "recursive",
	                        recursive);
	uint32_t id = agent_client_next_id(c);
	bool cancelled = false;
	struct frame f;
	int ret = req ? agent_client_send_json(c, FRAME_REQUEST, id, req) : -ENOMEM;

	json_decref(req);
	while (ret == 0 && (ret = agent_client_recv(c, &f)) == 0) {
		if (f.id != id)
			continue;
		if (f.type == FRAME_RESULT || f.type == FRAME_ERROR) {
			fwrite(f.payload, 1, f.len, f.type == FRAME_RESULT ? stdout : stderr);
			putchar('\n');
			return f.type == FRAME_RESULT ? 0 : 1;
		}
		if (f.type != FRAME_DATA)
			continue;
		fwrite(f.payload, 1, f.len, stdout);
		fflush(stdout);
		/* A frame is whole lines: the agent sends one per frame. */
		if (!cancelled && memmem(f.payload, f.len, until, strlen(until))) {
			cancelled = true;
			ret = agent_client_send(c, FRAME_CANCEL, 0, id, NULL, 0);
		}
	}
	fprintf(stderr, "husk-agentctl: %s\n", strerror(-ret));
	return 2;
}

static int print_result(int ret, json_t *res)
{
	if (ret < 0) {
		fprintf(stderr, "husk-agentctl: %s\n", strerror(-ret));
		return 2;
	}
	if (ret == 1) {
		fprintf(stderr, "husk-agentctl: %s: %s\n",
		        json_string_value(json_object_get(res, "code")),
		        json_string_value(json_object_get(res, "message")));
		json_decref(res);
		return 1;
	}
	json_dumpf(res, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(res);
	return 0;
}

static json_t *argv_json(int argc, char **argv)
{
	json_t *a = json_array();

	for (int i = 0; i < argc; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

static struct agent_client *running;

static void on_interrupt(int sig)
{
	(void)sig;
	if (running)
		agent_client_cancel(running);
}

static int cmd_exec(struct agent_client *c, int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_interrupt};
	json_t *req = json_pack("{s:s}", "op", "exec"), *env = json_object(), *res = NULL;
	int use_stdin = 0, i, ret;

	for (i = 0; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--stdin"))
			use_stdin = 1;
		else if (!strcmp(argv[i], "--pty"))
			json_object_set_new(req, "pty", json_true());
		else if (!strcmp(argv[i], "--keep"))
			json_object_set_new(req, "keep", json_true());
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			json_object_set_new(req, "timeout_ms", json_integer(atoll(argv[++i])));
		else if (!strcmp(argv[i], "--cwd") && i + 1 < argc)
			json_object_set_new(req, "cwd", json_string(argv[++i]));
		else if (!strcmp(argv[i], "--user") && i + 1 < argc)
			json_object_set_new(req, "user", json_string(argv[++i]));
		else if (!strcmp(argv[i], "--env") && i + 1 < argc && strchr(argv[i + 1], '=')) {
			char *kv = argv[++i], *eq = strchr(kv, '=');

			*eq = '\0';
			json_object_set_new(env, kv, json_string(eq + 1));
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i + 1 >= argc) {
		usage(stderr);
		return 2;
	}
	json_object_set_new(req, "argv", argv_json(argc - i - 1, argv + i + 1));
	json_object_set_new(req, "env", env);
	json_object_set_new(req, "stdin", json_boolean(use_stdin));
	/* Ctrl-C or SIGTERM cancels the remote process; its result still comes. */
	running = c;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = agent_exec(c, req, use_stdin ? STDIN_FILENO : -1, STDOUT_FILENO, STDERR_FILENO, &res);
	json_decref(req);
	if (ret != 0)
		return print_result(ret, res);
	fflush(stdout);
	ret = (int)json_integer_value(json_object_get(res, "exit_code"));
	if (json_is_true(json_object_get(res, "timed_out")))
		fprintf(stderr, "husk-agentctl: timed out\n");
	if (json_is_true(json_object_get(res, "cancelled")))
		fprintf(stderr, "husk-agentctl: cancelled\n");
	json_decref(res);
	return ret;
}

static int simple(struct agent_client *c, json_t *req)
{
	json_t *res = NULL;
	int ret = agent_call(c, req, &res);

	json_decref(req);
	return print_result(ret, res);
}

static int streamed(struct agent_client *c, json_t *req, const char *local, int out)
{
	json_t *res = NULL;
	int fd = !strcmp(local, "-") ? (out ? STDOUT_FILENO : STDIN_FILENO)
	         : out               ? open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
	                             : open(local, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0) {
		fprintf(stderr, "husk-agentctl: %s: %s\n", local, strerror(errno));
		json_decref(req);
		return 2;
	}
	ret = out ? agent_stream_out(c, req, fd, &res) : agent_stream_in(c, req, fd, &res);
	json_decref(req);
	if (fd > STDERR_FILENO)
		close(fd);
	return out && ret == 0 && fd == STDOUT_FILENO ? (json_decref(res), 0)
	                                              : print_result(ret, res);
}

/* tar-put/tar-get pipe through the local tar. */
static int tar_pipe(struct agent_client *c, const char *op, const char *local, const char *remote)
{
	int upload = !strcmp(op, "tar.upload"), p[2], ret, st = 0;
	json_t *req = json_pack("{s:s, s:s}", "op", op, "path", remote), *res = NULL;
	pid_t pid;

	if (pipe(p) < 0 || (pid = fork()) < 0)
		return 2;
	if (pid == 0) {
		dup2(upload ? p[1] : p[0], upload ? STDOUT_FILENO : STDIN_FILENO);
		close(p[0]);
		close(p[1]);
		if (upload)
			execlp("tar", "tar", "-C", local, "-cf", "-", ".", (char *)NULL);
		else
			execlp("tar", "tar", "-C", local, "-xf", "-", (char *)NULL);
		_exit(127);
	}
	if (upload) {
		close(p[1]);
		ret = agent_stream_in(c, req, p[0], &res);
		close(p[0]);
	} else {
		close(p[0]);
		ret = agent_stream_out(c, req, p[1], &res);
		close(p[1]);
	}
	json_decref(req);
	waitpid(pid, &st, 0);
	ret = print_result(ret, res);
	return ret ? ret : (WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"unix", required_argument, NULL, 'u'},    {"vsock", required_argument, NULL, 'v'},
		{"port", required_argument, NULL, 'p'},    {"help", no_argument, NULL, 'h'},
		{"control", required_argument, NULL, 'c'}, {NULL, 0, NULL, 0},
	};
	char reply[512];
	const char *unix_path = NULL, *vsock_path = NULL, *cmd;
	unsigned port = AGENT_VSOCK_PORT;
	struct agent_client *c;
	int opt, ret, n;
	char **a;

	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (opt == 'u')
			unix_path = optarg;
		else if (opt == 'v')
			vsock_path = optarg;
		else if (opt == 'p')
			port = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 'c' && optind < argc) {
			ret = vmm_ctl(optarg, argv[optind], reply, sizeof(reply), 600000);
			printf("%s\n", ret == 0 || ret == -EPROTO ? reply : strerror(-ret));
			return ret ? 1 : 0;
		} else if (opt == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if ((!unix_path == !vsock_path) || optind >= argc) {
		usage(stderr);
		return 2;
	}
	ret = unix_path ? agent_client_connect_unix(unix_path, &c)
	                : agent_client_connect_vsock(vsock_path, port, &c);
	if (ret) {
		fprintf(stderr, "husk-agentctl: cannot reach the agent at %s: %s\n",
		        unix_path ? unix_path : vsock_path, strerror(-ret));
		return 2;
	}
	cmd = argv[optind];
	a = argv + optind + 1;
	n = argc - optind - 1;
#define REQ1(op, key) json_pack("{s:s, s:s}", "op", op, key, a[0])
	if (!strcmp(cmd, "exec"))
		ret = cmd_exec(c, n, a);
	else if (!strcmp(cmd, "put") && n >= 2) {
		json_t *req = json_pack("{s:s, s:s}", "op", "file.write", "path", a[1]);

		if (n > 2)
			json_object_set_new(req, "mode", json_integer(strtol(a[2], NULL, 8)));
		ret = streamed(c, req, a[0], 0);
	} else if (!strcmp(cmd, "get") && n == 2)
		ret = streamed(c, REQ1("file.read", "path"), a[1], 1);
	else if (!strcmp(cmd, "tar-put") && n == 2)
		ret = tar_pipe(c, "tar.upload", a[0], a[1]);
	else if (!strcmp(cmd, "tar-get") && n == 2)
		ret = tar_pipe(c, "tar.download", a[1], a[0]);
	else if (!strcmp(cmd, "ls") && n == 1)
		ret = simple(c, REQ1("file.list", "path"));
	else if (!strcmp(cmd, "stat") && n == 1)
		ret = simple(c, REQ1("file.stat", "path"));
	else if (!strcmp(cmd, "mkdir") && n == 1)
		ret = simple(c, REQ1("file.mkdir", "path"));
	else if (!strcmp(cmd, "rm") && n == 1)
		ret = simple(c, REQ1("file.rm", "path"));
	else if (!strcmp(cmd, "rmdir") && n >= 1) {
		int rec = n == 2 && !strcmp(a[0], "-r");

		ret = simple(c, json_pack("{s:s, s:s, s:b}", "op", "file.rmdir", "path", a[rec],
		                          "recursive", rec));
	} else if (!strcmp(cmd, "job-start") && n >= 2 && !strcmp(a[0], "--"))
		ret = simple(c, json_pack("{s:s, s:o}", "op", "job.start", "argv",
		                          argv_json(n - 1, a + 1)));
	else if (!strcmp(cmd, "job-list"))
		ret = simple(c, json_pack("{s:s}", "op", "job.list"));
	else if (!strcmp(cmd, "job-get") && n == 1)
		ret = simple(c, REQ1("job.get", "id"));
	else if (!strcmp(cmd, "job-output") && n >= 1) {
		bool follow = !strcmp(a[n - 1], "--follow");
		json_t *req = json_pack("{s:s, s:s, s:s, s:b}", "op", "job.output", "id", a[0],
		                        "stream", n - follow > 1 ? a[1] : "stdout", "follow",
		                        follow),
		       *res = NULL;

		ret = agent_stream_out(c, req, STDOUT_FILENO, &res);
		json_decref(req);
		if (ret == 0)
			json_decref(res);
		else
			ret = print_result(ret, res);
	} else if (!strcmp(cmd, "job-stop") && n >= 1)
		ret = simple(c, json_pack("{s:s, s:s, s:b}", "op", "job.stop", "id", a[0], "force",
		                          n > 1 && !strcmp(a[1], "force")));
	else if (!strcmp(cmd, "env-set") && n >= 1) {
		json_t *vars = json_object();

		for (int i = 0; i < n; i++) {
			char *eq = strchr(a[i], '=');

			if (!eq) {
				json_object_set_new(vars, a[i], json_null());
				continue;
			}
			*eq = '\0';
			json_object_set_new(vars, a[i], json_string(eq + 1));
		}
		ret = simple(c, json_pack("{s:s, s:o}", "op", "env.set", "vars", vars));
	} else if (!strcmp(cmd, "env-get"))
		ret = simple(c, json_pack("{s:s}", "op", "env.get"));
	else if (!strcmp(cmd, "info"))
		ret = simple(c, json_pack("{s:s}", "op", "info"));
	else if (!strcmp(cmd, "watch") && (n == 2 || (n == 3 && !strcmp(a[1], "-r"))))
		ret = cmd_watch(c, a[0], n == 3, a[n - 1]);
	else if (!strcmp(cmd, "call") && n == 1) {
		json_t *req = json_loads(a[0], 0, NULL);

		ret = req ? simple(c, req) : (fprintf(stderr, "husk-agentctl: not JSON\n"), 2);
	} else {
		usage(stderr);
		ret = 2;
	}
	agent_client_close(c);
	return ret;
}
