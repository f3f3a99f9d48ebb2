// SPDX-License-Identifier: MIT
/*
 * Feeds an agent malformed frames and checks that each gets an error reply
 * and that the connection still serves a valid request afterwards.
 * usage: rawframes (--unix PATH | --vsock PATH)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"

static int failed;

static void check(int ok, const char *name, const char *detail)
{
	printf("%s agent/%s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : detail);
	failed |= !ok;
}

/* Waits for the reply to id; returns its type and leaves its code in code. */
static int reply(struct agent_client *c, uint32_t id, char *code, size_t len)
{
	struct frame f;

	for (;;) {
		if (agent_client_recv(c, &f))
			return -1;
		if (f.id != id)
			continue;
		json_t *j = json_loadb((const char *)f.payload, f.len, 0, NULL);
		const char *s = json_string_value(json_object_get(j, "code"));

		snprintf(code, len, "%s", s ? s : "");
		json_decref(j);
		return f.type;
	}
}

static int info_works(struct agent_client *c, uint32_t id)
{
	json_t *req = json_pack("{s:s}", "op", "info");
	char code[64];
	int ret = agent_client_send_json(c, FRAME_REQUEST, id, req);

	json_decref(req);
	return !ret && reply(c, id, code, sizeof(code)) == FRAME_RESULT;
}

static int raw(struct agent_client *c, const void *p, size_t len)
{
	return send(agent_client_fd(c), p, len, MSG_NOSIGNAL) == (ssize_t)len;
}

int main(int argc, char **argv)
{
	struct agent_client *c;
	char code[64];
	uint8_t hdr[FRAME_HDR_SIZE];
	int ret;

	if (argc != 3)
		return 2;
	ret = !strcmp(argv[1], "--unix")
	              ? agent_client_connect_unix(argv[2], &c)
	              : agent_client_connect_vsock(argv[2], AGENT_VSOCK_PORT, &c);
	/* Named like every other check, so a rerun that connects shows it passed. */
	check(!ret, "rawframes_connect", ret ? strerror(-ret) : "");
	if (ret)
		return 1;

	/* Not JSON, JSON but not an object, no op, unknown op. */
	ret = agent_client_send(c, FRAME_REQUEST, 0, 1, "{nope", 5);
	check(!ret && reply(c, 1, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "bad_json"),
	      "bad_json", code);
	ret = agent_client_send(c, FRAME_REQUEST, 0, 2, "[1,2]", 5);
	check(!ret && reply(c, 2, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "bad_json"),
	      "json_not_object", code);
	ret = agent_client_send(c, FRAME_REQUEST, 0, 3, "{\"x\":1}", 7);
	check(!ret && reply(c, 3, code, sizeof(code)) == FRAME_ERROR &&
	              !strcmp(code, "bad_request"),
	      "missing_op", code);
	ret = agent_client_send(c, FRAME_REQUEST, 0, 4, "{\"op\":\"launch\"}", 15);
	check(!ret && reply(c, 4, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "unknown_op"),
	      "unknown_op", code);
	ret = agent_client_send(c, 200, 0, 5, "x", 1);
	check(!ret && reply(c, 5, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "bad_frame"),
	      "unknown_frame_type", code);
	ret = agent_client_send(c, FRAME_STDIN, 0, 77, "x", 1);
	check(!ret && reply(c, 77, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "not_found"),
	      "stdin_for_unknown_id", code);
	ret = agent_client_send(c, FRAME_REQUEST, 0, 6, "{\"op\":\"exec\",\"argv\":[]}", 23);
	check(!ret && reply(c, 6, code, sizeof(code)) == FRAME_ERROR &&
	              !strcmp(code, "bad_request"),
	      "exec_empty_argv", code);

	/*
	 * resumed: every field is checked before the clock or anything else
	 * changes. The time given is now: this agent may run as root on a host.
	 */
	{
		struct timespec now;
		char req[256];

		static const char *const bad[][2] = {
			{"resumed_no_seed", "{\"op\":\"resumed\",\"time_ns\":%lld}"},
			{"resumed_bad_hostname", "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":"
		                                 "\"00\",\"hostname\":\"-a\"}"},
			{"resumed_long_hostname",
		         "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":\"00\",\"hostname\":\""
		         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}"},
			{"resumed_bad_boot_id",
		         "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":\"00\","
		         "\"boot_id\":\"0e078a7c-3158-4714-9d34-b3bea861ddbX\"}"},
			{"resumed_bad_machine_id", "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":"
		                                   "\"00\",\"machine_id\":\"ab\"}"},
			/* Never a good one here: it would take the host's own NIC. */
			{"resumed_bad_net_mac",
		         "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":\"00\",\"net\":{\"mac\":"
		         "\"01:00:00:00:00:01\",\"address\":\"10.0.2.20/"
		         "24\",\"gateway\":\"10.0.2.2\"}}"},
			{"resumed_net_no_gateway",
		         "{\"op\":\"resumed\",\"time_ns\":%lld,\"seed\":\"00\",\"net\":{\"mac\":"
		         "\"02:00:00:00:00:01\",\"address\":\"10.0.2.20/24\"}}"},
		};

		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			clock_gettime(CLOCK_REALTIME, &now);
			snprintf(req, sizeof(req), bad[i][1],
			         (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
			ret = agent_client_send(c, FRAME_REQUEST, 0, 20 + i, req, strlen(req));
			check(!ret && reply(c, 20 + i, code, sizeof(code)) == FRAME_ERROR &&
			              !strcmp(code, "bad_request"),
			      bad[i][0], code);
		}
	}

	/* 64 MiB announced: refused unread, and the stream stays in step. */
	{
		size_t big = 64U << 20, sent = 0;
		uint8_t *junk = calloc(1, 1 << 20);

		frame_encode_hdr(hdr, FRAME_REQUEST, 0, 7, (uint32_t)big);
		ret = raw(c, hdr, sizeof(hdr));
		while (ret && sent < big) {
			ret = raw(c, junk, 1 << 20);
			sent += 1 << 20;
		}
		free(junk);
		check(ret && reply(c, 7, code, sizeof(code)) == FRAME_ERROR &&
		              !strcmp(code, "frame_too_large"),
		      "frame_too_large", code);
		check(info_works(c, 8), "survives_bad_frames", "no reply to info after them");
	}

	/* A length below the header's own size loses framing: error, then close. */
	frame_encode_hdr(hdr, FRAME_REQUEST, 0, 9, 0);
	hdr[3] = 3;
	ret = raw(c, hdr, sizeof(hdr));
	check(ret && reply(c, 0, code, sizeof(code)) == FRAME_ERROR && !strcmp(code, "bad_frame"),
	      "impossible_length", code);
	agent_client_close(c);

	/* And the agent still takes new connections. */
	ret = !strcmp(argv[1], "--unix")
	              ? agent_client_connect_unix(argv[2], &c)
	              : agent_client_connect_vsock(argv[2], AGENT_VSOCK_PORT, &c);
	check(!ret && info_works(c, 1), "new_connection_after_close", "cannot talk to it");
	if (!ret)
		agent_client_close(c);
	return failed;
}
