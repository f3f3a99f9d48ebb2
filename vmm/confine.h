/* SPDX-License-Identifier: MIT */
#ifndef HUSK_CONFINE_H
#define HUSK_CONFINE_H

/*
 * Seccomp allowlists per thread role (confine/confine_rules.c holds them as
 * one table; the build makes each role's program, confine.c loads it).
 * A thread enters its role once, before it does its work: the filter is
 * the thread's own (threads it creates later inherit it on top of theirs);
 * a syscall outside the list kills the whole VMM.
 */
enum confine_role {
	ROLE_MAIN,   /* the device event loop, control socket, snapshot save */
	ROLE_VCPU,   /* KVM_RUN and the exits it handles */
	ROLE_NET,    /* the user-mode network stack (libslirp) */
	ROLE_LAZY,   /* userfaultfd: lazy restore's fault handler and filler */
	ROLE_WORKER, /* snapshot (de)compression, the boot image loader */
	ROLE_COUNT
};

enum confine_mode {
	SECCOMP_KILL, /* the default */
	SECCOMP_LOG,  /* allow, and have the kernel log what is outside (to find what is missing) */
	SECCOMP_OFF,
};

extern enum confine_mode confine_mode;

/* Names the calling thread for its role and loads the role's filter. 0 or -errno. */
int confine_enter(enum confine_role role);

/* The role's name ("main", "vcpu" ...), as threads are named. */
const char *confine_role_name(enum confine_role role);

#endif
