// SPDX-License-Identifier: MIT
/*
 * Keys, orgs' keys at rest and the audit trail (husk's own, API.md §2.6):
 * /keys, /whoami, /orgs/:org/key, /audit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keystore.h"
#include "r_int.h"

static void key_error(struct http_req *r, int rc, const char *why)
{
	int status = rc == -EPERM ? 403 : rc == -EINVAL ? 400 : rc == -ENOENT ? 404 : 500;
	const char *code = rc == -EPERM    ? "FORBIDDEN"
	                   : rc == -EINVAL ? "BAD_REQUEST"
	                   : rc == -ENOENT ? "KEY_NOT_FOUND"
	                                   : "INTERNAL";

	if (status >= 500)
		log_error(NULL, "%s %s: %s", http_method(r), http_path(r), why);
	api_error(r, status, code, "%s", why);
}

ROUTE(r_key_create)
{
	struct routes *rt = ctx;
	json_t *body = body_object(r), *out = NULL;
	const char *fields[] = {"org", "role", "name"};
	char why[400] = "out of memory";
	int rc;

	(void)p;
	if (!body)
		return;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = json_object_get(body, fields[i]);

		if (v && !json_is_string(v)) {
			api_error(r, 400, "BAD_REQUEST", "%s must be a string", fields[i]);
			json_decref(body);
			return;
		}
	}
	if (json_string_length(json_object_get(body, "name")) > 200) {
		api_error(r, 400, "BAD_REQUEST", "name: at most 200 characters");
		json_decref(body);
		return;
	}
	rc = tenant_key_create(
		rt->cfg.tenants, caller(r), json_string_value(json_object_get(body, "org")),
		json_string_value(json_object_get(body, "role")),
		json_string_value(json_object_get(body, "name")), &out, why, sizeof(why));
	json_decref(body);
	if (rc)
		key_error(r, rc, why);
	else
		api_ok(r, 201, out);
}

ROUTE(r_key_list)
{
	struct routes *rt = ctx;
	json_t *out = NULL;

	(void)p;
	if (tenant_key_list(rt->cfg.tenants, caller(r), &out))
		key_error(r, -ENOMEM, "out of memory");
	else
		api_ok(r, 200, out);
}

ROUTE(r_key_revoke)
{
	struct routes *rt = ctx;
	char why[400] = "";
	int rc = tenant_key_revoke(rt->cfg.tenants, caller(r), p[0], why, sizeof(why));

	if (rc)
		key_error(r, rc, why);
	else
		api_ok(r, 200, NULL);
}

ROUTE(r_whoami)
{
	const struct who *who = caller(r);

	(void)p;
	(void)ctx;
	api_ok(r, 200,
	       json_pack("{s:s, s:s, s:s, s:s}", "id", who->key_id, "orgId", who->org_id, "orgName",
	                 who->org_name, "role", tenant_role_name(who->role)));
}

/*
 * DELETE /orgs/:org/key (the operator): crypto-shredding. Every data key
 * wrapped by the org's key, so everything sealed for the org until now, is
 * unreadable from here on: its paused sandboxes cannot resume, its
 * snapshots' memory cannot be restored.
 */
ROUTE(r_org_key_delete)
{
	struct routes *rt = ctx;
	char id[STORE_ID_LEN], why[400] = "";
	int rc;

	if (tenant_org_lookup(rt->cfg.tenants, p[0], id)) {
		api_error(r, 404, "ORG_NOT_FOUND",
		          "org '%.64s' not found: give its name or id (GET /keys lists orgs)",
		          p[0]);
		return;
	}
	rc = keystore_shred(rt->cfg.keystore, id, why, sizeof(why));
	if (rc == -ENOENT) {
		api_error(r, 404, "KEY_NOT_FOUND", "%s", why);
		return;
	}
	if (rc) {
		log_error(NULL, "DELETE %s: %s", http_path(r), why);
		api_error(r, 500, "INTERNAL", "%s", why);
		return;
	}
	log_warn(NULL, "org %s: its key is deleted: what was sealed for it is unreadable", id);
	api_ok(r, 200,
	       json_pack("{s:s, s:b, s:s}", "orgId", id, "keyDeleted", 1, "message",
	                 "the org's key is deleted: its sealed memory (paused sandboxes, "
	                 "snapshots) can no longer be read; what it seals from now on gets a "
	                 "new key"));
}

/* GET /audit?sandboxId=&after=&limit=: the caller's org's records, oldest first. */
ROUTE(r_audit_list)
{
	struct routes *rt = ctx;
	char sandbox[STORE_ID_LEN] = "", after[24] = "";
	json_t *out = NULL;
	int limit = query_int(r, "limit", 1000);

	(void)p;
	if (limit <= 0 || limit > 10000)
		limit = 10000;
	if (tenant_audit_list(
		    rt->cfg.tenants, caller(r),
		    http_query_get(r, "sandboxId", sandbox, sizeof(sandbox)) > 0 ? sandbox : NULL,
		    http_query_get(r, "after", after, sizeof(after)) > 0 ? strtoll(after, NULL, 10)
									 : 0,
		    limit, &out))
		key_error(r, -EIO, "cannot read the audit trail");
	else
		api_ok(r, 200, out);
}

/* GET /audit/verify: the caller's org's chain, checked by huskd. */
ROUTE(r_audit_verify)
{
	struct routes *rt = ctx;
	json_t *out = NULL;

	(void)p;
	if (tenant_audit_verify(rt->cfg.tenants, caller(r), &out))
		key_error(r, -EIO, "cannot read the audit trail");
	else
		api_ok(r, 200, out);
}
