// SPDX-License-Identifier: MIT
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char **proc_build_env(json_t *defaults, json_t *extra, const char **why)
{
	json_t *merged = json_deep_copy(defaults ? defaults : json_object());
	const char *k;
	json_t *v;
	char **env;
	size_t n = 0;

	if (!merged) {
		*why = "out of memory";
		return NULL;
	}
	if (extra && !json_is_object(extra)) {
		*why = "env must be an object of strings";
		json_decref(merged);
		return NULL;
	}
	json_object_foreach(extra, k, v)
	{
		if (!*k || strchr(k, '=')) {
			*why = "env names must be non-empty and contain no '='";
			json_decref(merged);
			return NULL;
		}
		if (json_is_null(v))
			json_object_del(merged, k);
		else if (json_is_string(v))
			json_object_set(merged, k, v);
		else {
			*why = "env values must be strings (or null to unset)";
			json_decref(merged);
			return NULL;
		}
	}
	env = calloc(json_object_size(merged) + 1, sizeof(*env));
	if (!env) {
		*why = "out of memory";
		json_decref(merged);
		return NULL;
	}
	json_object_foreach(merged, k, v)
	{
		if (asprintf(&env[n], "%s=%s", k, json_string_value(v)) < 0) {
			env[n] = NULL;
			proc_free_env(env);
			json_decref(merged);
			*why = "out of memory";
			return NULL;
		}
		n++;
	}
	json_decref(merged);
	return env;
}

void proc_free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/*
 * The child after vfork(): it shares the agent's memory until exec, so it
 * writes nothing but its own stack and *err (why it could not run), and
 * leaves by exec or _exit. vfork, not fork: no copy of the agent's page
 * tables and no copy-on-write faults after it, which nested guests pay
 * dearly for on every exec.
 */
static void child_setup(const struct spawn_opts *o, int in, int out, int err, const char *pts,
                        volatile int *why) __attribute__((noreturn, noinline));
static void child_setup(const struct spawn_opts *o, int in, int out, int err, const char *pts,
                        volatile int *why)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	if (pts) {
		int t = open(pts, O_RDWR);

		if (t < 0)
			goto fail;
		ioctl(t, TIOCSCTTY, 0);
		in = out = err = t;
	}
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		goto fail;
	/* Groups first: once the uid is not root, nothing else may change. */
	if (o->as.set && (setgroups((size_t)o->as.ngroups, o->as.groups) < 0 ||
	                  setgid(o->as.gid) < 0 || setuid(o->as.uid) < 0))
		goto fail;
	if (o->cwd && chdir(o->cwd) < 0)
		goto fail;
	execvpe(o->argv[0], o->argv, (char **)o->envp);
fail:
	*why = errno ? errno : ENOEXEC;
	_exit(127);
}

/* Its own frame, so that no variable of the caller lives across vfork(). */
static pid_t __attribute__((noinline)) spawn_child(const struct spawn_opts *o, int in, int out,
                                                   int err, const char *pts, volatile int *why)
{
	pid_t pid = vfork();

	if (pid == 0)
		child_setup(o, in, out, err, pts, why);
	return pid;
}

static int pipe_nb(int p[2])
{
	return pipe2(p, O_CLOEXEC) < 0 ? -errno : 0;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int proc_spawn(struct agent *a, const struct spawn_opts *o, struct child **out)
{
	int in[2] = {-1, -1}, op[2] = {-1, -1}, ep[2] = {-1, -1};
	int master = -1, ret;
	volatile int why = 0;
	char pts[64] = "";
	struct child *ch;
	pid_t pid;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->out_fd = ch->err_fd = ch->in_fd = -1;
	if (o->pty) {
		struct winsize ws = {.ws_row = o->rows ? o->rows : 24,
		                     .ws_col = o->cols ? o->cols : 80};

		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || grantpt(master) || unlockpt(master) ||
		    ptsname_r(master, pts, sizeof(pts))) {
			ret = -errno;
			goto fail;
		}
		ioctl(master, TIOCSWINSZ, &ws);
	} else {
		if ((ret = pipe_nb(op)) || (ret = pipe_nb(ep)))
			goto fail;
		if (o->stdin_pipe) {
			if ((ret = pipe_nb(in)))
				goto fail;
		} else {
			in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (in[0] < 0) {
				ret = -errno;
				goto fail;
			}
		}
	}
	pid = spawn_child(o, in[0], op[1], ep[1], o->pty ? pts : NULL, &why);
	if (pid < 0) {
		ret = -errno;
		goto fail;
	}
	if (why) {
		/* It never ran: reap it here and report why. */
		waitpid(pid, NULL, 0);
		ret = -why;
		goto fail;
	}
	ch->a = a;
	ch->pid = pid;
	ch->started_ms = now_ms();
	ch->next = a->children;
	a->children = ch;
	if (o->pty) {
		ch->pty = true;
		ch->out_fd = master;
		ch->in_fd = dup(master);
		fcntl(ch->in_fd, F_SETFD, FD_CLOEXEC);
		master = -1;
	} else {
		ch->out_fd = op[0];
		ch->err_fd = ep[0];
		ch->in_fd = o->stdin_pipe ? in[1] : -1;
		op[0] = ep[0] = in[1] = -1;
		close(op[1]);
		close(ep[1]);
		close(in[0]);
		op[1] = ep[1] = in[0] = -1;
	}
	set_nonblock(ch->out_fd);
	if (ch->err_fd >= 0)
		set_nonblock(ch->err_fd);
	if (ch->in_fd >= 0)
		set_nonblock(ch->in_fd);
	*out = ch;
	return 0;
fail:
	for (int *fd = (int[]){in[0], in[1], op[0], op[1], ep[0], ep[1], master, -2}; *fd != -2;
	     fd++)
		if (*fd >= 0)
			close(*fd);
	free(ch);
	return ret;
}

void proc_signal_group(struct child *ch, int sig)
{
	/* Even after the leader exited, its group may live on. */
	kill(-ch->pid, sig);
}

void proc_free(struct child *ch)
{
	struct child **pp;

	for (pp = &ch->a->children; *pp; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	if (ch->out_fd >= 0)
		close(ch->out_fd);
	if (ch->err_fd >= 0)
		close(ch->err_fd);
	if (ch->in_fd >= 0)
		close(ch->in_fd);
	free(ch);
}

void proc_reap(struct agent *a)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct child *ch = a->children; ch; ch = ch->next) {
			if (ch->pid != pid)
				continue;
			ch->exited = true;
			ch->status = status;
			ch->ended_ms = now_ms();
			if (ch->on_exit)
				ch->on_exit(ch);
			break;
		}
	}
}
