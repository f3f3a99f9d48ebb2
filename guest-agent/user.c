// SPDX-License-Identifier: MIT
/*
 * Who a command runs as: the "user" of exec and job.start, as an OCI image's
 * config spells it (name, uid, name:group, uid:gid), looked up in the
 * guest's own /etc/passwd and /etc/group (files only: an image's users are
 * there, and a static agent has no NSS).
 */
#include "user.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool numeric(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 10;
}

static int find_group(const char *name, gid_t *gid)
{
	FILE *f = fopen("/etc/group", "re");
	struct group *g;
	int rc = -ENOENT;

	while (f && (g = fgetgrent(f)))
		if (!strcmp(g->gr_name, name)) {
			*gid = g->gr_gid;
			rc = 0;
			break;
		}
	if (f)
		fclose(f);
	return rc;
}

/* The groups that list name as a member, besides its own. */
static void member_groups(const char *name, struct run_as *as)
{
	FILE *f = fopen("/etc/group", "re");
	struct group *g;

	as->groups[as->ngroups++] = as->gid;
	while (f && (g = fgetgrent(f)) && as->ngroups < RUN_AS_GROUPS) {
		for (char **m = g->gr_mem; m && *m; m++)
			if (!strcmp(*m, name) && g->gr_gid != as->gid) {
				as->groups[as->ngroups++] = g->gr_gid;
				break;
			}
	}
	if (f)
		fclose(f);
}

int user_resolve(const char *spec, struct run_as *as, const char **why)
{
	char user[128], *group;
	struct passwd *pw = NULL;
	FILE *f;

	memset(as, 0, sizeof(*as));
	if (!spec || !*spec || strlen(spec) >= sizeof(user)) {
		*why = "user must be a name, a uid, name:group or uid:gid";
		return -EINVAL;
	}
	snprintf(user, sizeof(user), "%s", spec);
	group = strchr(user, ':');
	if (group)
		*group++ = '\0';
	f = fopen("/etc/passwd", "re");
	while (f && (pw = fgetpwent(f)))
		if (numeric(user) ? pw->pw_uid == (uid_t)strtoul(user, NULL, 10)
		                  : !strcmp(pw->pw_name, user))
			break;
	if (pw) {
		as->uid = pw->pw_uid;
		as->gid = pw->pw_gid;
		snprintf(as->home, sizeof(as->home), "%s", pw->pw_dir);
		snprintf(as->name, sizeof(as->name), "%s", pw->pw_name);
	}
	if (f)
		fclose(f);
	if (!pw && !numeric(user)) {
		*why = "no such user in the guest's /etc/passwd";
		return -ENOENT;
	}
	if (!pw) {
		/* A bare uid runs as itself, group 0, as container runtimes do. */
		as->uid = (uid_t)strtoul(user, NULL, 10);
		snprintf(as->home, sizeof(as->home), "/");
	}
	if (group && (numeric(group) ? (as->gid = (gid_t)strtoul(group, NULL, 10), 0)
	                             : find_group(group, &as->gid))) {
		*why = "no such group in the guest's /etc/group";
		return -ENOENT;
	}
	if (pw && !group)
		member_groups(pw->pw_name, as);
	else
		as->groups[as->ngroups++] = as->gid;
	as->set = true;
	return 0;
}
