// SPDX-License-Identifier: MIT
/*
 * The route table and the API key check; how the manager's typed errors
 * become HTTP statuses is in r_reply.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"
#include "r_int.h"
#include "r_target.h"
#include "router.h"

/*
 * What a route needs of its caller (route flags): no key at all; p[0] a
 * sandbox, execution or build of the caller's org; an admin key; the
 * operator (an admin of the default org: huskd-wide things).
 */
enum {
	R_OPEN = 1 << 0,
	R_SANDBOX = 1 << 1,
	R_EXEC = 1 << 2,
	R_BUILD = 1 << 3,
	R_ADMIN = 1 << 4,
	R_OPERATOR = 1 << 5,
	R_STREAMED = 1 << 6, /* its body is taken as it arrives (http_body_stream) */
};

static const struct route api_routes[] = {
	{"POST", "/sandbox", r_create, 0},
	{"GET", "/sandbox", r_list, 0},
	{"GET", "/sandbox/runtimes", r_runtimes, 0},
	{"POST", "/sandbox/runtimes/import", r_import_init, R_OPERATOR},
	{"PUT", "/sandbox/runtimes/import/:id", r_import_upload, R_OPERATOR},
	{"POST", "/sandbox/runtimes/import/:id/run", r_import_run, R_OPERATOR},
	{"GET", "/sandbox/runtimes/import/:id", r_import_get, R_OPERATOR},
	{"DELETE", "/sandbox/runtimes/:id", r_runtime_delete, R_OPERATOR},
	{"GET", "/sandbox/stats", r_stats, 0},
	{"GET", "/services/stats/:org", r_service_stats, 0},
	{"GET", "/sandbox/status/:id", r_status, R_SANDBOX},
	{"GET", "/sandbox/execution/:id", r_execution, R_EXEC},
	{"DELETE", "/sandbox/execution/:id", r_execution_cancel, R_EXEC},
	{"GET", "/sandbox/sandboxes/:id/executions", r_executions, R_SANDBOX},
	{"GET", "/sandbox/sandboxes/:id/events", r_events, R_SANDBOX},
	{"GET", "/sandbox/:id", r_get, R_SANDBOX},
	{"DELETE", "/sandbox/:id", r_destroy, R_SANDBOX},
	{"POST", "/sandbox/:id/execute", r_execute, R_SANDBOX},
	{"POST", "/sandbox/:id/pause", r_pause, R_SANDBOX},
	{"POST", "/sandbox/:id/resume", r_resume, R_SANDBOX},
	{"PUT", "/sandbox/:id/network", r_net_set, R_SANDBOX},
	/* husk's own: an interactive shell, both ways in one request (r_shell.c). */
	{"POST", "/sandbox/:id/shell", r_shell, R_SANDBOX | R_STREAMED},
	{"POST", "/sandbox/:id/snapshot", r_snap_create, R_SANDBOX},
	{"POST", "/sandbox/:id/checkpoint", r_ckpt_create, R_SANDBOX},
	{"GET", "/sandbox/checkpoints/:id", r_ckpt_list, R_SANDBOX},
	{"POST", "/sandbox/:id/checkpoint/:ck/restore", r_ckpt_restore, R_SANDBOX},
	{"DELETE", "/sandbox/:id/checkpoint/:ck", r_ckpt_delete, R_SANDBOX},
	/* Snapshots are scoped by the manager: another org's public ones are readable. */
	{"GET", "/sandbox/snapshots", r_snap_list, 0},
	{"GET", "/sandbox/snapshots/public", r_snap_public_list, R_OPEN},
	{"GET", "/sandbox/snapshots/public/:ref", r_snap_public_get, R_OPEN},
	{"GET", "/sandbox/snapshots/lineage", r_snap_lineage, 0},
	{"POST", "/sandbox/snapshots/build", r_build_init, 0},
	{"PUT", "/sandbox/snapshots/:snap/upload", r_build_upload, R_BUILD},
	{"POST", "/sandbox/snapshots/:snap/finalize", r_build_finalize, R_BUILD},
	{"GET", "/sandbox/snapshots/:snap", r_snap_get, 0},
	{"PATCH", "/sandbox/snapshots/:snap", r_snap_tag, 0},
	{"DELETE", "/sandbox/snapshots/:snap", r_snap_delete, 0},
	/* Stream URLs are capabilities (unguessable ids); the client fetches them without a key. */
	{"GET", "/streams/:id", r_stream, R_OPEN},
	/* User streams (API.md §6.2): a command's stdin, or where its output goes. */
	{"POST", "/streams", r_stream_create, 0},
	{"PUT", "/streams/:id", r_stream_put, R_STREAMED},
	{"PATCH", "/sandbox/env/:id", r_env, R_SANDBOX},
	{"POST", "/sandbox/sandboxes/:id/jobs", r_job_create, R_SANDBOX},
	{"GET", "/sandbox/sandboxes/:id/jobs", r_job_list, R_SANDBOX},
	{"GET", "/sandbox/sandboxes/:id/jobs/:job", r_job_get, R_SANDBOX},
	{"DELETE", "/sandbox/sandboxes/:id/jobs/:job", r_job_stop, R_SANDBOX},
	{"POST", "/fs/:id", r_fs_write, R_SANDBOX},
	{"GET", "/fs/:id", r_fs_read, R_SANDBOX},
	{"GET", "/fs/list/:id", r_fs_list, R_SANDBOX},
	{"POST", "/fs/mkdir/:id", r_fs_mkdir, R_SANDBOX},
	{"POST", "/fs/rm/:id", r_fs_rm, R_SANDBOX},
	{"POST", "/fs/rmdir/:id", r_fs_rmdir, R_SANDBOX},
	{"GET", "/fs/download/:id", r_fs_download, R_SANDBOX},
	{"POST", "/fs/upload/:id", r_fs_upload, R_SANDBOX},
	/* The reference CLI's lookups (API.md §5.12): scoped to the caller's org by the handler. */
	{"GET", "/cli/sandbox", r_cli_list, 0},
	{"GET", "/cli/sandbox/:id", r_cli_resolve, 0},
	/* husk's own (API.md §9): keys and orgs. */
	{"POST", "/keys", r_key_create, R_ADMIN},
	{"GET", "/keys", r_key_list, R_ADMIN},
	{"DELETE", "/keys/:id", r_key_revoke, R_ADMIN},
	{"GET", "/whoami", r_whoami, 0},
	{"DELETE", "/orgs/:org/key", r_org_key_delete, R_OPERATOR},
	{"GET", "/audit", r_audit_list, 0},
	{"GET", "/audit/verify", r_audit_verify, 0},
	/* E2B's API (API.md §11; e2b/): its SDK's REST paths, the key in X-API-Key. */
	{"POST", "/e2b/v2/sandboxes", e2b_create, 0},
	{"GET", "/e2b/v2/sandboxes", e2b_list, 0},
	{"GET", "/e2b/sandboxes/:id", e2b_get, 0},
	{"DELETE", "/e2b/sandboxes/:id", e2b_kill, 0},
	{"POST", "/e2b/sandboxes/:id/timeout", e2b_timeout, 0},
	{"POST", "/e2b/sandboxes/:id/pause", e2b_pause, 0},
	{"POST", "/e2b/v2/sandboxes/:id/connect", e2b_connect, 0},
	{"POST", "/e2b/sandboxes/:id/snapshots", e2b_snap_create, 0},
	{"GET", "/e2b/snapshots", e2b_snap_list, 0},
	{"DELETE", "/e2b/templates/:id", e2b_snap_delete, 0},
	{"POST", "/e2b/sandboxes/:id/fork", e2b_fork, 0},
	{"PUT", "/e2b/sandboxes/:id/network", e2b_network, 0},
	{"GET", "/e2b/sandboxes/:id/metrics", e2b_metrics, 0},
	/* ... and envd's, per sandbox by its access token (checked by the handlers). */
	{"GET", "/e2b/envd/health", e2b_health, R_OPEN},
	{"GET", "/e2b/envd/files", e2b_files_get, R_OPEN},
	{"POST", "/e2b/envd/files", e2b_files_post, R_OPEN},
	{"POST", "/e2b/envd/:service/:method", e2b_rpc, R_OPEN},
};

