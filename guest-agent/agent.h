/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_H
#define HUSK_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define AGENT_VERSION "0.2.0"

/* A connection stops producing output above this many queued bytes. */
#define OUTQ_HIGH (1U << 20)
/* ... and producers resume once it drains below this. */
#define OUTQ_LOW (256U << 10)

struct evloop;
struct conn;
struct req;
struct child;
struct dialer;

struct agent {
	struct evloop *loop;
	int listen_fd;
	int sigchld_fd;
	bool pid1;
	struct conn *conns;
	struct child *children;
	struct job *jobs;
	unsigned nr_jobs, next_job_id;
	json_t *env;           /* the sandbox's default environment: object of strings */
	struct dialer *dialer; /* dialling home (dial.c), or NULL */
};

/* A request that lives past its first frame: it streams, or takes a stream. */
struct req_ops {
	/* A STDIN, DATA, CANCEL or WINDOW frame for this request. */
	void (*on_frame)(struct req *r, const struct frame *f);
	/* The connection's queue drained: produce more output if paused. */
	void (*on_drain)(struct req *r);
	/* The connection is going away: release everything, no more sends. */
	void (*on_conn_lost)(struct req *r);
};

struct req {
	struct conn *conn;
	uint32_t id;
	const struct req_ops *ops;
	struct req *next;
};

/* server.c */
struct agent *agent_create(void);
int agent_run(struct agent *a);
void agent_destroy(struct agent *a);

/*
 * Serves fd, a connected non-blocking socket, as one more connection: the
 * same frames, requests and flow control whichever side opened it. Takes
 * fd (closed on failure). Returns 0 (with *out if out is not NULL) or
 * -errno (-ENOMEM, or the loop is full).
 */
int conn_adopt(struct agent *a, int fd, struct conn **out) __attribute__((warn_unused_result));
/*
 * fn(arg) runs once when c closes, for whatever reason, after c is freed
 * (fn may open a new connection). fn NULL: nothing runs.
 */
void conn_on_close(struct conn *c, void (*fn)(void *arg), void *arg);

/* listen.c: listens on a Unix socket path or a vsock port; 0 or -errno. */
int agent_listen_unix(struct agent *a, const char *path) __attribute__((warn_unused_result));
int agent_listen_vsock(struct agent *a, unsigned port) __attribute__((warn_unused_result));

/*
 * dial.c: dials home to spec ("vsock:CID:PORT" or "unix:PATH"), says HELLO
 * on every connection it makes and dials again whenever it ends
 * (PROTOCOL.md, "Dialling home"). The first dial starts now; none ever
 * blocks the loop. Returns 0, -EINVAL for a bad spec, -EEXIST if already
 * dialling, or -errno.
 */
int agent_dial(struct agent *a, const char *spec) __attribute__((warn_unused_result));
/* Stops dialling; a dialled connection stays open but is no longer redialled. */
void dial_destroy(struct agent *a);

void req_register(struct conn *c, struct req *r, uint32_t id, const struct req_ops *ops);
void req_unregister(struct req *r);
struct req *req_find(struct conn *c, uint32_t id);

/* Queues a frame. Returns 0 or -errno; the connection may be closed after. */
int conn_send(struct conn *c, uint8_t type, uint8_t flags, uint32_t id, const void *payload,
              size_t len);
/* Queues a RESULT (or other JSON frame) and drops the reference to j. */
int conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j);
int conn_send_error(struct conn *c, uint32_t id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Bytes waiting to go out; producers hold back above OUTQ_HIGH. */
size_t conn_queued(const struct conn *c);
struct agent *conn_agent(const struct conn *c);
/* Stops (hold) or resumes reading a connection's input; holds nest. */
void conn_hold_input(struct conn *c, bool hold);

/* Maps an errno to the protocol's error code. */
const char *errno_code(int e);

/* Ops, one file each: given the parsed request, reply or register a req. */
void op_exec(struct conn *c, uint32_t id, json_t *req);
void op_job(struct conn *c, uint32_t id, const char *op, json_t *req);
void op_file(struct conn *c, uint32_t id, const char *op, json_t *req);
void op_tar(struct conn *c, uint32_t id, const char *op, json_t *req);
/* op_watch.c: file.watch, a folder's changes streamed (inotify). */
void op_watch(struct conn *c, uint32_t id, json_t *req);
void op_env(struct conn *c, uint32_t id, const char *op, json_t *req);
void op_info(struct conn *c, uint32_t id, json_t *req);
void op_resumed(struct conn *c, uint32_t id, json_t *req);
/* Kills every running job and forgets all jobs (the agent is exiting). */
void jobs_destroy(struct agent *a);

/* identity.c: host name, machine-id, boot id; 0 or -errno (-EINVAL: malformed). */
bool identity_hostname_valid(const char *name);
bool identity_boot_id_valid(const char *uuid);
int identity_set_hostname(const char *name);
int identity_set_machine_id(const char *hex);
int identity_set_boot_id(const char *uuid);

/* init.c: PID 1 duties */
/* PID 1's first steps: /proc, /sys, /dev and the console. */
void init_early(void);
/*
 * The rest of the system, in the final root: /tmp, /run, devpts, cgroups,
 * host name (husk.hostname=NAME, else "sandbox"), loopback, the resolver of
 * a networked guest, env.
 */
void init_system(const char *cmdline);
/*
 * Mounts the ext4 disk dev (waiting briefly for it), grows its file system
 * to the disk's size unless readonly, and makes it the root, taking /dev,
 * /proc and /sys along. Returns 0 or -errno with a message in err.
 */
int rootfs_switch(const char *dev, bool readonly, char *err, size_t errlen);
void init_poweroff(bool reboot) __attribute__((noreturn));
double init_uptime(void);

#endif
