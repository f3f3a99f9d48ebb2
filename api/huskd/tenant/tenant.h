/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TENANT_H
#define HUSK_TENANT_H

/*
 * Orgs and API keys: who a request is. Every key belongs to one org and has
 * a role; the keys huskd is started with (HUSK_API_KEY or STATE/api-keys)
 * are admin keys of the default org, the operator's. Keys made through the
 * API are kept as SHA-256 in the store and in memory here, and a presented
 * key is compared against every active one in constant time.
 *
 * Roles: read-only (reads only), member (everything in its org), admin (a
 * member that also manages its org's keys). An admin of the default org
 * manages every org's keys and huskd-wide things (runtimes).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

enum tenant_role { ROLE_READ_ONLY, ROLE_MEMBER, ROLE_ADMIN };

/* The caller of a request; valid until tenant_free. */
struct who {
	char key_id[STORE_ID_LEN];
	char org_id[STORE_ID_LEN];
	char org_name[64];
	enum tenant_role role;
	bool revoked;
	bool boot; /* given at start, not made through the API: cannot be revoked here */
	unsigned char hash[32];
	unsigned inflight; /* its requests admitted and not yet freed */
	double tokens;     /* its rate bucket */
	int64_t stamp_ms;  /* when tokens was last filled */
	struct who *next;
};

/* Per-key limits: requests in flight at once, and count per per_ms (a bucket of count). */
struct tenant_limits {
	unsigned max_inflight; /* 0: no limit */
	uint64_t count;        /* 0: no rate limit */
	uint64_t per_ms;
};

struct tenants;

/*
 * Loads the active keys from the store, and the start keys (NULL-terminated,
 * borrowed) as admins of the default org.
 */
int tenant_open(struct store *store, char **boot_keys, struct tenants **out)
	__attribute__((warn_unused_result));
void tenant_free(struct tenants *t);

/* The key's caller, or NULL: unknown or revoked. Takes the same time for any key. */
const struct who *tenant_auth(struct tenants *t, const char *key);

void tenant_set_limits(struct tenants *t, const struct tenant_limits *lim);
/*
 * A request of who's begins at now_ms: 0 (counted in flight until
 * tenant_done(who)), -EBUSY (as many in flight as allowed) or -EAGAIN (its
 * rate used up; *retry_s: when a request is allowed again).
 */
int tenant_admit(struct tenants *t, struct who *who, int64_t now_ms, unsigned *retry_s)
	__attribute__((warn_unused_result));
/* The request tenant_admit let in has ended. */
void tenant_done(struct who *who);
const struct tenant_limits *tenant_limits(const struct tenants *t);

/* Whether who is the operator: an admin of the default org. */
bool tenant_is_operator(const struct who *who);
const char *tenant_role_name(enum tenant_role role);

/*
 * Makes a key for org (a name; NULL: the caller's own, made if new - only by
 * the operator) with role ("admin", "member", "read-only"; NULL: member).
 * *out: {"id", "key", "orgId", "orgName", "role", "name", "createdAt"} - the
 * only time the key is shown. -EPERM (why says it) if who may not, -EINVAL
 * for a bad name or role.
 */
int tenant_key_create(struct tenants *t, const struct who *who, const char *org, const char *role,
                      const char *name, json_t **out, char *why, size_t whylen)
	__attribute__((warn_unused_result));
/* {"keys": [...]} the keys who may see: its org's, all for the operator. No key text. */
int tenant_key_list(struct tenants *t, const struct who *who, json_t **out)
	__attribute__((warn_unused_result));
/* Revokes a key of who's org (any org for the operator): -ENOENT, -EPERM (a start key). */
int tenant_key_revoke(struct tenants *t, const struct who *who, const char *id, char *why,
                      size_t whylen) __attribute__((warn_unused_result));

/*
 * The audit trail of who's org (store_audit_*): a record of a call that asked
 * to change something; the org's records ({"records": [...]}, oldest first,
 * after seq after, at most limit, about sandbox if not NULL); and the chain
 * checked ({"ok", "records", "brokenAt": seq or null}).
 */
int tenant_audit(struct tenants *t, const struct who *who, const char *action, const char *target,
                 const char *sandbox, int status) __attribute__((warn_unused_result));
int tenant_audit_list(struct tenants *t, const struct who *who, const char *sandbox, int64_t after,
                      int limit, json_t **out) __attribute__((warn_unused_result));
int tenant_audit_verify(struct tenants *t, const struct who *who, json_t **out)
	__attribute__((warn_unused_result));

/* The id of the org ref names (its name or its id) into id: 0 or -ENOENT. */
int tenant_org_lookup(struct tenants *t, const char *ref, char id[STORE_ID_LEN])
	__attribute__((warn_unused_result));

/* Whether a text is a usable org name: 1 to 63 of [a-z0-9-], not starting with '-'. */
bool tenant_org_name_ok(const char *name);

#endif
