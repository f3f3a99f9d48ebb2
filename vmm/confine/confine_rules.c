// SPDX-License-Identifier: MIT
/*
 * The VMM's seccomp allowlists, one per thread role (confine.h), as data:
 * a syscall is in a role's list when that thread is seen to need it. Every
 * thread also gets what glibc's own machinery needs (malloc, futexes,
 * logging, thread exit). Built with libseccomp at build time, by
 * confine_gen.c; default action: kill the process.
 *
 * What is narrowed by argument: socket() to AF_UNIX outside the network
 * thread (the host side of vsock and the control socket are Unix sockets;
 * only libslirp opens internet sockets, in the VMM's own network namespace).
 * ioctl() to the requests each role makes once confined: the vCPUs run and
 * raise interrupts, the main loop saves state for snapshots, the lazy
 * restorer places pages, libslirp asks how much a socket holds. Making a
 * VM, vCPUs, memory slots or event wiring happens before any filter.
 */
#include "confine_rules.h"

#include <errno.h>
#include <linux/fs.h>
#include <linux/kvm.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>

#define UNIX_ONLY 1   /* socket(): AF_UNIX alone */
#define NAME_OR_NNP 2 /* prctl(): naming the thread, no_new_privs (libseccomp sets it) */
#define LEAK_TRACER 3 /* ptrace(): the requests the test build's leak check makes */

struct rule {
	const char *name;
	int narrow;
};

#define END             \
	{               \
		NULL, 0 \
	}

/* Every thread: glibc's allocator, locks and thread exit, logging, time. */
static const struct rule common[] = {
	{"futex", 0},
	{"mmap", 0},
	{"munmap", 0},
	{"mprotect", 0},
	{"madvise", 0},
	{"brk", 0},
	{"mremap", 0},
	{"write", 0},
	{"writev", 0},
	{"close", 0},
	{"clock_gettime", 0},
	{"clock_nanosleep", 0},
	{"nanosleep", 0},
	{"gettid", 0},
	{"getpid", 0},
	{"sched_yield", 0},
	{"rt_sigprocmask", 0},
	{"rt_sigreturn", 0},
	{"restart_syscall", 0},
	{"exit", 0},
	{"exit_group", 0},
	{"tgkill", 0},
	{"rseq", 0},
	{"set_robust_list", 0},
	{"getrandom", 0},
	/* glibc sets its own signal handler at a process's first pthread_create. */
	{"rt_sigaction", 0},
	/* A thread names itself and loads its role's filter under the one it inherited. */
	{"prctl", NAME_OR_NNP},
	{"seccomp", 0},
	END,
};

/* Every thread of a sanitized build. */
static const struct rule sanitized_common[] = {
	/* The sanitizers' runtime: thread set-up, and the report it writes before dying. */
	{"sigaltstack", 0},
	{"prctl", 0},
	{"prlimit64", 0},
	{"getrlimit", 0},
	{"sched_getaffinity", 0},
	{"openat", 0},
	{"readlink", 0},
	{"read", 0},
	{"fstat", 0},
	{"newfstatat", 0},
	{"uname", 0},
	{"getppid", 0},
	{"pread64", 0},
	{"lseek", 0},
	/*
         * The leak check at exit: a tracer process (clone, no CLONE_THREAD)
         * under the exiting thread's filter attaches to every thread and reads
         * its registers; killed, it would leave the exit waiting forever.
         */
	{"clone", 0},
	{"open", 0},
	{"getdents", 0},
	{"getdents64", 0},
	{"wait4", 0},
	{"kill", 0},
	{"ptrace", LEAK_TRACER},
	END,
};

