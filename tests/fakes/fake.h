/* SPDX-License-Identifier: MIT */
#ifndef HUSK_FAKE_H
#define HUSK_FAKE_H

/*
 * fake-vmm: husk-vmm's command line and control socket with a pretend guest
 * whose agent dials home and serves built-in commands from memory, so huskd
 * can be tested on any host, without KVM. The contract is README.md beside
 * this file. One thread, one poll() loop (fake_vmm.c); the guest's clock
 * stands still while the fake VM is paused, and nothing of the guest runs.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "img.h"
#include "proto.h"

#define FAKE_OUTQ_HIGH (1U << 20)     /* producers stop with this much output queued */
#define FAKE_INPUT_HOLD (4U << 20)    /* the connection is not read while this is queued */
#define FAKE_CHUNK 65536              /* bytes per frame of a stream */
#define FAKE_FILES_MAX (256ULL << 20) /* file bytes kept in memory; past it: no_space */
#define FAKE_JOB_OUTPUT (1U << 20)    /* per job and stream: the newest bytes */
#define FAKE_SIGTERM 15
#define FAKE_SIGKILL 9

/* Failure modes, from the environment variable FAKE_VMM. */
enum {
	FAIL_NODIAL = 1 << 0,
	FAIL_CRASH_AT_START = 1 << 1,
	FAIL_HANG_CONTROL = 1 << 2,
	FAIL_SNAPSHOT = 1 << 3,
	FAIL_EXIT_ON_EXEC = 1 << 4,
	FAIL_NO_DIFF = 1 << 5,       /* an older husk-vmm: no snapshot-diff */
	FAIL_MUTE_READS = 1 << 6,    /* file.read taken, never answered (a stuck guest) */
	FAIL_ENDLESS_READS = 1 << 7, /* file.read sends zeros until cancelled */
	FAIL_DROP_RESUMED = 1 << 8,  /* the first "resumed" ends its connection unanswered */
	FAIL_MUTE_RESUMED = 1 << 9,  /* "resumed" taken, never answered (a stuck restored guest) */
};

/* A file's bytes, shared by the file and the reads streaming them. */
struct blob {
	unsigned refs;
	size_t len;
	uint8_t data[];
};

/* A file, or a directory made by file.mkdir (others are implied by paths). */
struct fentry {
	char *path; /* normalised and absolute */
	bool dir;
	unsigned mode;
	int64_t mtime_ms;
	struct blob *blob; /* files only, never NULL for them */
	struct fentry *next;
};

/* The pretend guest: what a snapshot keeps. */
struct guest {
	char boot_id[33];   /* 32 hex digits, new per boot */
	unsigned dial_port; /* husk.dial=PORT on the kernel command line; 0: never dials */
	unsigned dials;     /* successful dials, those before snapshots included */
	unsigned resumed;   /* "resumed" requests served */
	uint64_t mem;
	unsigned vcpus;
	json_t *env; /* env.set's defaults: an object of strings */
	struct fentry *files;
	uint64_t stored; /* bytes of the files, and of writes under way */
	char base[256];  /* the memory file's line it runs on (--mem-file), or "" */
	bool diff;       /* restored from a diff: its state is only whole over base */
	char sealed[17]; /* restored from a sealed snapshot: its key's fingerprint, or "" */
};

struct conn;
struct job;

struct fake {
	struct guest g;
	char key[17];  /* the fingerprint of the key its snapshots are sealed with, or "" */
	unsigned fail; /* FAIL_* */
	bool dropped;  /* FAIL_DROP_RESUMED done */
	bool paused;
	int64_t paused_at, paused_total; /* host monotonic ms */
	struct conn *conn;               /* the connection the agent dialled, or NULL */
	struct job *jobs;                /* newest first */
	unsigned execs;                  /* exec requests run since the VMM started */
	unsigned next_job;
};

