// SPDX-License-Identifier: MIT
/*
 * husk-jail: confines a program (husk-vmm) and execs it, so the process
 * huskd started is the program itself, jailed.
 *
 *   husk-jail --uid N --root DIR [--net SLOT|none] [--resolv FILE]
 *             [--ro PATH]... [--rw PATH]... [--dev PATH]... [--fsize BYTES]
 *             [--keep-fd N] -- PROGRAM [ARGS...]
 *
 * It must be the first process of a new PID namespace (huskd clones it so;
 * by hand: unshare -pf). Then, in this order: a network namespace (jail_net.c);
 * new mount, IPC, UTS and cgroup namespaces (the cgroup huskd put it in is
 * the root it sees); a root of its own (jail_root.c); rlimits; uid and gid
 * N with no supplementary groups and every capability gone, the bounding
 * and ambient sets included; no_new_privs; every fd above 2 closed (but the
 * one --keep-fd names: a sealed snapshot's key, which huskd passes in a pipe); an
 * empty environment. The program's threads get their seccomp filters from
 * the program itself (each thread's role differs).
 */
#include <cap-ng.h>
#include <errno.h>
#include <getopt.h>
#include <linux/close_range.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "husk-jail: %s\n", why);
	fprintf(stderr,
	        "usage: husk-jail --uid N --root DIR [--net SLOT|none] [--resolv FILE]\n"
	        "                 [--ro PATH]... [--rw PATH]... [--dev PATH]... [--fsize BYTES]\n"
	        "                 [--keep-fd N] -- PROGRAM [ARGS...]\n"
	        "  N: %u to %u, the uid and gid the program runs as\n"
	        "  DIR: an empty folder; the program's root is made on it\n"
	        "  SLOT: 0 to %d, the sandbox's veth pair " JAIL_IF_PREFIX
	        "SLOT in " JAIL_NET_PREFIX "; none: lo alone (the default)\n",
	        JAIL_UID_BASE, JAIL_UID_BASE + JAIL_UIDS - 1, JAIL_NET_SLOTS - 1);
	return 2;
}

static int number(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || end == s || *out > max ? -1 : 0;
}

static int add(const char **list, unsigned *n, unsigned cap, const char *path)
{
	if (*n >= cap || path[0] != '/')
		return -1;
	list[(*n)++] = path;
	return 0;
}

static int limit(int what, rlim_t n, const char *name)
{
	struct rlimit rl = {n, n};

	if (setrlimit(what, &rl) == 0)
		return 0;
	fprintf(stderr, "husk-jail: cannot limit %s: %s\n", name, strerror(errno));
	return -1;
}

/*
 * Enough descriptors for a VMM's guest connections, threads for its vCPUs
 * and workers (nproc counts the uid's threads), no core file (it would
 * hold guest memory), files no larger than its disk and snapshot need.
 */
static int limits(unsigned long long fsize)
{
	return limit(RLIMIT_NOFILE, 4096, "open files") || limit(RLIMIT_NPROC, 512, "threads") ||
	       limit(RLIMIT_CORE, 0, "core files") || limit(RLIMIT_MEMLOCK, 64 << 10, "memlock") ||
	       limit(RLIMIT_FSIZE, fsize ? (rlim_t)fsize : RLIM_INFINITY, "file size");
}

static int drop(uid_t uid)
{
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_change_id((int)uid, (int)uid,
	                    CAPNG_DROP_SUPP_GRP | CAPNG_CLEAR_BOUNDING | CAPNG_CLEAR_AMBIENT)) {
		fprintf(stderr, "husk-jail: cannot become uid %u and drop capabilities\n",
		        (unsigned)uid);
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		fprintf(stderr, "husk-jail: cannot set no_new_privs: %s\n", strerror(errno));
		return -1;
	}
	/* Trust, but check: a silently kept capability would undo the jail. */
	capng_get_caps_process();
	if (getuid() != uid || geteuid() != uid || getgid() != uid ||
	    capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE) {
		fprintf(stderr, "husk-jail: still privileged after dropping; not running\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"uid", required_argument, NULL, 'u'},
		{"root", required_argument, NULL, 'r'},
		{"net", required_argument, NULL, 'n'},
		{"resolv", required_argument, NULL, 'R'},
		{"ro", required_argument, NULL, 'o'},
		{"rw", required_argument, NULL, 'w'},
		{"dev", required_argument, NULL, 'd'},
		{"fsize", required_argument, NULL, 'f'},
		{"keep-fd", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct jail_root root = {.uid = (uid_t)-1};
	unsigned long long v, fsize = 0, keep = 0;
	static char *const empty_env[] = {NULL};
	long slot = -1;
	int c;

	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			if (number(optarg, JAIL_UID_BASE + JAIL_UIDS - 1, &v) || v < JAIL_UID_BASE)
				return usage("--uid is out of the jail's range");
			root.uid = (uid_t)v;
			root.gid = (gid_t)v;
			break;
		case 'r':
			root.dir = optarg;
			break;
		case 'n':
			if (strcmp(optarg, "none") &&
			    (number(optarg, JAIL_NET_SLOTS - 1, &v) || (slot = (long)v) < 0))
				return usage("--net wants a slot number or none");
			break;
		case 'R':
			root.resolv = optarg;
			break;
		case 'o':
			if (add(root.ro, &root.nro, JAIL_MAX_PATHS, optarg))
				return usage("--ro wants an absolute path (at most 32 of them)");
			break;
		case 'w':
			if (add(root.rw, &root.nrw, JAIL_MAX_PATHS, optarg))
				return usage("--rw wants an absolute path (at most 32 of them)");
			break;
		case 'd':
			if (add(root.dev, &root.ndev, 8, optarg))
				return usage("--dev wants an absolute path (at most 8 of them)");
			break;
		case 'f':
			if (number(optarg, ~0ULL, &fsize))
				return usage("--fsize wants a number of bytes");
			break;
		case 'k':
			if (number(optarg, 1023, &keep) || keep < 3)
				return usage("--keep-fd wants a descriptor from 3 to 1023");
			break;
		case 'h':
			usage(NULL);
			return 0;
		default:
			return usage(NULL);
		}
	}
	if (root.uid == (uid_t)-1 || !root.dir || root.dir[0] != '/' || optind >= argc ||
	    argv[optind][0] != '/')
		return usage("--uid, --root and an absolute PROGRAM path are needed");
	if (getpid() != 1) {
		fprintf(stderr, "husk-jail: not the first process of a new PID namespace (huskd "
		                "starts it so; by hand, use unshare -pf)\n");
		return 1;
	}
	/* The program itself, read-only, where it is. */
	if (add(root.ro, &root.nro, JAIL_MAX_PATHS, argv[optind]))
		return usage("too many --ro paths");
	if (jail_net_enter(slot))
		return 1;
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) < 0) {
		fprintf(stderr, "husk-jail: cannot make namespaces: %s (huskd must run as root)\n",
		        strerror(errno));
		return 1;
	}
	if (sethostname("husk", 4) < 0 || jail_root_enter(&root) || limits(fsize) || drop(root.uid))
		return 1;
	if ((keep > 3 && syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) < 0) ||
	    syscall(SYS_close_range, keep ? (unsigned)keep + 1 : 3U, ~0U, 0U) < 0) {
		fprintf(stderr, "husk-jail: cannot close descriptors: %s\n", strerror(errno));
		return 1;
	}
	execve(argv[optind], argv + optind, empty_env);
	fprintf(stderr, "husk-jail: cannot run %s: %s\n", argv[optind], strerror(errno));
	return 127;
}