/* Reading and writing descriptors it holds: disks, sockets, eventfds, the console. */
#define IO_RULES                                                                                   \
	{"read", 0}, {"readv", 0}, {"pread64", 0}, {"preadv", 0}, {"preadv2", 0}, {"pwrite64", 0}, \
		{"pwritev", 0}, {"pwritev2", 0}, {"fsync", 0}, {"fdatasync", 0}, {"fallocate", 0}, \
		{"ftruncate", 0}, {"lseek", 0}, {"fstat", 0}, {"newfstatat", 0}, {"fcntl", 0},     \
		{"sendmsg", 0}, {"recvmsg", 0}, {"sendto", 0}, {"recvfrom", 0}, {"shutdown", 0},   \
		{"getsockopt", 0}, {"setsockopt", 0},                                              \
	{                                                                                          \
		"epoll_ctl", 0                                                                     \
	}

static const struct rule main_loop[] = {
	IO_RULES,
	{"epoll_wait", 0},
	{"epoll_pwait", 0},
	{"poll", 0},
	{"ppoll", 0},
	{"accept4", 0},
	{"socket", UNIX_ONLY},
	{"connect", 0},
	{"bind", 0},
	{"listen", 0},
	{"getsockname", 0},
	{"eventfd2", 0},
	{"timerfd_create", 0},
	{"timerfd_settime", 0},
	{"pipe2", 0},
	/* A snapshot: its file made beside the target, then renamed over it. */
	{"openat", 0},
	{"renameat", 0},
	{"renameat2", 0},
	{"rename", 0},
	{"unlinkat", 0},
	{"unlink", 0},
	{"statx", 0},
	{"sync_file_range", 0},
	/* Its compression threads. */
	{"clone", 0},
	{"clone3", 0},
	{"sched_getaffinity", 0},
	END,
};

/* A vCPU handles its exits itself: device registers, queue kicks, the console. */
static const struct rule vcpu[] = {
	IO_RULES,
	{"eventfd2", 0},
	END,
};

/* libslirp: the guest's connections as the VMM's own sockets, /etc/resolv.conf for DNS. */
static const struct rule net[] = {
	IO_RULES,           {"poll", 0},
	{"ppoll", 0},       {"socket", 0},
	{"connect", 0},     {"bind", 0},
	{"listen", 0},      {"accept", 0},
	{"accept4", 0},     {"getsockname", 0},
	{"getpeername", 0}, {"openat", 0},
	{"statx", 0},       END,
};

static const struct rule lazy[] = {
	IO_RULES,
	{"poll", 0},
	{"ppoll", 0},
	END,
};

/* (openat: seen from a snapshot worker in the release build; glibc's malloc, as main.c says.) */
static const struct rule worker[] = {
	{"read", 0},   {"pread64", 0}, {"pwrite64", 0},   {"pwritev", 0}, {"lseek", 0},
	{"openat", 0}, {"fstat", 0},   {"newfstatat", 0}, {"fsync", 0},   {"fdatasync", 0},
	END,
};

/* ioctl requests, each list ending in 0. Every thread: isatty() (glibc's stdio). */
static const unsigned long common_ioctls[] = {TCGETS, 0};
/* KVM_GET_REGS: the RIP in a crash's message. */
static const unsigned long vcpu_ioctls[] = {KVM_RUN, KVM_IRQ_LINE, KVM_GET_REGS, 0};
/* The vCPU threads start under the main loop's filter: theirs is in it too. */
static const unsigned long main_ioctls[] = {
	KVM_RUN, KVM_IRQ_LINE,
	/* A snapshot: every vCPU's and the VM's state. */
	KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_XSAVE, KVM_GET_XCRS, KVM_GET_MSRS,
	KVM_GET_MSR_INDEX_LIST, KVM_GET_LAPIC, KVM_GET_MP_STATE, KVM_GET_VCPU_EVENTS,
	KVM_GET_DEBUGREGS, KVM_GET_IRQCHIP, KVM_GET_PIT2, KVM_GET_CLOCK,
	/* A resume: the clock set back to where it stood at the pause. */
	KVM_SET_CLOCK,
	/* A state dump: the guest's code and stack. */
	KVM_TRANSLATE,
	/* A diff snapshot: the pages the guest wrote. */
	KVM_GET_DIRTY_LOG,
	/* The exit counts at debug level; a disk's size. */
	KVM_CHECK_EXTENSION, KVM_GET_STATS_FD, BLKGETSIZE64,
	/* A lazily restored VM ending; a diff's pause filling what is not in yet. */
	UFFDIO_UNREGISTER, UFFDIO_WAKE, UFFDIO_COPY, UFFDIO_ZEROPAGE, 0};
