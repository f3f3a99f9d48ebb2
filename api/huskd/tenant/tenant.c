// SPDX-License-Identifier: MIT
/*
 * Orgs and API keys (tenant.h). The active keys live in a list that only
 * grows while huskd runs: a revoked entry is marked, never freed, so a
 * request holding its caller keeps a valid pointer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "tenant.h"

struct tenants {
	struct store *store;
	struct who *keys; /* newest first */
	struct tenant_limits lim;
};

static const char *const role_names[] = {
	[ROLE_READ_ONLY] = "read-only",
	[ROLE_MEMBER] = "member",
	[ROLE_ADMIN] = "admin",
};

const char *tenant_role_name(enum tenant_role role)
{
	return role_names[role];
}

static int role_parse(const char *s, enum tenant_role *out)
{
	for (size_t i = 0; i < sizeof(role_names) / sizeof(role_names[0]); i++)
		if (!strcmp(s, role_names[i])) {
			*out = (enum tenant_role)i;
			return 0;
		}
	return -EINVAL;
}

bool tenant_org_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 63 || name[0] == '-')
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static void hash_key(const char *key, unsigned char out[32])
{
	SHA256((const unsigned char *)key, strlen(key), out);
}

static void hex(const unsigned char *in, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", in[i]);
}

static int unhex(const char *in, unsigned char *out, size_t n)
{
	if (!in || strlen(in) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(in + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		out[i] = (unsigned char)v;
	}
	return 0;
}

static struct who *who_add(struct tenants *t, const char *id, const char *org_id,
                           const char *org_name, enum tenant_role role)
{
	struct who *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	snprintf(w->key_id, sizeof(w->key_id), "%s", id);
	snprintf(w->org_id, sizeof(w->org_id), "%s", org_id);
	snprintf(w->org_name, sizeof(w->org_name), "%s", org_name);
	w->role = role;
	w->next = t->keys;
	t->keys = w;
	return w;
}

static int load_stored(struct tenants *t)
{
	json_t *list, *k;
	size_t i;
	int ret = store_keys_active(t->store, &list);

	if (ret < 0)
		return ret;
	json_array_foreach(list, i, k)
	{
		enum tenant_role role;
		struct who *w;

		if (role_parse(json_string_value(json_object_get(k, "role")), &role) < 0)
			continue; /* a role this huskd does not know grants nothing */
		w = who_add(t, json_string_value(json_object_get(k, "id")),
		            json_string_value(json_object_get(k, "orgId")),
		            json_string_value(json_object_get(k, "orgName")), role);
		if (!w) {
			ret = -ENOMEM;
			break;
		}
		if (unhex(json_string_value(json_object_get(k, "hash")), w->hash, sizeof(w->hash)))
			w->revoked = true;
	}
	json_decref(list);
	return ret;
}

int tenant_open(struct store *store, char **boot_keys, struct tenants **out)
{
	struct tenants *t = calloc(1, sizeof(*t));
	int ret, n = 0;

	if (!t)
		return -ENOMEM;
	t->store = store;
	ret = load_stored(t);
	for (char **k = boot_keys; ret == 0 && k && *k; k++) {
		char id[STORE_ID_LEN];
		struct who *w;

		snprintf(id, sizeof(id), "start-%d", ++n);
		w = who_add(t, id, STORE_DEFAULT_ORG, STORE_DEFAULT_ORG_NAME, ROLE_ADMIN);
		if (!w) {
			ret = -ENOMEM;
			break;
		}
		w->boot = true;
		hash_key(*k, w->hash);
	}
	if (ret < 0) {
		tenant_free(t);
		return ret;
	}
	*out = t;
	return 0;
}

void tenant_free(struct tenants *t)
{
	if (!t)
		return;
	while (t->keys) {
		struct who *w = t->keys;

		t->keys = w->next;
		free(w);
	}
	free(t);
}

const struct who *tenant_auth(struct tenants *t, const char *key)
{
	unsigned char h[32];
	const struct who *found = NULL;

	hash_key(key, h);
	/* Every entry is compared, whatever matched: the time says nothing about the key. */
	for (const struct who *w = t->keys; w; w = w->next) {
		bool same = CRYPTO_memcmp(h, w->hash, sizeof(h)) == 0;

		if (same && !w->revoked)
			found = w;
	}
	return found;
}

void tenant_set_limits(struct tenants *t, const struct tenant_limits *lim)
{
	t->lim = *lim;
}

const struct tenant_limits *tenant_limits(const struct tenants *t)
{
	return &t->lim;
}

int tenant_admit(struct tenants *t, struct who *who, int64_t now_ms, unsigned *retry_s)
{
	const struct tenant_limits *l = &t->lim;

	*retry_s = 1;
	if (l->max_inflight && who->inflight >= l->max_inflight)
		return -EBUSY;
	if (l->count && l->per_ms) {
		double rate = (double)l->count / (double)l->per_ms; /* tokens per ms */

		if (!who->stamp_ms)
			who->tokens = (double)l->count;
		else if (now_ms > who->stamp_ms)
			who->tokens += rate * (double)(now_ms - who->stamp_ms);
		if (who->tokens > (double)l->count)
			who->tokens = (double)l->count;
		who->stamp_ms = now_ms;
		if (who->tokens < 1.0) {
			double wait_ms = (1.0 - who->tokens) / rate;

			*retry_s = (unsigned)(wait_ms / 1000.0) + 1;
			return -EAGAIN;
		}
		who->tokens -= 1.0;
	}
	who->inflight++;
	return 0;
}

void tenant_done(struct who *who)
{
	if (who->inflight)
		who->inflight--;
}

bool tenant_is_operator(const struct who *who)
{
	return who->role == ROLE_ADMIN && !strcmp(who->org_id, STORE_DEFAULT_ORG);
}

static json_t *key_info(const struct who *w)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:b}", "id", w->key_id, "orgId", w->org_id,
	                 "orgName", w->org_name, "role", role_names[w->role], "fromStart", w->boot);
}

