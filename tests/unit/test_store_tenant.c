// SPDX-License-Identifier: MIT
/*
 * Orgs and keys in the state store: a database from before tenants comes up
 * whole in the default org; keys are recorded and revoked; snapshots of one
 * org are found only by it (or by all when public), tags per org.
 */
#include <errno.h>
#include <string.h>

#include "tenant.h"
#include "test_store.h"
#include "unit.h"

static int org_snap(struct store *s, const char *id, const char *org, const char *name, bool public)
{
	json_t *info = json_pack("{s:s, s:s, s:s, s:I, s:i, s:b, s:{s:s, s:s}}", "snapshotId", id,
	                         "name", name, "tag", "latest", "sizeBytes", (json_int_t)1,
	                         "fileCount", 1, "public", public, "org", "id", org, "name", org);
	int ret = store_snapshot_insert(s, info, NULL);

	json_decref(info);
	return ret;
}

static const char *find_id(struct store *s, const char *org, const char *ref)
{
	static char buf[STORE_ID_LEN];
	json_t *info;
	int ret = store_snapshot_find(s, org, ref, &info, NULL);

	if (ret < 0)
		return ret == -ENOENT ? "ENOENT" : "error";
	snprintf(buf, sizeof(buf), "%s", tstore_str(info, "snapshotId"));
	json_decref(info);
	return buf;
}

UNIT_TEST(store_v1_database_migrates_into_the_default_org)
{
	const char *path = tstore_path("v1.db");
	struct store *s = tstore_reopen(path);
	char id[STORE_ID_LEN];
	json_t *list, *keys;

	CHECK(s && tstore_sandbox(s, "old", id) == 0);
	store_close(s);
	/* Back to schema 1 as an older huskd left it: no orgs, keys, audit or org columns. */
	CHECK(tstore_sql(path, "DROP TABLE audit; DROP TABLE api_keys; DROP TABLE orgs;"
	                       "DROP INDEX sandboxes_org; DROP INDEX snapshots_org;"
	                       "DROP INDEX snapshots_tag;"
	                       "ALTER TABLE sandboxes DROP COLUMN org_id;"
	                       "ALTER TABLE snapshots DROP COLUMN org_id;"
	                       "CREATE UNIQUE INDEX snapshots_tag ON snapshots(name, tag)"
	                       "  WHERE tag IS NOT NULL AND deleted_ms IS NULL;"
	                       "DELETE FROM schema_version WHERE version >= 2;") == 0);
	s = tstore_reopen(path);
	CHECK(s);
	CHECK(store_sandbox_list(s, &(struct store_sandbox_filter){.org_id = STORE_DEFAULT_ORG},
	                         &list) == 0);
	CHECK(tstore_int(list, "total") == 1);
	json_decref(list);
	CHECK(store_sandbox_list(s, &(struct store_sandbox_filter){.org_id = "org_other"}, &list) ==
	      0);
	CHECK(tstore_int(list, "total") == 0);
	json_decref(list);
	CHECK(store_keys_active(s, &keys) == 0 && json_array_size(keys) == 0);
	json_decref(keys);
	store_close(s);
}

UNIT_TEST(store_keys_recorded_and_revoked)
{
	struct store *s = tstore_open("keys.db");
	char org[STORE_ID_LEN], again[STORE_ID_LEN];
	const char *h1 = "0000000000000000000000000000000000000000000000000000000000000001";
	json_t *keys = NULL;

	CHECK(store_org_find(s, "acme", false, org) == -ENOENT);
	CHECK(store_org_find(s, "acme", true, org) == 0 && !strncmp(org, "org_", 4));
	CHECK(store_org_find(s, "acme", true, again) == 0 && !strcmp(org, again));
	CHECK(store_org_find(s, STORE_DEFAULT_ORG_NAME, false, again) == 0 &&
	      !strcmp(again, STORE_DEFAULT_ORG));
	CHECK(store_key_insert(s, "key_a", org, "member", h1, "ci") == 0);
	CHECK(store_key_insert(s, "key_b", org, "member", h1, NULL) == -EEXIST);
	CHECK(store_key_insert(s, "key_c", "org_nosuch", "member", h1 + 0, NULL) == -ENOENT);
	CHECK(store_key_insert(s, "key_d", org, "member", "short", NULL) == -EINVAL);
	CHECK(store_keys_active(s, &keys) == 0 && json_array_size(keys) == 1);
	CHECK(!strcmp(tstore_str(json_array_get(keys, 0), "orgName"), "acme"));
	CHECK(!strcmp(tstore_str(json_array_get(keys, 0), "hash"), h1));
	json_decref(keys);
	keys = NULL;
	CHECK(store_key_revoke(s, "key_a") == 0);
	CHECK(store_key_revoke(s, "key_a") == -ENOENT);
	CHECK(store_keys_active(s, &keys) == 0 && json_array_size(keys) == 0);
	json_decref(keys);
	store_close(s);
}

