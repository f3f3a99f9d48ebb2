/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_PROC_H
#define HUSK_AGENT_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "user.h"

struct spawn_opts {
	char *const *argv; /* NULL-terminated; argv[0] is looked up in envp's PATH */
	char *const *envp;
	const char *cwd; /* NULL: the agent's */
	bool pty;        /* one terminal for stdin, stdout and stderr */
	unsigned short rows, cols;
	bool stdin_pipe;  /* else stdin is /dev/null */
	struct run_as as; /* as.set: the child takes this uid, gid and groups first */
};

/* A process the agent started, in a session and process group of its own. */
struct child {
	struct agent *a;
	pid_t pid;
	int out_fd, err_fd, in_fd; /* our ends, -1 once closed; a pty has only out_fd and in_fd */
	bool pty;
	bool exited;
	int status;                    /* wait status, once exited */
	uint64_t started_ms, ended_ms; /* CLOCK_MONOTONIC */
	void (*on_exit)(struct child *ch);
	void *owner;
	struct child *next;
};

/*
 * Starts a process. Returns 0 with *out set, or -errno: -ENOENT or -EACCES
 * when argv[0] cannot be executed (the child never ran), -ENOENT for a
 * missing cwd. The pipes are non-blocking and close-on-exec.
 */
int proc_spawn(struct agent *a, const struct spawn_opts *o, struct child **out)
	__attribute__((warn_unused_result));

/* Sends sig to the child's whole process group. */
void proc_signal_group(struct child *ch, int sig);

/* Closes our ends; forgets the child (a live one is reaped later as an orphan). */
void proc_free(struct child *ch);

/* Reaps every exited child (SIGCHLD); orphans too when the agent is PID 1. */
void proc_reap(struct agent *a);

/*
 * The environment for a process: defaults, overridden by extra (an object
 * of strings; null deletes). Returns a NULL-terminated array to free with
 * proc_free_env(), or NULL with *why set.
 */
char **proc_build_env(json_t *defaults, json_t *extra, const char **why);
void proc_free_env(char **env);

uint64_t now_ms(void);

#endif
