// SPDX-License-Identifier: MIT
/*
 * A call: one request from one key, from its head (routes_admit) to when
 * the HTTP library frees it. At its end the key's place in flight is given
 * back and, if it asked to change something, the org's audit trail gets a
 * record of who, what, about which sandbox, and how it was answered.
 */
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

struct call {
	struct routes *rt;
	struct who *who;
	bool counted;               /* tenant_admit let it in */
	char sandbox[STORE_ID_LEN]; /* what it is about, when the path does not say */
};

static void call_end(struct http_req *r, void *arg)
{
	struct call *c = arg;
	const char *m = http_method(r);

	if (c->counted)
		tenant_done(c->who);
	if (strcmp(m, "GET") && strcmp(m, "HEAD") && http_status(r))
		routes_audit(c->rt, r, c->who, c->sandbox[0] ? c->sandbox : NULL);
	free(c);
}

int call_begin(struct routes *rt, struct http_req *r, struct who *who, bool counted)
{
	struct call *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	*c = (struct call){.rt = rt, .who = who, .counted = counted};
	http_set_user(r, c);
	http_on_free(r, call_end, c);
	return 0;
}

void call_about(struct http_req *r, const char *sandbox_id)
{
	struct call *c = http_user(r);

	if (c && sandbox_id)
		snprintf(c->sandbox, sizeof(c->sandbox), "%s", sandbox_id);
}

const struct who *caller(const struct http_req *r)
{
	const struct call *c = http_user(r);

	return c ? c->who : NULL;
}

const char *caller_org(const struct http_req *r)
{
	const struct who *who = caller(r);

	return who ? who->org_id : NULL;
}
