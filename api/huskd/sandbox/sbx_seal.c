// SPDX-License-Identifier: MIT
/*
 * Sealed memory (issue I, item 6): a pause writes the guest's memory sealed
 * with a data key of its own (vmm/snap/FORMAT.md, "Sealed snapshots"), made
 * for the sandbox's org and kept only wrapped, in the sandbox's record
 * (memKey) and in that of every snapshot that keeps the same memory, and
 * deleted (from the store's files too) when that memory is. husk-vmm
 * gets the key for a restore in a pipe (--key-fd) and for a snapshot on its
 * control socket, and never writes it anywhere. A template maker's memory is
 * every org's to start from and holds nothing of one: it is not sealed.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_int.h"

int sbx_seal_pipe(struct sandbox *sb, const char *wrapped, const struct sbx_dkeys *disk, int *fd,
                  char *err, size_t errlen)
{
	char hex[SBX_DKEY_HEX + 1] = "", *lines = NULL;
	size_t nlines = 0;
	int p[2], rc;

	if (wrapped) {
		rc = sbx_dkey_unwrap(sb, wrapped, "memory", hex, err, errlen);
		if (rc)
			return rc;
		strcat(hex, "\n");
	}
	if (disk && (rc = sbx_dkey_lines(disk, &lines, &nlines))) {
		OPENSSL_cleanse(hex, sizeof(hex));
		snprintf(err, errlen, "cannot hand its disk keys to husk-vmm: %s", strerror(-rc));
		return rc;
	}
	/* A pipe's buffer holds them all (sbx_dkey_lines keeps below it): written and closed
	 * before the VMM starts. */
	if (pipe2(p, O_CLOEXEC) < 0) {
		rc = -errno;
	} else {
		rc = write(p[1], hex, strlen(hex)) == (ssize_t)strlen(hex) ? 0 : -EIO;
		if (!rc && nlines)
			rc = write(p[1], lines, nlines) == (ssize_t)nlines ? 0 : -EIO;
		close(p[1]);
		if (rc)
			close(p[0]);
	}
	OPENSSL_cleanse(hex, sizeof(hex));
	if (lines)
		OPENSSL_cleanse(lines, nlines);
	free(lines);
	if (rc) {
		snprintf(err, errlen, "cannot hand its keys to husk-vmm: %s", strerror(-rc));
		return rc;
	}
	*fd = p[0];
	return 0;
}

int sbx_seal_next(struct sandbox *sb, char *cmd, size_t len, char *err, size_t errlen)
{
	uint8_t key[KEYSTORE_KEY_LEN];
	char hex[2 * KEYSTORE_KEY_LEN + 1];
	int rc;

	free(sb->mem_key_next);
	sb->mem_key_next = NULL;
	cmd[0] = '\0';
	if (!sb->m->cfg.keys || !sb->m->cfg.seal || sb->hidden) {
		/* A VMM restored from sealed memory would seal with its key: told not to. */
		snprintf(cmd, len, "key none");
		return 0;
	}
	rc = keystore_new_key(sb->m->cfg.keys, sb->org[0] ? sb->org : STORE_DEFAULT_ORG, key,
	                      &sb->mem_key_next, err, errlen);
	if (rc)
		return rc;
	keystore_hex(key, hex);
	snprintf(cmd, len, "key %s", hex);
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(hex, sizeof(hex));
	return 0;
}

void sbx_seal_forget(struct sandbox *sb)
{
	if (!sb->mem_key)
		return;
	free(sb->mem_key);
	sb->mem_key = NULL;
	if (!sb->stored)
		return;
	sbx_save(sb, json_pack("{sn}", "memKey"));
	if (store_scrub(sb->m->store))
		log_warn(sb->id, "its deleted key may linger in the store's log until the next "
		                 "scrub");
}

void sbx_seal_done(struct sandbox *sb, bool ok)
{
	if (!ok) {
		free(sb->mem_key_next);
		sb->mem_key_next = NULL;
		return;
	}
	free(sb->mem_key);
	sb->mem_key = sb->mem_key_next;
	sb->mem_key_next = NULL;
	if (sb->stored)
		sbx_save(sb, json_pack("{so}", "memKey",
		                       sb->mem_key ? json_string(sb->mem_key) : json_null()));
}
