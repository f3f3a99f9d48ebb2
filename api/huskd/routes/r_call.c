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
	bool counted;                    /* tenant_admit let it in */
	char sandbox[STORE_ID_LEN];      /* what it is about, when the path does not say */
	const char *route;               /* the pattern its path matched (static), NULL: none */
	char path_sandbox[STORE_ID_LEN]; /* the sandbox its path names */
};

/* The audit record of a call that asked to change something. */
static void call_audit(struct call *c, struct http_req *r)
{
	const char *sandbox = c->sandbox[0]        ? c->sandbox
	                      : c->path_sandbox[0] ? c->path_sandbox
	                                           : NULL;
	char action[160];

	snprintf(action, sizeof(action), "%s %s", http_method(r),
	         c->route ? c->route : "(no route)");
	if (tenant_audit(c->rt->cfg.tenants, c->who, action, http_path(r), sandbox, http_status(r)))
		log_error(sandbox, "cannot record %s by key %s in the audit trail", action,
		          c->who->key_id);
}

static void call_end(struct http_req *r, void *arg)
{
	struct call *c = arg;
	const char *m = http_method(r);

	if (c->counted)
		tenant_done(c->who);
	if (strcmp(m, "GET") && strcmp(m, "HEAD") && http_status(r))
		call_audit(c, r);
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

void call_route(struct http_req *r, const char *pattern, const char *sandbox_id)
{
	struct call *c = http_user(r);

	if (!c)
		return;
	c->route = pattern;
	if (sandbox_id)
		snprintf(c->path_sandbox, sizeof(c->path_sandbox), "%s", sandbox_id);
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

int body_set_org(struct http_req *r, json_t *body)
{
	const struct who *who = caller(r);

	if (json_object_set_new(body, "org",
	                        json_pack("{ssss}", "id", who->org_id, "name", who->org_name))) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return -1;
	}
	return 0;
}