static const struct who *key_of(struct routes *rt, struct http_req *r)
{
	const char *h = http_header(r, "Authorization"), *e2b = http_header(r, "X-API-Key");

	if (h && !strncmp(h, "Bearer ", 7))
		return tenant_auth(rt->cfg.tenants, h + 7);
	/* E2B's SDK sends its key so (API.md §11.1). */
	return e2b ? tenant_auth(rt->cfg.tenants, e2b) : NULL;
}

static void unauthorized(struct routes *rt, char *msg, size_t len)
{
	snprintf(msg, len,
	         "a valid API key is required: send 'Authorization: Bearer <key>' (keys are in "
	         "%s/api-keys or HUSK_API_KEY; husk key create makes more)",
	         rt->cfg.state);
}

const struct who *routes_key(struct routes *rt, struct http_req *r)
{
	const struct who *who = key_of(rt, r);

	return who && !who->revoked ? who : NULL;
}

/* The caller's key (found already by routes_admit), or NULL (answered 401). */
static const struct who *authorized(struct routes *rt, struct http_req *r)
{
	const struct who *who = caller(r);
	char msg[400];

	/* Without routes_admit before (not huskd's way): the key, not limited. */
	if (!who && (who = key_of(rt, r)) && call_begin(rt, r, (struct who *)who, false)) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return NULL;
	}
	if (who && who->revoked) /* while its body came in */
		who = NULL;
	if (!who) {
		unauthorized(rt, msg, sizeof(msg));
		api_error(r, 401, "UNAUTHORIZED", "%s", msg);
	}
	return who;
}