int tenant_key_create(struct tenants *t, const struct who *who, const char *org, const char *role,
                      const char *name, json_t **out, char *why, size_t whylen)
{
	char org_id[STORE_ID_LEN], id[STORE_ID_LEN], key[STORE_ID_LEN], hash[65];
	enum tenant_role r = ROLE_MEMBER;
	struct who *w;
	int ret;

	*out = NULL;
	if (who->role != ROLE_ADMIN) {
		snprintf(why, whylen, "only an admin key makes keys (this one is %s)",
		         role_names[who->role]);
		return -EPERM;
	}
	if (role && role_parse(role, &r) < 0) {
		snprintf(why, whylen, "role '%s' is none of admin, member, read-only", role);
		return -EINVAL;
	}
	if (!org)
		org = who->org_name;
	if (!tenant_org_name_ok(org)) {
		snprintf(why, whylen,
		         "org name '%s': use 1 to 63 lowercase letters, digits and '-', "
		         "not starting with '-'",
		         org);
		return -EINVAL;
	}
	if (strcmp(org, who->org_name) && !tenant_is_operator(who)) {
		snprintf(why, whylen,
		         "this key is an admin of org '%s' only; keys of other orgs are made with "
		         "an admin key of org '%s'",
		         who->org_name, STORE_DEFAULT_ORG_NAME);
		return -EPERM;
	}
	ret = store_org_find(t->store, org, true, org_id);
	if (ret == 0)
		ret = store_new_id(STORE_PFX_KEY, id);
	if (ret == 0)
		ret = store_new_id("husk_", key);
	if (ret < 0) {
		snprintf(why, whylen, "cannot record the key: %s", strerror(-ret));
		return ret;
	}
	w = who_add(t, id, org_id, org, r);
	if (!w)
		return -ENOMEM;
	hash_key(key, w->hash);
	hex(w->hash, sizeof(w->hash), hash);
	ret = store_key_insert(t->store, id, org_id, role_names[r], hash, name);
	if (ret < 0) {
		w->revoked = true;
		snprintf(why, whylen, "cannot record the key: %s", strerror(-ret));
		return ret;
	}
	*out = key_info(w);
	if (!*out)
		return -ENOMEM;
	json_object_set_new(*out, "key", json_string(key));
	if (name)
		json_object_set_new(*out, "name", json_string(name));
	return 0;
}

