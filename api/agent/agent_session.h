/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_SESSION_H
#define HUSK_AGENT_SESSION_H

/*
 * One non-blocking connection to a guest agent on a libuv loop
 * (guest-agent/PROTOCOL.md), carrying any number of requests at once,
 * multiplexed by request id. huskd keeps one per sandbox: the connection
 * the guest's agent dialled in on (its HELLO is the sign that the guest is
 * up), so no request needs a thread or a connection of its own.
 *
 * Every function must be called on the loop's thread; every callback runs
 * there, never inside the call that caused it (a call's done() never runs
 * inside agent_call_start or agent_call_cancel; a failure they notice is
 * delivered from the loop), so callers may start, cancel or close from any
 * callback. Two exceptions, both documented below: agent_session_close()
 * ends the calls in flight itself, and agent_session_feed() runs what its
 * bytes cause, as a read from the socket would.
 *
 * Bytes from the agent are bounded before anything is allocated for them:
 * a frame announcing more than FRAME_MAX_PAYLOAD ends the session
 * (-EPROTO), as does any other framing error. Frames for ids not in flight
 * (late ones, after a call ended) are ignored.
 *
 * The session does not send a HELLO of its own: an agent that dials in
 * sends one; to hear from one reached by connecting, write a HELLO frame
 * to the fd before handing it over. libuv writes with write(2): the
 * process must ignore SIGPIPE (huskd does).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct agent_session;
struct agent_call;

struct agent_session_ops {
	/*
	 * The agent's HELLO frame arrived (payload parsed; NULL if it was not
	 * JSON), borrowed for the call. May be NULL.
	 */
	void (*hello)(void *arg, json_t *hello);
	/*
	 * The connection ended: rc 0 for EOF, else -errno (-ECONNRESET,
	 * -EPROTO for bad framing from the agent). Every call still in flight
	 * has had its done(rc or -ECONNRESET) before this. The session stays
	 * allocated, and unusable, until agent_session_close. May be NULL.
	 */
	void (*closed)(void *arg, int rc);
};

/*
 * Accepts the pending connection on server (a listening uv_pipe_t or TCP
 * handle whose connection callback is running) into a new session.
 * Returns 0 with *out, or -errno (nothing accepted).
 */
int agent_session_accept(uv_stream_t *server, const struct agent_session_ops *ops, void *arg,
                         struct agent_session **out) __attribute__((warn_unused_result));

/*
 * A session on fd, a connected stream socket whose ownership passes to the
 * session (closed with it, or at once on failure).
 */
int agent_session_open_fd(uv_loop_t *loop, int fd, const struct agent_session_ops *ops, void *arg,
                          struct agent_session **out) __attribute__((warn_unused_result));

/*
 * Closes the connection (if still open) and frees the session once its
 * handle has closed. Calls still in flight get their input's release()
 * and done(-ECANCELED) inside this call (the caller is tearing down, so
 * nothing can wait for the loop); closed() is not called, and once this
 * returns no callback of the session or its calls comes. Safe from any
 * of the session's callbacks. NULL is a no-op.
 */
void agent_session_close(struct agent_session *s);

/* Requests in flight. */
unsigned agent_session_calls(const struct agent_session *s);
/*
 * Bytes of frames handed to the socket whose write has not completed; an
 * input is sent only while this is below 256 KiB.
 */
size_t agent_session_queued(const struct agent_session *s);

/* What a call sends after its REQUEST frame (stdin of an exec, a file's bytes). */
struct agent_input {
	uint8_t type;     /* FRAME_STDIN or FRAME_DATA */
	const void *data; /* borrowed until release() or done() */
	size_t len;       /* 0: one empty frame flagged END */
	/*
	 * Called once the session no longer needs data (all of it queued, as
	 * copies; or the call cancelled or ended): from the loop (or inside
	 * agent_session_close), before done(). May be NULL.
	 */
	void (*release)(void *release_arg);
	void *release_arg;
	/*
	 * Instead of data and len: input that arrives later (a stream being
	 * written). read(read_arg, buf, cap, &end) gives up to cap bytes (end
	 * set: nothing follows them); 0 without end: none yet, and the session
	 * asks again after agent_call_input_ready(); < 0: no more (END goes out).
	 * Called from the loop as the write queue drains, never after release().
	 */
	long (*read)(void *read_arg, void *buf, size_t cap, bool *end);
	void *read_arg;
};

struct agent_call_ops {
	/* A STDOUT, STDERR or DATA frame's payload for this call. May be NULL. */
	void (*data)(void *arg, uint8_t type, const void *p, size_t len);
	/*
	 * The call ended, exactly once: rc 0 with the RESULT, 1 with the ERROR
	 * ({code, message}; also, with code bad_json, for a RESULT or ERROR
	 * that is not JSON), or -errno with reply NULL when the connection ended
	 * (-ECONNRESET, also for EOF, or the session's error such as -EPROTO)
	 * or the session was closed (-ECANCELED). reply is borrowed for the
	 * call. An answer that comes before all of the input was sent stops
	 * the input and sends CANCEL, so the agent drops a request still
	 * waiting for it.
	 */
	void (*done)(void *arg, int rc, json_t *reply);
};

/*
 * Sends req (a JSON object with "op"; the caller keeps its reference) as a
 * REQUEST under a fresh id, then, with in, in's bytes as frames of in->type
 * (at most 64 KiB each, the last flagged END), written as the socket takes
 * them so a big input is never queued whole. *out (may be NULL) gets the
 * call, valid until its done() returns. Returns 0, or -errno (-EPIPE once
 * the connection ended or the session is closing, -EINVAL for req not an
 * object or in->type not STDIN or DATA, -EMSGSIZE for req over
 * FRAME_MAX_PAYLOAD) with nothing sent and no callback to come.
 */
int agent_call_start(struct agent_session *s, json_t *req, const struct agent_input *in,
                     const struct agent_call_ops *ops, void *arg, struct agent_call **out)
	__attribute__((warn_unused_result));

/*
 * Asks the agent to stop the call (a CANCEL frame: an exec's process
 * group gets SIGTERM, then SIGKILL after its grace); done() still comes,
 * with whatever the agent answers. Input not yet sent is dropped (and
 * released). A second cancel sends nothing.
 */
void agent_call_cancel(struct agent_call *c);

/* A terminal's new size for a call running with a PTY (a WINDOW frame); 0 or -errno. */
int agent_call_window(struct agent_call *c, unsigned rows, unsigned cols)
	__attribute__((warn_unused_result));

/* A call whose input read() had none: there is more now (may call read() at once). */
void agent_call_input_ready(struct agent_call *c);

/*
 * Feeds bytes as if they came from the socket (for the fuzz target and
 * tests): the data() and done() callbacks they cause run inside this call;
 * a failure's are delivered from the loop. Returns 0, or the -errno that
 * ends the session (-ECANCELED if a callback closed it; -EPIPE if it had
 * ended; -EBUSY from inside the session's own callbacks).
 */
int agent_session_feed(struct agent_session *s, const void *buf, size_t len);

#endif