/* A request that outlives its first frame: a stream, or a command running. */
struct req;
struct req_ops {
	/* A STDIN, DATA, CANCEL or WINDOW frame with the request's id. */
	void (*on_frame)(struct req *r, const struct frame *f);
	/* The guest runs: fire due timers, fill free room in the output queue. May be NULL. */
	void (*tick)(struct req *r);
	/* Guest ms of the request's next timer, or -1. May be NULL. */
	int64_t (*deadline)(struct req *r);
	/* The connection is going: free everything, send nothing. */
	void (*drop)(struct req *r);
};

struct req {
	struct conn *c;
	uint32_t id;
	const struct req_ops *ops;
	struct req *next;
};

/* fake_args.c: the command line, as husk-vmm takes it (huskd's options). */
#define EXIT_USAGE 2
struct fake_opts {
	const char *kernel, *initrd, *cmdline, *restore, *vsock, *control, *console, *disk;
	const char *mem_file, *extract; /* --mem-file, --extract-memory (with --restore) */
	int key_fd;                     /* --key-fd, -1: none */
	bool held;                      /* --held: paused until the control socket's resume */
	uint64_t mem;
	unsigned vcpus;
	bool mem_set, vcpus_set;
};

/* 0, or EXIT_USAGE after saying why on stderr, with the usage. */
int parse_args(int argc, char **argv, struct fake_opts *o);
/*
 * A key as husk-vmm takes it (64 hex digits, a line end may follow) into
 * its fingerprint (16 hex digits, FNV-1a: the fake seals nothing, it only
 * tells keys apart). 0 or -EINVAL.
 */
int key_fingerprint(const char *hex, size_t len, char out[17]);
/* fake_keys.c: the key pipe and the encrypted disk, as husk-vmm reads them. */
#define FAKE_DISK_KEYS 48
struct fake_keys {
	char snap[17]; /* the snapshot key's fingerprint, or "" */
	struct img_secret disk[FAKE_DISK_KEYS];
	struct img_secrets disks;
	unsigned masters; /* of disk[], master keys ("master HEX PATH") */
};
/* Reads fd to its end and closes it: 0, or -EINVAL for a line husk-vmm would refuse. */
int fake_keys_read(int fd, struct fake_keys *k);
/* Opens disk's chain with k's keys: 0, or -errno after saying why on stderr. */
int fake_disk_check(const char *disk, const struct fake_keys *k);
/* FAKE_VMM's comma-separated failure modes into *out (FAIL_*); -EINVAL after saying why. */
int parse_fail_modes(const char *s, unsigned *out);
/* The port of the last husk.dial=PORT of a kernel command line, or 0. */
unsigned dial_port(const char *cmdline);

/* Clocks, in ms: host monotonic, wall, and the guest's (stopped while paused). */
int64_t mono_ms(void);
int64_t wall_ms(void);
int64_t guest_ms(const struct fake *fk);