void routes_served(const struct http_req *r, uint64_t ns)
{
	/* The path alone: a query may carry a token. */
	log_debug(NULL, "%s %s: %d in %.1f ms", http_method(r), http_path(r), http_status(r),
	          (double)ns / 1e6);
}

/*
 * The key is checked as soon as a request's head is in: a request without a
 * valid one is answered 401 before any of its body is read, so nobody
 * without a key makes huskd hold a byte of a body. Open routes and sandbox
 * urls go on (they need no key).
 */
int routes_admit(struct http_req *r, void *ctx, struct http_refusal *out)
{
	char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_LEN];
	struct routes *rt = ctx;
	const struct route *route;
	struct proxy_target t;
	const struct who *who;
	unsigned retry;
	int rc;

	if (!e2b_by_host(rt->cfg.public_domain, r) &&
	    proxy_target(http_header(r, "Host"), http_path(r), http_query(r), rt->cfg.public_domain,
	                 &t) != 0)
		return 0;
	if (router_match(api_routes, sizeof(api_routes) / sizeof(api_routes[0]), http_method(r),
	                 http_path(r), &route, params))
		route = NULL;
	if (route && (route->flags & R_OPEN))
		return 0;
	who = key_of(rt, r);
	if (!who) {
		unauthorized(rt, out->msg, sizeof(out->msg));
		out->code = "UNAUTHORIZED";
		return 401;
	}
	rc = tenant_admit(rt->cfg.tenants, (struct who *)who, sbx_now_ms(), &retry);
	if (rc == -EBUSY) {
		snprintf(out->msg, sizeof(out->msg),
		         "this key has %u requests in flight, the most huskd takes from one key "
		         "(--key-concurrency): retry when one has ended",
		         tenant_limits(rt->cfg.tenants)->max_inflight);
		out->code = "TOO_MANY_REQUESTS";
		out->retry_after = 1;
		return 429;
	}
	if (rc == -EAGAIN) {
		snprintf(out->msg, sizeof(out->msg),
		         "this key has made %llu requests in %llu ms, the most huskd takes "
		         "(--key-rate): retry in %u s",
		         (unsigned long long)tenant_limits(rt->cfg.tenants)->count,
		         (unsigned long long)tenant_limits(rt->cfg.tenants)->per_ms, retry);
		out->code = "TOO_MANY_REQUESTS";
		out->retry_after = retry;
		return 429;
	}
	if (call_begin(rt, r, (struct who *)who, true)) {
		tenant_done((struct who *)who);
		snprintf(out->msg, sizeof(out->msg), "out of memory");
		out->code = "UNAVAILABLE";
		return 503;
	}
	call_route(r, route ? route->pattern : NULL,
	           route && (route->flags & R_SANDBOX) ? params[0] : NULL);
	if (route && (route->flags & R_STREAMED))
		http_body_stream(r);
	return 0;
}

