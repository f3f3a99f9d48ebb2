// SPDX-License-Identifier: MIT
/* Starting, adopting, watching and signalling husk-vmm processes. */
#include "vmm_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define VMM_LOG_MAX (4 << 20)

struct vmm_proc {
	uv_poll_t poll;
	pid_t pid;
	int pidfd;
	int child; /* ours to reap */
	bool cloned_in_cgroup;
	uint64_t starttime;
	vmm_exit_fn on_exit;
	void *arg;
};

static int pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

uint64_t proc_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The name in parentheses may hold spaces; fields count from after it. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2,
	                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
	                 "%*d %*d %llu",
	                 &start) != 1)
		return 0;
	return start;
}

static void proc_free(uv_handle_t *h)
{
	struct vmm_proc *p = h->data;

	close(p->pidfd);
	free(p);
}

void vmm_proc_reap_release(struct vmm_proc *p)
{
	int st;

	if (p && p->child)
		waitpid(p->pid, &st, WNOHANG);
	vmm_proc_release(p);
}

void vmm_proc_release(struct vmm_proc *p)
{
	if (!p)
		return;
	uv_poll_stop(&p->poll);
	uv_close((uv_handle_t *)&p->poll, proc_free);
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
	struct vmm_proc *p = h->data;
	int st = 0, code = VMM_STATUS_UNKNOWN;

	(void)status;
	(void)events;
	if (p->child && waitpid(p->pid, &st, WNOHANG) == p->pid)
		code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	uv_poll_stop(&p->poll);
	if (p->on_exit)
		p->on_exit(p, code, p->arg);
}

static int proc_watch(uv_loop_t *loop, struct vmm_proc *p)
{
	int ret;

	p->pidfd = pidfd_open(p->pid);
	if (p->pidfd < 0)
		return -errno;
	fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
	ret = uv_poll_init(loop, &p->poll, p->pidfd);
	if (ret) {
		close(p->pidfd);
		return ret;
	}
	p->poll.data = p;
	/* Cannot fail for an initialised poll handle on a pollable fd. */
	return uv_poll_start(&p->poll, UV_READABLE, on_pidfd);
}

/*
 * Every descriptor from 3 up but keep1 and keep2 (-1: none) closed: three
 * close_range calls, not a close per number (a thousand system calls, 10 ms
 * and more of each VMM start nested); one at a time where there is none.
 */
static void close_others(int keep1, int keep2)
{
	int keep[2] = {keep1 < keep2 ? keep1 : keep2, keep1 < keep2 ? keep2 : keep1};
	unsigned from = 3;

	for (int i = 0; i < 2; i++) {
		if (keep[i] < (int)from)
			continue;
		if (keep[i] > (int)from &&
		    syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0U) < 0)
			goto slow;
		from = (unsigned)keep[i] + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0U) == 0)
		return;
slow:
	for (int fd = 3; fd < 1024; fd++)
		if (fd != keep1 && fd != keep2)
			close(fd);
}

/*
 * The child between fork and exec: only async-signal-safe calls. in_cgroup:
 * clone3 started it in s->cgroup already.
 */
