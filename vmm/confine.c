// SPDX-License-Identifier: MIT
/*
 * Each VMM thread confines itself with its role's seccomp program: the
 * allowlists are in confine/confine_rules.c, made into programs at build
 * time (confine/confine_gen.c, build/gen/confine_bpf.h), so a thread only
 * hands the kernel its program here.
 */
#include "confine.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine_bpf.h"
#include "log.h"

enum confine_mode confine_mode = SECCOMP_KILL;

/* GCC says so by a macro, clang by __has_feature. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define HUSK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define HUSK_SANITIZED 1
#endif
#endif
#ifndef HUSK_SANITIZED
#define HUSK_SANITIZED 0
#endif

static const char *const role_names[ROLE_COUNT] = {
	[ROLE_MAIN] = "main", [ROLE_VCPU] = "vcpu",     [ROLE_NET] = "net",
	[ROLE_LAZY] = "lazy", [ROLE_WORKER] = "worker",
};

const char *confine_role_name(enum confine_role role)
{
	return role < ROLE_COUNT ? role_names[role] : "?";
}

int confine_enter(enum confine_role role)
{
	const struct sock_fprog *prog;
	int ret = 0;

	if (confine_mode == SECCOMP_OFF || role >= ROLE_COUNT)
		return 0;
	prog = &confine_bpf[HUSK_SANITIZED][confine_mode == SECCOMP_LOG][role];
	/* As libseccomp loads it: no new privileges first, then the filter on this thread. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		ret = -errno;
	if (ret)
		log_err("cannot load the %s thread's seccomp filter: %s", role_names[role],
		        strerror(-ret));
	return ret;
}