/* 404 as if id did not exist (another org's is not there for this caller). */
static int owned(struct routes *rt, struct http_req *r, const struct route *route, const char *id,
                 const struct who *who)
{
	static const struct {
		unsigned flag;
		enum sbx_kind kind;
		const char *code, *what;
	} kinds[] = {
		{R_SANDBOX, SBX_KIND_SANDBOX, "SANDBOX_NOT_FOUND", "sandbox"},
		{R_EXEC, SBX_KIND_EXECUTION, "EXECUTION_NOT_FOUND", "execution"},
		{R_BUILD, SBX_KIND_BUILD, "SNAPSHOT_NOT_FOUND", "build"},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!(route->flags & kinds[i].flag) ||
		    sbx_owned(rt->m, kinds[i].kind, id, who->org_id) == 0)
			continue;
		api_error(r, 404, kinds[i].code, "%s %s not found", kinds[i].what, id);
		return -1;
	}
	return 0;
}

static int guard(struct http_req *r, const struct route *route, const char *const *p, void *ctx)
{
	struct routes *rt = ctx;
	const char *m = http_method(r);
	const struct who *who;
	char org[80];

	if (route && (route->flags & R_OPEN))
		return 0;
	who = authorized(rt, r);
	if (!who)
		return -1;
	call_route(r, route ? route->pattern : NULL,
	           route && (route->flags & R_SANDBOX) ? p[0] : NULL);
	if (!route)
		return 0; /* the 404 or 405 */
	if (who->role == ROLE_READ_ONLY && strcmp(m, "GET") && strcmp(m, "HEAD")) {
		api_error(r, 403, "FORBIDDEN", "this key is read-only: %s %s needs a member key", m,
		          http_path(r));
		return -1;
	}
	if (((route->flags & R_ADMIN) && who->role != ROLE_ADMIN) ||
	    ((route->flags & R_OPERATOR) && !tenant_is_operator(who))) {
		api_error(r, 403, "FORBIDDEN",
		          "%s %s needs an admin key%s (this one is %s of org '%s')", m,
		          http_path(r), route->flags & R_OPERATOR ? " of org 'local'" : "",
		          tenant_role_name(who->role), who->org_name);
		return -1;
	}
	/* orgId, which the client adds to every request it was given one for, must be the key's. */
	if (http_query_get(r, "orgId", org, sizeof(org)) > 0 && strcmp(org, who->org_id) &&
	    strcmp(org, who->org_name)) {
		api_error(r, 403, "FORBIDDEN",
		          "orgId '%s' is not this key's org ('%s', %s): use a key of that org or "
		          "leave orgId out",
		          org, who->org_name, who->org_id);
		return -1;
	}
	return owned(rt, r, route, p[0], who);
}

void routes_handle(struct http_req *r, void *ctx)
{
	struct routes *rt = ctx;

	/* A sandbox's url is public, as the reference's are (no key on the way in). */
	if (!e2b_by_host(rt->cfg.public_domain, r) && proxy_route(rt, r))
		return;
	router_dispatch_guarded(r, api_routes, sizeof(api_routes) / sizeof(api_routes[0]), guard,
	                        rt);
}

void routes_print(FILE *f)
{
	static const struct {
		unsigned flag;
		const char *name;
	} scopes[] = {
		{R_OPEN, "open"},   {R_SANDBOX, "sandbox"},   {R_EXEC, "execution"},
		{R_BUILD, "build"}, {R_OPERATOR, "operator"}, {R_ADMIN, "admin"},
	};

	for (size_t i = 0; i < sizeof(api_routes) / sizeof(api_routes[0]); i++) {
		const char *scope = "caller";

		for (size_t k = 0; k < sizeof(scopes) / sizeof(scopes[0]); k++)
			if (api_routes[i].flags & scopes[k].flag) {
				scope = scopes[k].name;
				break;
			}
		fprintf(f, "{\"method\": \"%s\", \"pattern\": \"%s\", \"scope\": \"%s\"}\n",
		        api_routes[i].method, api_routes[i].pattern, scope);
	}
}

int routes_open(struct sbx_mgr *m, const struct routes_config *cfg, struct routes **out)
{
	struct routes *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return -ENOMEM;
	rt->m = m;
	rt->cfg = *cfg;
	if (e2b_open(rt, &rt->e2b)) {
		free(rt);
		return -ENOMEM;
	}
	sbx_mgr_on_change(m, wait_kick, rt);
	*out = rt;
	return 0;
}

void routes_close(struct routes *rt)
{
	wait_drop_all(rt);
	e2b_close(rt->e2b);
	rt->e2b = NULL;
}

void routes_free(struct routes *rt)
{
	/* Not closed when huskd could not start (its port taken, say). */
	if (rt)
		e2b_close(rt->e2b);
	free(rt);
}
