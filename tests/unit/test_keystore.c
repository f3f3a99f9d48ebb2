// SPDX-License-Identifier: MIT
/*
 * Keys at rest (api/huskd/keys): a data key unwraps to itself, only as its
 * org's; deleting the org key makes every key it wrapped unreadable, for
 * good; org keys sit in a folder only huskd reads. The KMS hook is driven by
 * a small shell KMS that keeps its keys in its own folder.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keystore.h"
#include "unit.h"

static char *tmp_dir(void)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/husk-keystore-XXXXXX");
	return mkdtemp(dir);
}

UNIT_TEST(keystore_wraps_unwraps_and_shreds)
{
	uint8_t k1[KEYSTORE_KEY_LEN], k2[KEYSTORE_KEY_LEN], back[KEYSTORE_KEY_LEN];
	char *dir = tmp_dir(), path[200], err[300], org[64], *w1 = NULL, *w2 = NULL, *w3 = NULL;
	struct keystore *ks;
	struct stat st;

	CHECK(dir && keystore_open(dir, NULL, &ks) == 0);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
	CHECK(keystore_new_key(ks, "org_a", k1, &w1, err, sizeof(err)) == 0);
	CHECK(keystore_new_key(ks, "org_a", k2, &w2, err, sizeof(err)) == 0);
	CHECK(memcmp(k1, k2, sizeof(k1)) && strcmp(w1, w2));
	snprintf(path, sizeof(path), "%s/org_a.key", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 40);
	/* The key itself is nowhere in its wrapped text. */
	{
		char hex[2 * KEYSTORE_KEY_LEN + 1];

		keystore_hex(k1, hex);
		CHECK(!strstr(w1, hex));
	}
	CHECK(keystore_wrapped_org(w1, org, sizeof(org)) == 0 && !strcmp(org, "org_a"));
	CHECK(keystore_unwrap(ks, w1, back, err, sizeof(err)) == 0 && !memcmp(back, k1, 32));
	CHECK(keystore_unwrap(ks, w2, back, err, sizeof(err)) == 0 && !memcmp(back, k2, 32));
	/* Relabelled as another org's: the org is what the tag covers. */
	CHECK(keystore_new_key(ks, "org_b", k2, &w3, err, sizeof(err)) == 0);
	memcpy(w1 + 3, "org_b", 5);
	CHECK(keystore_unwrap(ks, w1, back, err, sizeof(err)) < 0);
	memcpy(w1 + 3, "org_a", 5);
	w1[strlen(w1) - 1] ^= 1;
	CHECK(keystore_unwrap(ks, w1, back, err, sizeof(err)) == -EBADMSG);
	w1[strlen(w1) - 1] ^= 1;
	CHECK(keystore_unwrap(ks, "l1:org_a:zz", back, err, sizeof(err)) == -EBADMSG);
	CHECK(keystore_unwrap(ks, "nonsense", back, err, sizeof(err)) == -EBADMSG);
	CHECK(keystore_new_key(ks, "../etc", k2, &w2, err, sizeof(err)) == -EINVAL);
	/* Shredded: gone for good, even once the org has a new key; other orgs untouched. */
	CHECK(keystore_shred(ks, "org_a", err, sizeof(err)) == 0);
	CHECK(access(path, F_OK) < 0);
	CHECK(keystore_unwrap(ks, w1, back, err, sizeof(err)) == -ENOKEY);
	CHECK(strstr(err, "deleted") != NULL);
	free(w2);
	w2 = NULL;
	CHECK(keystore_new_key(ks, "org_a", k2, &w2, err, sizeof(err)) == 0);
	CHECK(keystore_unwrap(ks, w1, back, err, sizeof(err)) == -ENOKEY);
	CHECK(keystore_unwrap(ks, w2, back, err, sizeof(err)) == 0);
	CHECK(keystore_unwrap(ks, w3, back, err, sizeof(err)) == 0);
	CHECK(keystore_shred(ks, "org_none", err, sizeof(err)) == -ENOENT);
	keystore_free(ks);
	free(w1);
	free(w2);
	free(w3);
}

/* A KMS of its own: wrapped = the key's digits moved to letters; delete leaves a mark; exit 3
 * after. */
static const char kms_script[] =
	"#!/bin/sh\n"
	"d=$(dirname \"$0\")\n"
	"[ -e \"$d/$2.deleted\" ] && { echo \"org $2 gone\" >&2; exit 3; }\n"
	"case $1 in\n"
	"wrap) read k; echo \"tr-$(echo \"$k\" | tr 0-9a-f g-v)\";;\n"
	"unwrap) read w; echo \"${w#tr-}\" | tr g-v 0-9a-f;;\n"
	"delete) touch \"$d/$2.deleted\";;\n"
	"*) echo \"no op $1\" >&2; exit 2;;\n"
	"esac\n";

UNIT_TEST(keystore_kms_command)
{
	uint8_t k[KEYSTORE_KEY_LEN], back[KEYSTORE_KEY_LEN];
	char *dir = tmp_dir(), cmd[200], err[300], *w = NULL;
	struct keystore *ks;
	FILE *f;

	CHECK(dir);
	snprintf(cmd, sizeof(cmd), "%s/kms", dir);
	CHECK((f = fopen(cmd, "w")) != NULL);
	fputs(kms_script, f);
	fclose(f);
	CHECK(chmod(cmd, 0755) == 0);
	CHECK(keystore_open(dir, cmd, &ks) == 0);
	CHECK(keystore_new_key(ks, "org_k", k, &w, err, sizeof(err)) == 0);
	CHECK(!strncmp(w, "k1:org_k:tr-", 12));
	CHECK(keystore_unwrap(ks, w, back, err, sizeof(err)) == 0 && !memcmp(k, back, 32));
	CHECK(keystore_shred(ks, "org_k", err, sizeof(err)) == 0);
	CHECK(keystore_unwrap(ks, w, back, err, sizeof(err)) == -ENOKEY);
	CHECK(strstr(err, "org org_k gone") != NULL);
	keystore_free(ks);
	/* Without the command, a KMS-wrapped key cannot be opened, and says why. */
	CHECK(keystore_open(dir, NULL, &ks) == 0);
	CHECK(keystore_unwrap(ks, w, back, err, sizeof(err)) == -ENOKEY);
	CHECK(strstr(err, "--kms-command") != NULL);
	keystore_free(ks);
	/* A command that fails says so with its message. */
	snprintf(cmd, sizeof(cmd), "/bin/false");
	CHECK(keystore_open(dir, cmd, &ks) == 0);
	CHECK(keystore_new_key(ks, "org_k", k, &w, err, sizeof(err)) == -EIO);
	keystore_free(ks);
	free(w);
}