UNIT_TEST(store_snapshots_scoped_by_org)
{
	struct store *s = tstore_open("orgsnap.db");
	json_t *list = NULL;

	CHECK(org_snap(s, "snp_a1", "org_a", "app", false) == 0);
	tstore_now += 1000;
	/* The same name and tag in another org is its own, and takes nothing from the first. */
	CHECK(org_snap(s, "snp_b1", "org_b", "app", false) == 0);
	CHECK(org_snap(s, "snp_b2", "org_b", "shared", true) == 0);
	CHECK(!strcmp(find_id(s, "org_a", "app:latest"), "snp_a1"));
	CHECK(!strcmp(find_id(s, "org_b", "app:latest"), "snp_b1"));
	CHECK(!strcmp(find_id(s, "org_a", "app"), "snp_a1"));
	CHECK(!strcmp(find_id(s, "org_a", "snp_b1"), "ENOENT"));
	CHECK(!strcmp(find_id(s, "org_a", "snp_b2"), "snp_b2"));
	CHECK(!strcmp(find_id(s, "org_a", "shared"), "snp_b2"));
	CHECK(!strcmp(find_id(s, NULL, "snp_a1"), "ENOENT"));
	CHECK(!strcmp(find_id(s, NULL, "shared:latest"), "snp_b2"));
	CHECK(store_snapshot_list(s, &(struct store_snapshot_filter){.org_id = "org_a"}, &list) ==
	      0);
	CHECK(tstore_int(list, "total") == 1);
	json_decref(list);
	list = NULL;
	CHECK(store_snapshot_list(s, &(struct store_snapshot_filter){.public_only = true}, &list) ==
	      0);
	CHECK(tstore_int(list, "total") == 1);
	json_decref(list);
	store_close(s);
}

UNIT_TEST(tenant_keys_roles_and_revocation)
{
	struct store *s = tstore_open("tenant.db");
	char *boot[] = {"husk_startkey", NULL}, why[400];
	const struct who *op, *w;
	struct tenants *t = NULL;
	json_t *made = NULL, *list = NULL;
	char key[64] = "";

	CHECK(tenant_open(s, boot, &t) == 0);
	op = tenant_auth(t, "husk_startkey");
	CHECK(op && tenant_is_operator(op) && op->boot);
	CHECK(!tenant_auth(t, "husk_startke") && !tenant_auth(t, "") && !tenant_auth(t, "x"));
	CHECK(tenant_key_create(t, op, "acme", "bogus", NULL, &made, why, sizeof(why)) == -EINVAL);
	CHECK(tenant_key_create(t, op, "ACME", NULL, NULL, &made, why, sizeof(why)) == -EINVAL);
	CHECK(tenant_key_create(t, op, "acme", NULL, "ci", &made, why, sizeof(why)) == 0);
	snprintf(key, sizeof(key), "%s", tstore_str(made, "key"));
	json_decref(made);
	made = NULL;
	w = tenant_auth(t, key);
	CHECK(w && w->role == ROLE_MEMBER && !strcmp(w->org_name, "acme") && !w->boot);
	/* A member makes no keys; an org admin only its own org's. */
	CHECK(tenant_key_create(t, w, NULL, NULL, NULL, &made, why, sizeof(why)) == -EPERM);
	CHECK(tenant_key_list(t, w, &list) == 0);
	json_decref(list);
	list = NULL;
	CHECK(tenant_key_revoke(t, op, "start-1", why, sizeof(why)) == -EPERM);
	CHECK(tenant_key_revoke(t, op, w->key_id, why, sizeof(why)) == 0);
	/* The caller a request holds stays readable after its key is revoked. */
	CHECK(w->revoked && !strcmp(w->org_name, "acme"));
	CHECK(!tenant_auth(t, key));
	tenant_free(t);
	/* After a restart: the revoked key stays out, the start key is back. */
	CHECK(tenant_open(s, boot, &t) == 0);
	CHECK(!tenant_auth(t, key) && tenant_auth(t, "husk_startkey"));
	json_decref(made);
	json_decref(list);
	tenant_free(t);
	store_close(s);
}

UNIT_TEST(store_audit_chain_verifies_and_finds_tampering)
{
	const char *path = tstore_path("audit.db");
	struct store *s = tstore_reopen(path);
	struct store_audit a = {.org_id = "org_a",
	                        .key_id = "key_1",
	                        .action = "POST /sandbox/:id/execute",
	                        .target = "/sandbox/sbx_1/execute",
	                        .sandbox_id = "sbx_1",
	                        .status = 200};
	struct store_audit b = {.org_id = "org_b",
	                        .key_id = "key_2",
	                        .action = "POST /sandbox",
	                        .target = "/sandbox",
	                        .status = 201};
	int64_t count, broken;
	json_t *list = NULL;

	CHECK(s);
	for (int i = 0; i < 3; i++)
		CHECK(store_audit_append(s, &a) == 0 && store_audit_append(s, &b) == 0);
	CHECK(store_audit_verify(s, "org_a", &count, &broken) == 0 && count == 3 && broken == 0);
	CHECK(store_audit_list(s, "org_a", NULL, 0, 0, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "records")) == 3);
	/* Each links to the org's record before it, not to the other org's. */
	CHECK(!strcmp(tstore_str(json_array_get(json_object_get(list, "records"), 0), "prev"), ""));
	CHECK(!strcmp(tstore_str(json_array_get(json_object_get(list, "records"), 1), "prev"),
	              tstore_str(json_array_get(json_object_get(list, "records"), 0), "hash")));
	json_decref(list);
	CHECK(store_audit_list(s, "org_a", "sbx_1", 2, 1, &list) == 0);
	CHECK(json_array_size(json_object_get(list, "records")) == 1);
	json_decref(list);
	store_close(s);
	/* SQL cannot change a record; one changed behind SQLite's back breaks the chain there. */
	CHECK(tstore_sql(path, "UPDATE audit SET status = 500 WHERE seq = 3") != 0);
	CHECK(tstore_sql(path, "DELETE FROM audit WHERE seq = 3") != 0);
	CHECK(tstore_sql(path, "DROP TRIGGER audit_no_update;"
	                       "UPDATE audit SET status = 500 WHERE seq = 3") == 0);
	s = tstore_reopen(path);
	CHECK(s);
	CHECK(store_audit_verify(s, "org_a", &count, &broken) == 0 && broken == 3);
	CHECK(store_audit_verify(s, "org_b", &count, &broken) == 0 && count == 3 && broken == 0);
	store_close(s);
}
