// SPDX-License-Identifier: MIT
/*
 * The VMM's seccomp roles (vmm/confine/confine_rules.c, as confine.c loads them), loaded for real
 * in a child process: what a role allows runs, a syscall outside it kills the process with SIGSYS,
 * the whole process and not just the thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "unit.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECKED 1
#endif

/* How a child that entered role and then ran fn ended: its exit code, or 128 + signal. */
static int in_role(enum confine_role role, int (*fn)(void))
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		/* A hang guard, not a speed limit: a child here runs for milliseconds. */
		alarm(120);
		confine_mode = SECCOMP_KILL;
		if (confine_enter(role))
			_exit(100);
		_exit(fn());
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int write_pipe(void)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0 || write(p[1], "x", 1) != 1)
		return 1;
	return 0;
}

static int unix_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	return fd >= 0 ? 0 : 1;
}

static int inet_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	return fd >= 0 ? 0 : 1;
}

static int open_file(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0 ? 0 : 1;
}

static int rename_file(void)
{
	return rename("/nonexistent-a", "/nonexistent-b") < 0 ? 0 : 1;
}

static int exec_shell(void)
{
	execl("/bin/true", "true", (char *)NULL);
	return 1;
}

static int trace_me(void)
{
	return ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 ? 0 : 1;
}

/* isatty() on a pipe made before the filter: allowed everywhere, it answers ENOTTY. */
static int no_tty[2] = {-1, -1};

static int is_a_tty(void)
{
	return !isatty(no_tty[0]) && errno == ENOTTY ? 0 : 1;
}

/* A request no role makes once confined: a new VM (on a bad fd: it never gets that far). */
static int create_vm(void)
{
	return ioctl(-1, KVM_CREATE_VM, 0) < 0 ? 0 : 1;
}

static int socket_bytes(void)
{
	int n, fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;

	ok = fd >= 0 && ioctl(fd, FIONREAD, &n) == 0;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : 1;
}

static void *inet_in_thread(void *arg)
{
	(void)arg;
	inet_socket();
	return NULL;
}

/* A helper thread of a vCPU-role thread breaks the rule: the whole process goes. */
static int thread_breaks_rule(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, inet_in_thread, NULL))
		return 2;
	pthread_join(t, NULL);
	return 0;
}

static void *vcpu_under_main(void *arg)
{
	int *ok = arg;

	/* As a vCPU thread starts: its name, its own filter over the inherited one. */
	pthread_setname_np(pthread_self(), "vcpu0");
	*ok = confine_enter(ROLE_VCPU) == 0 && write(STDERR_FILENO, "", 0) == 0 &&
	      ioctl(-1, KVM_RUN, 0) < 0 && errno == EBADF;
	return NULL;
}

static int nested_roles(void)
{
	pthread_t t;
	int ok = 0;

	if (pthread_create(&t, NULL, vcpu_under_main, &ok))
		return 2;
	pthread_join(t, NULL);
	return ok ? 0 : 1;
}

#ifdef LEAK_CHECKED
/*
 * The test build's leak check at exit: its tracer is a process of its own
 * (clone without CLONE_THREAD) under the exiting thread's filter. Were it
 * killed, the exiting thread would wait for it forever (a guest test's
 * VMM hung after poweroff): in_role's alarm turns that into a failure.
 */
static int leak_check(void)
{
	__lsan_do_recoverable_leak_check();
	return 0;
}
#endif

UNIT_TEST(confine_roles_allow_their_work)
{
	/* A thread made under the main loop's filter enters its own (vm_run's order). */
	CHECK(in_role(ROLE_MAIN, nested_roles) == 0);
	CHECK(in_role(ROLE_MAIN, write_pipe) == 0);
	CHECK(in_role(ROLE_MAIN, unix_socket) == 0);
	CHECK(in_role(ROLE_MAIN, open_file) == 0);
	CHECK(in_role(ROLE_NET, inet_socket) == 0);
	CHECK(in_role(ROLE_NET, open_file) == 0);
	CHECK(in_role(ROLE_NET, socket_bytes) == 0);
	CHECK(pipe(no_tty) == 0);
	for (int r = 0; r < ROLE_COUNT; r++)
		CHECK(in_role((enum confine_role)r, is_a_tty) == 0);
	close(no_tty[0]);
	close(no_tty[1]);
#ifdef LEAK_CHECKED
	for (int r = 0; r < ROLE_COUNT; r++)
		CHECK(in_role((enum confine_role)r, leak_check) == 0);
#endif
}

UNIT_TEST(confine_outside_the_list_kills)
{
	const int sigsys = 128 + SIGSYS;

	/* No role runs programs or traces. */
	for (int r = 0; r < ROLE_COUNT; r++) {
		CHECK(in_role((enum confine_role)r, exec_shell) == sigsys);
		CHECK(in_role((enum confine_role)r, trace_me) == sigsys);
	}
	/* Internet sockets are the network thread's alone. */
	CHECK(in_role(ROLE_MAIN, inet_socket) == sigsys);
	CHECK(in_role(ROLE_VCPU, unix_socket) == sigsys);
	CHECK(in_role(ROLE_VCPU, rename_file) == sigsys);
	CHECK(in_role(ROLE_WORKER, write_pipe) == sigsys); /* no pipe2 */
	CHECK(in_role(ROLE_MAIN, thread_breaks_rule) == sigsys);
	/* ioctl by request: nothing makes a VM once confined; only libslirp asks FIONREAD. */
	for (int r = 0; r < ROLE_COUNT; r++)
		CHECK(in_role((enum confine_role)r, create_vm) == sigsys);
	CHECK(in_role(ROLE_VCPU, socket_bytes) == sigsys);
}