/* KVM_IRQ_LINE: the network device interrupts the guest from its own thread. */
static const unsigned long net_ioctls[] = {FIONREAD, KVM_IRQ_LINE, 0};
static const unsigned long lazy_ioctls[] = {UFFDIO_COPY, UFFDIO_ZEROPAGE, UFFDIO_WAKE,
                                            UFFDIO_UNREGISTER, 0};
static const unsigned long no_ioctls[] = {0};

static const struct {
	const struct rule *rules;
	const unsigned long *ioctls;
} roles[ROLE_COUNT] = {
	[ROLE_MAIN] = {main_loop, main_ioctls}, [ROLE_VCPU] = {vcpu, vcpu_ioctls},
	[ROLE_NET] = {net, net_ioctls},         [ROLE_LAZY] = {lazy, lazy_ioctls},
	[ROLE_WORKER] = {worker, no_ioctls},
};

static int allow_arg0(scmp_filter_ctx ctx, int nr, uint64_t value)
{
	const struct scmp_arg_cmp eq = {
		.arg = 0, .op = SCMP_CMP_EQ, .datum_a = value, .datum_b = 0};

	return seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &eq);
}

static int add(scmp_filter_ctx ctx, const struct rule *r)
{
	for (; r->name; r++) {
		int nr = seccomp_syscall_resolve_name(r->name), ret;

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a syscall on this architecture */
		if (r->narrow == UNIX_ONLY) {
			ret = allow_arg0(ctx, nr, AF_UNIX);
		} else if (r->narrow == NAME_OR_NNP) {
			ret = allow_arg0(ctx, nr, PR_SET_NAME);
			if (!ret || ret == -EEXIST)
				ret = allow_arg0(ctx, nr, PR_SET_NO_NEW_PRIVS);
		} else if (r->narrow == LEAK_TRACER) {
			static const long req[] = {PTRACE_ATTACH,    PTRACE_DETACH,
			                           PTRACE_CONT,      PTRACE_GETREGS,
			                           PTRACE_GETREGSET, PTRACE_GETFPREGS};

			ret = 0;
			for (size_t i = 0;
			     i < sizeof(req) / sizeof(req[0]) && (!ret || ret == -EEXIST); i++)
				ret = allow_arg0(ctx, nr, (uint64_t)req[i]);
		} else
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		/* The same syscall twice (common and the role): the first rule stands. */
		if (ret && ret != -EEXIST)
			return ret;
	}
	return 0;
}

/* ioctl(fd, req) for each req; the low 32 bits compared, as the kernel reads the request. */
static int add_ioctls(scmp_filter_ctx ctx, const unsigned long *req)
{
	for (; *req; req++) {
		int ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		                           SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, *req));

		if (ret && ret != -EEXIST)
			return ret;
	}
	return 0;
}

int confine_rules_add(scmp_filter_ctx ctx, enum confine_role role, bool sanitized)
{
	int ret;

	if (role >= ROLE_COUNT)
		return -EINVAL;
	ret = add(ctx, common);
	if (!ret && sanitized)
		ret = add(ctx, sanitized_common);
	if (!ret)
		ret = add(ctx, roles[role].rules);
	if (!ret)
		ret = add_ioctls(ctx, common_ioctls);
	if (!ret)
		ret = add_ioctls(ctx, roles[role].ioctls);
	return ret;
}
