/* SPDX-License-Identifier: MIT */
#ifndef HUSK_FAKE_CHECK_IO_H
#define HUSK_FAKE_CHECK_IO_H

/*
 * What fake-check drives fake-vmm with: processes, the control socket, and
 * the agent's side of the connection the fake dials. Every wait is bounded.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define WAIT_MS 10000 /* the bound on waiting for anything that should happen */
#define QUIET_MS 200  /* how long "nothing happens" is watched */
#define MAX_CHILDREN 32

/* The agent's connection, as the host accepted it. */
struct peer {
	int fd;
	struct frame_reader rd;
	uint8_t buf[65536];
	size_t off, len;
};

/* A request's outcome: its final frame and what came before it. */
struct reply {
	int type; /* FRAME_RESULT, FRAME_ERROR; 0: none in time */
	json_t *j;
	char out[4096], err[1024]; /* STDOUT or DATA, STDERR: the first bytes */
	size_t out_len, err_len;
	uint64_t out_total;
	uint32_t max_frame;
};

extern const char *fake, *dir; /* the fake-vmm binary, the scratch directory */
extern int failed;

/* Prints "PASS fakes/NAME", or "FAIL fakes/NAME: why" and marks the run failed. */
void check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* dir/name, in one of 8 rotating static buffers. */
char *path(const char *name);
/* fake-vmm with the arguments after log (NULL-terminated), FAKE_VMM=fail, output to dir/log. */
pid_t spawn(const char *fail, const char *log, ...);
/* SIGKILLs every fake spawned and not reaped by wait_exit (for atexit). */
void kill_children(void);
/* Its exit status (128 + signal if killed), or -1 if it runs on past ms. */
int wait_exit(pid_t pid, int ms);
/* The control socket at p, once the fake listens there; -1 if not within WAIT_MS. */
int ctl_connect(const char *p);
/* One command, its one-line answer (no newline; "" if none within ms). Static buffer. */
const char *ctl(int fd, const char *cmd, int ms);
/* A listening socket at p (replacing a file there); exits if it cannot. */
int listen_at(const char *p);
/* The next dial into lfd within ms, or NULL. */
struct peer *accept_peer(int lfd, int ms);
void peer_close(struct peer *pr);
/* 1 with a frame (its payload valid until the next call), 0 if none in ms, -1 at EOF. */
int recv_frame(struct peer *pr, struct frame *f, int ms);
void send_frame(struct peer *pr, uint8_t type, uint8_t flags, uint32_t id, const char *p, size_t n);
void request(struct peer *pr, uint32_t id, const char *json);
/* Frames for id until its RESULT or ERROR within ms (other ids' frames are skipped). */
void collect(struct peer *pr, uint32_t id, int ms, struct reply *r);
/* request, then collect within WAIT_MS. */
void call(struct peer *pr, uint32_t id, const char *json, struct reply *r);
json_int_t jint(json_t *j, const char *key);
/* A string member, or "". */
const char *jstr(json_t *j, const char *key);
/* Releases what collect kept. */
void done(struct reply *r);
/* Checks (as NAME) that the first frame is the HELLO of dial; its boot_id (static). */
const char *hello(struct peer *pr, unsigned dial, const char *name);
/* Whether p is a file that starts as a fake snapshot does. */
int snap_ok(const char *p);
/* The last line of dir/log, without its newline. Static buffer. */
const char *last_line(const char *log);

#endif