static void child_exec(const struct vmm_spec *s, char *const argv[], int errfd, bool in_cgroup)
{
	char log[4096], old[4100];
	struct stat st;
	int fd, e;

	setsid();
	snprintf(log, sizeof(log), "%s/vmm.log", s->dir);
	/* Each VMM appends; one log past 4 MiB moves aside, the one before it goes. */
	if (stat(log, &st) == 0 && st.st_size > VMM_LOG_MAX) {
		snprintf(old, sizeof(old), "%s.1", log);
		rename(log, old);
	}
	/* The folder is the VMM's: what it left there under this name is not followed. */
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	fd = open("/dev/null", O_RDONLY);
	if (fd >= 0)
		dup2(fd, STDIN_FILENO);
	if (s->cgroup && !in_cgroup) {
		snprintf(log, sizeof(log), "%s/cgroup.procs", s->cgroup);
		fd = open(log, O_WRONLY);
		if (fd < 0 || write(fd, "0", 1) != 1)
			goto fail;
	}
	close_others(errfd, s->key_fd);
	/* The key's pipe is the one descriptor the VMM inherits (--key-fd). */
	if (s->key_fd >= 0 && fcntl(s->key_fd, F_SETFD, 0) < 0)
		goto fail;
	execv(argv[0], argv);
fail:
	e = errno;
	if (write(errfd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/*
 * A jailed VMM is the first process of a PID namespace of its own: it sees
 * no other process, and its pid here is still ours to wait for. With a
 * cgroup, clone3 starts it there (CLONE_INTO_CGROUP): moving a running
 * process by cgroup.procs waits on the cgroup lock, 14-24 ms nested of every
 * VMM start. A kernel without clone3 or that flag takes the move instead.
 */
static pid_t clone_child(const struct vmm_spec *s, bool *in_cgroup)
{
	struct clone_args args = {.exit_signal = SIGCHLD};
	int fd = s->cgroup ? open(s->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	pid_t pid = -1;

	*in_cgroup = false;
	if (fd >= 0) {
		args.flags = CLONE_INTO_CGROUP | (s->jail ? CLONE_NEWPID : 0);
		args.cgroup = (uint64_t)fd;
		pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
		close(fd);
		if (pid >= 0) {
			*in_cgroup = true;
			return pid;
		}
	}
	return s->jail ? (pid_t)syscall(SYS_clone, SIGCHLD | CLONE_NEWPID, NULL, NULL, NULL, NULL)
	               : fork();
}

/* husk-jail's part of argv: appended at a, the new count returned. */
static int jail_args(const struct vmm_spec *s, char **argv, int a, char *uid, size_t uidlen,
                     char *slot, size_t slotlen, char *fsize, size_t fsizelen, char *keyfd)
{
	const struct vmm_jail *j = s->jail;

	snprintf(uid, uidlen, "%u", j->uid);
	if (s->net_slot < 0)
		snprintf(slot, slotlen, "none");
	else
		snprintf(slot, slotlen, "%d", s->net_slot);
	snprintf(fsize, fsizelen, "%llu", (unsigned long long)j->fsize);
	argv[a++] = (char *)j->exe;
	argv[a++] = "--uid";
	argv[a++] = uid;
	argv[a++] = "--root";
	argv[a++] = (char *)j->root;
	argv[a++] = "--net";
	argv[a++] = slot;
	if (s->resolv) {
		argv[a++] = "--resolv";
		argv[a++] = (char *)s->resolv;
	}
	argv[a++] = "--rw";
	argv[a++] = (char *)j->rw;
	for (unsigned i = 0; i < j->nro && i < VMM_JAIL_PATHS; i++) {
		argv[a++] = "--ro";
		argv[a++] = (char *)j->ro[i];
	}
	for (unsigned i = 0; i < j->ndev && i < 4; i++) {
		argv[a++] = "--dev";
		argv[a++] = (char *)j->dev[i];
	}
	if (j->fsize) {
		argv[a++] = "--fsize";
		argv[a++] = fsize;
	}
	if (s->key_fd >= 0) {
		argv[a++] = "--keep-fd";
		argv[a++] = keyfd;
	}
	argv[a++] = "--";
	return a;
}

int vmm_proc_spawn(uv_loop_t *loop, const struct vmm_spec *s, vmm_exit_fn on_exit, void *arg,
                   struct vmm_proc **out, char *err, size_t errlen)
{
	char mem[32], vcpus[16], disk[4096], vsock[4096], control[4096], console[4096],
		cmdline[4096], slot[16], net[96], expose[4200], uid[16], fsize[24], keyfd[16];
	char *argv[48 + 2 * (VMM_JAIL_PATHS + 4)];
	int a = 0;
	struct vmm_proc *p;
	int pipefd[2], child_errno = 0, ret;
	bool in_cgroup;
	ssize_t n;
	pid_t pid;

	snprintf(mem, sizeof(mem), "%lluM", (unsigned long long)s->mem_mib);
	snprintf(vcpus, sizeof(vcpus), "%u", s->vcpus);
	snprintf(disk, sizeof(disk), "%s,serial=%s", s->disk, s->serial);
	snprintf(vsock, sizeof(vsock), "%s/vsock.sock", s->dir);
	snprintf(control, sizeof(control), "%s/control.sock", s->dir);
	snprintf(console, sizeof(console), "%s/console.log", s->dir);
	snprintf(cmdline, sizeof(cmdline), "quiet husk.root=/dev/vda%s%s", s->cmdline ? " " : "",
	         s->cmdline ? s->cmdline : "");
	snprintf(keyfd, sizeof(keyfd), "%d", s->key_fd);
	if (s->jail)
		a = jail_args(s, argv, a, uid, sizeof(uid), slot, sizeof(slot), fsize,
		              sizeof(fsize), keyfd);
	argv[a++] = (char *)s->vmm;
	for (unsigned v = 0; v < s->verbose && v < 2; v++)
		argv[a++] = "-v";
	/* A sealed snapshot's key, and those of encrypted disks, booting or not. */
	if (s->key_fd >= 0) {
		argv[a++] = "--key-fd";
		argv[a++] = keyfd;
	}
	if (s->restore) {
		/* A restored guest keeps the kernel and command line it booted with. */
		argv[a++] = "--restore";
		argv[a++] = (char *)s->restore;
		if (s->held)
			argv[a++] = "--held";
		if (s->mem_file) {
			argv[a++] = "--mem-file";
			argv[a++] = (char *)s->mem_file;
			/* Tests: each diff pause also checks the VMM's record of written pages. */
			if (getenv("HUSKD_VERIFY_DIRTY"))
				argv[a++] = "--verify-dirty";
		}
		if (s->extract) {
			argv[a++] = "--extract-memory";
			argv[a++] = (char *)s->extract;
			goto spawn;
		}
	} else {
		argv[a++] = "--kernel";
		argv[a++] = (char *)s->kernel;
		argv[a++] = "--initrd";
		argv[a++] = (char *)s->initrd;
		argv[a++] = "--cmdline";
		argv[a++] = cmdline;
	}
	argv[a++] = "--mem";
	argv[a++] = mem;
	argv[a++] = "--vcpus";
	argv[a++] = vcpus;
	argv[a++] = "--disk";
	argv[a++] = disk;
	argv[a++] = "--vsock";
	argv[a++] = vsock;
	argv[a++] = "--control";
	argv[a++] = control;
	argv[a++] = "--console";
	argv[a++] = console;
	if (s->jail && s->nic) {
		int w = snprintf(net, sizeof(net), "slirp");

		if (s->mac)
			w += snprintf(net + w, sizeof(net) - (size_t)w, ",mac=%s", s->mac);
		if (s->guest_host)
			w += snprintf(net + w, sizeof(net) - (size_t)w, ",ip=10.0.2.%u",
			              s->guest_host);
		if (s->net_rate)
			snprintf(net + w, sizeof(net) - (size_t)w, ",rate=%llu",
			         (unsigned long long)s->net_rate);
		argv[a++] = "--net";
		argv[a++] = net;
	}
	if (s->jail && s->nic && s->expose) {
		snprintf(expose, sizeof(expose), "%u:%s", s->expose, s->expose_path);
		argv[a++] = "--expose";
		argv[a++] = expose;
	}
spawn:
	argv[a] = NULL;
	p = calloc(1, sizeof(*p));
	if (!p || pipe2(pipefd, O_CLOEXEC) < 0) {
		free(p);
		snprintf(err, errlen, "cannot start husk-vmm: %s", strerror(errno));
		return -ENOMEM;
	}
	pid = clone_child(s, &in_cgroup);
	if (pid < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot start husk-vmm: fork: %s", strerror(errno));
		goto err_close;
	}
	if (pid == 0) {
		close(pipefd[0]);
		child_exec(s, argv, pipefd[1], in_cgroup);
	}
	close(pipefd[1]);
	/* The pipe closes on a successful exec; an errno arrives if it failed. */
	do {
		n = read(pipefd[0], &child_errno, sizeof(child_errno));
	} while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	if (n == sizeof(child_errno)) {
		waitpid(pid, NULL, 0);
		snprintf(err, errlen, "cannot start %s%s: %s", s->vmm,
		         s->cgroup ? " (or join its cgroup)" : "", strerror(child_errno));
		free(p);
		return -child_errno;
	}
	p->pid = pid;
	p->child = 1;
	p->cloned_in_cgroup = in_cgroup;
	p->starttime = proc_starttime(pid);
	p->on_exit = on_exit;
	p->arg = arg;
	ret = proc_watch(loop, p);
	if (ret) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		snprintf(err, errlen, "cannot watch husk-vmm: %s", strerror(-ret));
		free(p);
		return ret;
	}
	*out = p;
	return 0;

err_close:
	close(pipefd[0]);
	close(pipefd[1]);
	free(p);
	return ret;
}

int vmm_proc_adopt(uv_loop_t *loop, pid_t pid, uint64_t starttime, vmm_exit_fn on_exit, void *arg,
                   struct vmm_proc **out)
{
	struct vmm_proc *p;
	int ret;

	if (pid <= 0 || !starttime || proc_starttime(pid) != starttime)
		return -ESRCH;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (struct vmm_proc){.pid = pid, .starttime = starttime, .on_exit = on_exit, .arg = arg};
	ret = proc_watch(loop, p);
	if (ret) {
		free(p);
		return ret;
	}
	/* Between the check and the pidfd the process may have ended and its pid been reused. */
	if (proc_starttime(pid) != starttime) {
		vmm_proc_release(p);
		return -ESRCH;
	}
	*out = p;
	return 0;
}

pid_t vmm_proc_pid(const struct vmm_proc *p)
{
	return p->pid;
}

bool vmm_proc_cloned_in_cgroup(const struct vmm_proc *p)
{
	return p->cloned_in_cgroup;
}

uint64_t vmm_proc_starttime(const struct vmm_proc *p)
{
	return p->starttime;
}

int vmm_proc_kill(struct vmm_proc *p, int sig)
{
	/* Through the pidfd: never a process that merely reused the pid. */
	if (syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}
