/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_SESSION_INT_H
#define HUSK_AGENT_SESSION_INT_H

/*
 * Inside the agent session (agent_session.c: the connection and what comes
 * in; agent_call.c: the calls, what goes out, and the callbacks deferred to
 * the loop). agent_session.c calls into agent_call.c, never the other way.
 */
#include <stdbool.h>

#include "agent_session.h"
#include "proto.h"

/* An input goes out in frames of this size... */
#define IN_CHUNK (64 * 1024)
/* ...and the next one only while less than this is waiting to be written. */
#define IN_HIGH_WATER (256 * 1024)

enum session_state {
	S_OPEN,    /* reading and writing */
	S_FAILED,  /* the connection ended: the idle handle tells the calls, then closed() */
	S_ENDED,   /* ...and they have been told; waiting for agent_session_close */
	S_CLOSING, /* agent_session_close ran: no callback any more; handles closing */
};

struct agent_call {
	struct agent_session *s;
	struct agent_call *prev, *next;
	uint32_t id;
	struct agent_call_ops ops;
	void *arg;
	struct agent_input in;
	size_t in_off;
	bool in_active;   /* frames of in still to send (at least the END one) */
	bool in_waiting;  /* in.read() had nothing: skipped until agent_call_input_ready */
	bool release_due; /* in is no longer needed: release() from the loop */
	bool cancelled;   /* CANCEL sent, or the call is ending: none to send */
};

struct agent_session {
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_pipe_t pipe;
		uv_tcp_t tcp;
	} h;
	uv_idle_t kick; /* runs deferred callbacks from the loop */
	int open_handles;
	struct agent_session_ops ops;
	void *arg;
	enum session_state state;
	int err;     /* S_FAILED: what closed() gets (0 for EOF) */
	bool taking; /* inside take(): no agent_session_feed from a callback */
	uint32_t next_id;
	struct agent_call *head, *tail; /* in flight; the input pump rotates it */
	unsigned ncalls;
	size_t queued; /* bytes in uv_write requests not completed yet */
	struct frame_reader rd;
	/* Every read is parsed at once, so one buffer serves them all. */
	uint8_t rbuf[64 * 1024];
};

struct wreq {
	uv_write_t req;
	struct agent_session *s;
	size_t len;
	uint8_t buf[]; /* header, then payload */
};

/* Runs the deferred callbacks on the loop's next turn. */
void kick(struct agent_session *s);
/* The connection is gone (or unusable): its calls and owner are told from the loop. */
void fail(struct agent_session *s, int err);
/* Queues one frame, copied. 0 or -errno. */
int send_frame(struct agent_session *s, uint8_t type, uint8_t flags, uint32_t id, const void *p,
               size_t len);
struct agent_call *find_call(const struct agent_session *s, uint32_t id);
/* Takes c out of the session and tells its owner (release, then done). */
void end_call(struct agent_session *s, struct agent_call *c, int rc, json_t *reply);

#endif