/* fake_agent.c: the dialled connection. conn_create takes fd and sends HELLO. */
struct conn *conn_create(struct fake *fk, int fd);
void conn_free(struct conn *c);
int conn_fd(const struct conn *c);
short conn_poll_events(const struct conn *c);
void conn_io(struct conn *c, short revents);
bool conn_dead(const struct conn *c);
/* Runs every request's tick; the earliest deadline of the requests, or -1. */
void conn_tick(struct conn *c);
int64_t conn_deadline(const struct conn *c);
struct fake *conn_fake(const struct conn *c);
size_t conn_queued(const struct conn *c);
/* Queue frames (flushed at once as far as the socket takes them); 0 or -errno. */
int conn_send(struct conn *c, uint8_t type, uint8_t flags, uint32_t id, const void *p, size_t n);
/* Sends j and drops the reference. */
int conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j);
int conn_send_error(struct conn *c, uint32_t id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void req_register(struct conn *c, struct req *r, uint32_t id, const struct req_ops *ops);
void req_unregister(struct req *r);

/* fake_fs.c: the guest's files, in memory. Paths given are normalised. */
/* "/a//b/./c/" → "/a/b/c" (malloc'd); a relative path counts from "/". NULL: no memory. */
char *fs_path_norm(const char *p);
/* A blob of len bytes, one reference; blob_put drops one. */
struct blob *blob_new(size_t len);
void blob_put(struct blob *b);
void fs_entry_free(struct fentry *e);
/* Whether path lies below dir. */
/* fake_watch.c: file.watch, and the changes it reports (path's type: create, write, remove). */
void watch_start(struct conn *c, uint32_t id, const char *path, json_t *req);
void watch_emit(const char *path, const char *type);
bool fs_below(const char *path, const char *dir);
struct fentry *fs_find(struct guest *g, const char *path);
bool fs_is_file(struct guest *g, const char *path);
/* "/", a directory file.mkdir made, or an ancestor of any entry. */
bool fs_is_dir(struct guest *g, const char *path);
/* 0, or the errno of using path's ancestors as directories (must_exist: its parent too). */
int fs_check_ancestors(struct guest *g, const char *path, bool must_exist);
/* A new entry (taking the reference to b); 0 or -ENOMEM (b dropped). */
int fs_add(struct guest *g, const char *path, bool dir, unsigned mode, struct blob *b);
/* Removes path (with below_too, everything below it); its parent stays a directory. */
void fs_remove(struct guest *g, const char *path, bool below_too);
/* An entry as file.list and file.stat give it; f NULL: a directory implied by a path. */
json_t *fs_entry_json(const char *name, const struct fentry *f, int64_t mtime_ms);

/* fake_files.c: the file.* ops. */
void op_file(struct conn *c, uint32_t id, const char *op, json_t *req);

/* fake_exec.c: exec of the built-in commands. */
enum run_kind { RUN_DONE, RUN_SLEEP, RUN_CAT, RUN_YES };

/* One built-in command, started for an exec or a job. */
struct run {
	enum run_kind kind;
	int exit_code;  /* RUN_DONE */
	bool not_found; /* RUN_DONE: exit 127, no such command */
	int64_t until;  /* RUN_SLEEP: guest ms it ends at */
	uint64_t total; /* RUN_YES: bytes to write */
};

/* Where a command's output goes: frames of an exec, or a job's rings. */
typedef void out_fn(void *ctx, uint8_t type, const void *p, size_t n);

/*
 * Starts argv (checked by exec_check_req) with environment env: a command
 * that ends at once writes its output through out and is RUN_DONE.
 */
void run_start(struct fake *fk, json_t *argv, json_t *env, struct run *r, out_fn *out, void *ctx);
/* NULL if req's exec options are well formed (as husk-agent checks them), else why not. */
const char *exec_check_req(json_t *req);
/* env.set's defaults overridden by req's "env" (null deletes): a new object, or NULL. */
json_t *exec_env(struct fake *fk, json_t *req);
/* n bytes of "y\n" repeated, from byte off of that stream. */
void yes_fill(uint8_t *buf, uint64_t off, size_t n);
void op_exec(struct conn *c, uint32_t id, json_t *req);

/* fake_jobs.c: jobs running the built-in commands in the background. */
void op_job(struct conn *c, uint32_t id, const char *op, json_t *req);
void jobs_tick(struct fake *fk);
int64_t jobs_deadline(const struct fake *fk);
void jobs_free(struct fake *fk);

/*
 * fake_snap.c: the guest's state in a file; guest_free releases it. A diff
 * names the memory file it goes over (g.base), as the real one names its base.
 */
int snap_save(const struct fake *fk, const char *path, bool diff, char *err, size_t errlen)
	__attribute__((warn_unused_result));
/* 0, or -1 when path is missing or not a fake snapshot (g is then empty). */
int snap_load(struct guest *g, const char *path) __attribute__((warn_unused_result));
void guest_free(struct guest *g);

#endif
