// SPDX-License-Identifier: MIT
/*
 * husk audit list / verify: the org's audit trail (API.md §2.6). verify
 * fetches every record and checks the chain here, with its own SHA-256, so
 * it does not take huskd's word for it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/sha.h>

#include "cli.h"

/* Records per request while walking the whole trail. */
#define PAGE 1000

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* Whether rec's hash is the SHA-256 of its fields and prev (as huskd's store_audit_text). */
static bool record_holds(json_t *rec)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	char text[4096], hex[2 * SHA256_DIGEST_LENGTH + 1];
	int n = snprintf(
		text, sizeof(text), "%" PRId64 "|%s|%s|%s|%s|%s|%d|%" PRId64 "|%s",
		(int64_t)json_integer_value(json_object_get(rec, "seq")), str(rec, "orgId"),
		str(rec, "keyId"), str(rec, "action"), str(rec, "target"), str(rec, "sandboxId"),
		(int)json_integer_value(json_object_get(rec, "status")),
		(int64_t)json_integer_value(json_object_get(rec, "createdMs")), str(rec, "prev"));

	if (n < 0 || (size_t)n >= sizeof(text))
		return false;
	SHA256((const unsigned char *)text, (size_t)n, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	return !strcmp(hex, str(rec, "hash"));
}

static int audit_verify(struct cli *c, int argc, char **argv)
{
	char prev[80] = "", after[32] = "0";
	long long count = 0, broken = 0;
	struct args a;
	int rc = 0;

	c->usage = "husk audit verify [--json]\n"
		   "Fetches the whole audit trail of this key's org and checks each record's\n"
		   "hash and its link to the one before. Exits 1 naming the first that fails.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, NULL, "", &a));
	while (!rc && !broken) {
		struct sbuf t = {0};
		json_t *env = NULL, *recs, *rec;
		size_t i;

		sb_printf(&t, "/audit");
		sb_query(&t, "after", after);
		sb_query(&t, "limit", "1000");
		rc = cli_call(c, "GET", t.s, NULL, &env);
		sb_free(&t);
		recs = json_object_get(json_object_get(env, "data"), "records");
		json_array_foreach(recs, i, rec)
		{
			count++;
			if (strcmp(str(rec, "prev"), prev) || !record_holds(rec)) {
				broken = json_integer_value(json_object_get(rec, "seq"));
				break;
			}
			snprintf(prev, sizeof(prev), "%s", str(rec, "hash"));
			snprintf(after, sizeof(after), "%lld",
			         (long long)json_integer_value(json_object_get(rec, "seq")));
		}
		i = json_array_size(recs);
		json_decref(env);
		if (i < PAGE)
			break;
	}
	if (rc)
		return rc;
	if (c->json)
		printf("{\"ok\": %s, \"records\": %lld, \"brokenAt\": %lld}\n",
		       broken ? "false" : "true", count, broken);
	else if (broken)
		fprintf(stderr, "husk: the audit trail is broken at record %lld (of %lld read)\n",
		        broken, count);
	else
		printf("%lld records, the chain holds\n", count);
	return broken ? 1 : 0;
}

static int audit_list(struct cli *c, int argc, char **argv)
{
	static const struct col cols[] = {
		{"SEQ", "seq"},       {"TIME", "createdAt"},    {"KEY", "keyId"},
		{"ACTION", "action"}, {"SANDBOX", "sandboxId"}, {"STATUS", "status"},
		{NULL, NULL}};
	const char *sandbox = NULL, *after = NULL, *limit = NULL;
	const struct opt opts[] = {{"sandbox", 0, OPT_STR, &sandbox},
	                           {"after", 0, OPT_STR, &after},
	                           {"limit", 0, OPT_STR, &limit},
	                           {NULL, 0, 0, NULL}};
	struct sbuf t = {0};
	struct args a;
	int rc;

	c->usage = "husk audit list [--sandbox ID] [--after SEQ] [--limit N] [--json]\n"
		   "The audit trail of this key's org, oldest first: every call that asked to\n"
		   "change something, with its key, action, sandbox and answer.\n";
	ARGS_OR_RETURN(args_parse(c, argc, argv, opts, "", &a));
	sb_printf(&t, "/audit");
	sb_query(&t, "sandboxId", sandbox);
	sb_query(&t, "after", after);
	sb_query(&t, "limit", limit);
	rc = cli_show(c, "GET", t.s, NULL, "records", cols);
	sb_free(&t);
	return rc;
}

int audit_main(struct cli *c, int argc, char **argv)
{
	static const struct subcmd table[] = {
		{"list|ls", audit_list, "the org's audit records"},
		{"verify", audit_verify, "check the audit trail's hash chain"},
		{NULL, NULL, NULL}};

	return cli_subcommand(c, "audit", table, argc, argv);
}