int tenant_key_list(struct tenants *t, const struct who *who, json_t **out)
{
	json_t *keys = json_array();

	*out = NULL;
	if (!keys)
		return -ENOMEM;
	for (const struct who *w = t->keys; w; w = w->next) {
		if (w->revoked || (strcmp(w->org_id, who->org_id) && !tenant_is_operator(who)))
			continue;
		if (json_array_insert_new(keys, 0, key_info(w))) {
			json_decref(keys);
			return -ENOMEM;
		}
	}
	*out = json_pack("{s:o}", "keys", keys);
	return *out ? 0 : -ENOMEM;
}

int tenant_key_revoke(struct tenants *t, const struct who *who, const char *id, char *why,
                      size_t whylen)
{
	struct who *w;
	int ret;

	for (w = t->keys; w; w = w->next)
		if (!w->revoked && !strcmp(w->key_id, id) &&
		    (!strcmp(w->org_id, who->org_id) || tenant_is_operator(who)))
			break;
	if (!w) {
		snprintf(why, whylen, "no key '%s' (see husk key list)", id);
		return -ENOENT;
	}
	if (w->boot) {
		snprintf(why, whylen,
		         "key '%s' is one huskd was started with: remove it from HUSK_API_KEY or "
		         "STATE/api-keys and restart huskd",
		         id);
		return -EPERM;
	}
	ret = store_key_revoke(t->store, id);
	if (ret < 0 && ret != -ENOENT) {
		snprintf(why, whylen, "cannot record the revocation: %s", strerror(-ret));
		return ret;
	}
	w->revoked = true;
	return 0;
}

int tenant_audit(struct tenants *t, const struct who *who, const char *action, const char *target,
                 const char *sandbox, int status)
{
	struct store_audit a = {.org_id = who->org_id,
	                        .key_id = who->key_id,
	                        .action = action,
	                        .target = target,
	                        .sandbox_id = sandbox,
	                        .status = status};

	return store_audit_append(t->store, &a);
}

int tenant_audit_list(struct tenants *t, const struct who *who, const char *sandbox, int64_t after,
                      int limit, json_t **out)
{
	return store_audit_list(t->store, who->org_id, sandbox, after, limit, out);
}

int tenant_audit_verify(struct tenants *t, const struct who *who, json_t **out)
{
	int64_t count, broken;
	int rc = store_audit_verify(t->store, who->org_id, &count, &broken);

	*out = NULL;
	if (rc < 0)
		return rc;
	*out = json_pack("{s:b, s:I, s:o}", "ok", !broken, "records", (json_int_t)count, "brokenAt",
	                 broken ? json_integer(broken) : json_null());
	return *out ? 0 : -ENOMEM;
}

int tenant_org_lookup(struct tenants *t, const char *ref, char id[STORE_ID_LEN])
{
	char name[64];

	if (strncmp(ref, STORE_PFX_ORG, strlen(STORE_PFX_ORG)))
		return tenant_org_name_ok(ref) ? store_org_find(t->store, ref, false, id) : -ENOENT;
	if (strlen(ref) >= STORE_ID_LEN || store_org_name(t->store, ref, name, sizeof(name)))
		return -ENOENT;
	snprintf(id, STORE_ID_LEN, "%s", ref);
	return 0;
}
