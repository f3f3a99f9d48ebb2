/* SPDX-License-Identifier: MIT */
#ifndef HUSK_AGENT_USER_H
#define HUSK_AGENT_USER_H

#include <stdbool.h>
#include <sys/types.h>

#define RUN_AS_GROUPS 32

/* The identity a child takes before it runs its program (proc.c). */
struct run_as {
	bool set;
	uid_t uid;
	gid_t gid;
	gid_t groups[RUN_AS_GROUPS];
	int ngroups;
	char home[256];
	char name[64]; /* "" for a bare uid */
};

/*
 * Resolves "name", "uid", "name:group" or "uid:gid" against /etc/passwd and
 * /etc/group. Returns 0 with *as filled, or -EINVAL / -ENOENT with *why set.
 */
int user_resolve(const char *spec, struct run_as *as, const char **why)
	__attribute__((warn_unused_result));

#endif
