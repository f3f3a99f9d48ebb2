// SPDX-License-Identifier: MIT
/*
 * Input read as it arrives (agent_input.read), against the real agent: a
 * stdin that has nothing yet makes the call wait, not end; more of it comes
 * after agent_call_input_ready; its end closes the process's stdin.
 */
#include <string.h>

#include "session_test.h"

struct source {
	const char *parts[3]; /* what each turn has; NULL: nothing yet */
	int at, reads, empty_reads;
	bool ended;
};

static long source_read(void *arg, void *buf, size_t cap, bool *end)
{
	struct source *src = arg;
	const char *p = src->parts[src->at];
	size_t n;

	src->reads++;
	if (!p) {
		src->empty_reads++;
		return 0;
	}
	n = strlen(p) < cap ? strlen(p) : cap;
	memcpy(buf, p, n);
	src->at++;
	/* The last part carries the end with it. */
	*end = src->at == 3;
	src->ended = *end;
	return (long)n;
}

static void t_stdin_pulled(const char *sock)
{
	struct source src = {.parts = {"hello ", NULL, NULL}};
	struct agent_input input = {.type = FRAME_STDIN, .read = source_read, .read_arg = &src};
	struct sess x = {0};
	struct call k = {0};
	int dones = 0;

	open_agent(sock, &x);
	k.dones = &dones;
	k.cancel_on = NULL;
	if (start(x.s, json_pack("{s:s, s:[s], s:b}", "op", "exec", "argv", "cat", "stdin", 1),
	          &input, &k))
		check(false, "stdin_pulled", "cannot start");
	/* cat echoes the first part; the call waits for the rest, asking no more. */
	while (!k.done && k.out_len < 6)
		uv_run(loop, UV_RUN_ONCE);
	check(!k.done && k.out && !strcmp(k.out, "hello ") && src.empty_reads == 1,
	      "stdin_pull_waits", "done %d, out '%s', %d empty reads", k.done, k.out ? k.out : "",
	      src.empty_reads);
	src.parts[1] = "pulled ";
	src.parts[2] = "world";
	agent_call_input_ready(k.c);
	wait_for(&dones, 1);
	check(k.done == 1 && k.rc == 0 && k.out && !strcmp(k.out, "hello pulled world") &&
	              src.ended && json_integer_value(json_object_get(k.reply, "exit_code")) == 0,
	      "stdin_pull_ends", "rc %d, out '%s', ended %d", k.rc, k.out ? k.out : "", src.ended);
	agent_session_close(x.s);
	drain();
	call_free(&k);
}

void session_pull_tests(const char *sock)
{
	t_stdin_pulled(sock);
}
