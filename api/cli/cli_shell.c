// SPDX-License-Identifier: MIT
/*
 * husk ssh ID ['LINE' | -- CMD...] (also husk shell): a command on a terminal in the
 * sandbox - a login shell without one, LINE by sh -c - over POST /sandbox/ID/shell, one
 * request carrying both directions as frames of the agent protocol (API.md
 * §5.9, "a shell"). With a terminal here, it is put in raw mode for the session
 * and its size follows ours (SIGWINCH); without one (a pipe), our input is
 * sent as it is and its end ends the remote input. Exits with the remote
 * command's exit code.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "cli_http.h"
#include "proto.h"

struct session {
	struct frame_reader rd;
	int exit_code; /* -1 until the RESULT */
	char error[512];
	bool ended;
};

static volatile sig_atomic_t resized;
static struct termios saved;
static bool raw_on;

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static void raw_off(void)
{
	if (raw_on)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
	raw_on = false;
}

static void raw_mode(void)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &saved))
		return;
	t = saved;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) {
		raw_on = true;
		atexit(raw_off);
	}
}

static void term_size(unsigned *rows, unsigned *cols)
{
	struct winsize ws = {0};

	*rows = 24;
	*cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

static int frame_send(struct cli_conn *conn, uint8_t type, uint8_t flags, const void *p, size_t len)
{
	uint8_t buf[FRAME_HDR_SIZE + 4096];

	if (len > sizeof(buf) - FRAME_HDR_SIZE)
		return -EMSGSIZE;
	frame_encode_hdr(buf, type, flags, 1, (uint32_t)len);
	memcpy(buf + FRAME_HDR_SIZE, p, len);
	return cli_http_chunk(conn, buf, FRAME_HDR_SIZE + len);
}

/* The answer's frames: the terminal's bytes to our stdout, the end's exit code. */
static int on_frames(void *arg, const void *data, size_t len)
{
	struct session *s = arg;
	const uint8_t *p = data;
	struct frame f;

	while (len) {
		size_t used = 0;
		enum frame_status st = frame_reader_feed(&s->rd, p, len, &used, &f);
		json_t *j;

		p += used;
		len -= used;
		if (st == FRAME_NEED_MORE)
			break;
		if (st != FRAME_OK) {
			snprintf(s->error, sizeof(s->error), "huskd's answer is not shell frames");
			return 1;
		}
		if (f.type == FRAME_STDOUT || f.type == FRAME_STDERR) {
			if (write(STDOUT_FILENO, f.payload, f.len) < 0)
				return 1;
			continue;
		}
		j = json_loadb((const char *)f.payload, f.len, 0, NULL);
		if (f.type == FRAME_RESULT)
			s->exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
		else if (f.type == FRAME_ERROR)
			snprintf(s->error, sizeof(s->error), "%s",
			         json_string_value(json_object_get(j, "message"))
			                 ?: "the shell failed");
		json_decref(j);
		s->ended = true;
	}
	return 0;
}

static int pump(struct cli_conn *conn)
{
	bool in_open = true, tty = isatty(STDIN_FILENO);
	char buf[4096];
	int rc;

	for (;;) {
		struct pollfd pf[2] = {{.fd = cli_http_fd(conn), .events = POLLIN},
		                       {.fd = STDIN_FILENO, .events = POLLIN}};

		if (resized && tty) {
			unsigned rows, cols;
			char js[64];
			int n;

			resized = 0;
			term_size(&rows, &cols);
			n = snprintf(js, sizeof(js), "{\"rows\":%u,\"cols\":%u}", rows, cols);
			if (frame_send(conn, FRAME_WINDOW, 0, js, (size_t)n))
				return -EPIPE;
		}
		rc = poll(pf, in_open ? 2 : 1, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (pf[0].revents) {
			rc = cli_http_step(conn);
			if (rc)
				return rc < 0 ? rc : 0;
		}
		if (in_open && pf[1].revents) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

			if (n > 0 && frame_send(conn, FRAME_STDIN, 0, buf, (size_t)n))
				return -EPIPE;
			if (n <= 0) {
				/* The end of our input ends the remote one, and the request's body.
				 */
				in_open = false;
				if (frame_send(conn, FRAME_STDIN, FRAME_F_END, "", 0) ||
				    cli_http_chunk(conn, NULL, 0))
					return -EPIPE;
			}
		}
	}
}

int sandbox_shell(struct cli *c, int argc, char **argv)
{
	struct session s = {.exit_code = -1};
	struct cli_resp resp;
	struct cli_req rq = {
		.method = "POST", .chunked = true, .ctype = "application/vnd.husk.frames"};
	struct cli_conn *conn = NULL;
	struct sigaction sa = {.sa_handler = on_winch};
	struct sbuf t = {0};
	json_t *req;
	struct args a;
	unsigned rows, cols;
	bool show = false;
	const struct opt opts[] = {{"show", 0, OPT_FLAG, &show}, {NULL, 0, 0, NULL}};
	char *js;
	int rc;

	c->usage =
		"husk ssh ID ['SHELL COMMAND' | -- CMD [ARGS...]] [--show]   (also: husk shell)\n"
		"A terminal in sandbox ID: a login shell, a command line for sh -c, or CMD.\n"
		"Your terminal is put in raw mode while it lasts and its size follows yours;\n"
		"from a pipe, your input is sent as it is. Exits with the remote command's\n"
		"exit code. --show prints the request it would make instead.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "ID [COMMAND]", &a));
	term_size(&rows, &cols);
	req = json_pack("{sIsI}", "rows", (json_int_t)rows, "cols", (json_int_t)cols);
	if (a.npos > 1 && a.cmd) {
		json_decref(req);
		return args_bad(c, "give the command as one string or after '--', not both");
	}
	if (a.npos > 1) /* as the reference's: one string, run by the shell */
		json_object_set_new(req, "command", json_pack("[sss]", "/bin/sh", "-c", a.pos[1]));
	if (a.cmd && a.ncmd) {
		json_t *cmd = run_command_of(c, &a, 1);

		if (!cmd) {
			json_decref(req);
			return EXIT_USAGE;
		}
		json_object_set_new(req, "command", cmd);
	}
	js = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	sb_printf(&t, "/sandbox");
	sb_seg(&t, a.pos[0]);
	sb_printf(&t, "/shell");
	if (c->org_id)
		sb_query(&t, "orgId", c->org_id);
	if (show) {
		/* What it would do, and nothing else. */
		printf("POST %s%s\n%s\n", c->url_text, t.s, js);
		free(js);
		sb_free(&t);
		return 0;
	}
	rq.target = t.s;
	rq.key = c->key;
	rq.fn = on_frames;
	rq.arg = &s;
	frame_reader_init(&s.rd, FRAME_MAX_PAYLOAD);
	rc = js ? cli_http_start(&c->url, &rq, &resp, &conn) : -ENOMEM;
	if (!rc)
		rc = frame_send(conn, FRAME_REQUEST, 0, js, strlen(js));
	free(js);
	if (rc) {
		if (resp.unreachable)
			cli_print_failure(c, &resp);
		else
			fprintf(stderr, "husk: cannot open a shell in %s: %s\n", a.pos[0],
			        resp.err[0] ? resp.err : strerror(-rc));
		rc = 1;
		goto out;
	}
	if (isatty(STDIN_FILENO)) {
		sigaction(SIGWINCH, &sa, NULL);
		raw_mode();
	}
	rc = pump(conn);
	raw_off();
	if (resp.status && (resp.status < 200 || resp.status > 299)) {
		rc = cli_print_error(&resp);
	} else if (s.error[0]) {
		fprintf(stderr, "husk: %s\n", s.error);
		rc = 1;
	} else if (!s.ended) {
		fprintf(stderr, "husk: the shell's connection ended before its result%s%s\n",
		        rc < 0 ? ": " : "", rc < 0 ? strerror(-rc) : "");
		rc = 1;
	} else {
		rc = s.exit_code;
	}
out:
	cli_http_close(conn);
	cli_resp_free(&resp);
	frame_reader_free(&s.rd);
	sb_free(&t);
	return rc;
}
