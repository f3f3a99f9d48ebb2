// SPDX-License-Identifier: MIT
/* The keys of a VMM's sealed snapshot and encrypted disks, from huskd's pipe (keyring.h). */
#include "keyring.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEYRING_MAX (64u << 10)

static bool is_hex64(const char *s, size_t n)
{
	return n == 64 && strspn(s, "0123456789abcdefABCDEF") >= 64;
}

/* A disk key as the image library takes it: a passphrase as its text, a master key as bytes. */
static void *key_of(const char *hex, bool master)
{
	uint8_t *b;
	size_t n;

	if (!master)
		return strdup(hex);
	b = malloc(IMG_MASTER_KEY_LEN);
	if (b && !OPENSSL_hexstr2buf_ex(b, IMG_MASTER_KEY_LEN, &n, hex, '\0')) {
		free(b);
		return NULL;
	}
	return b;
}

static int parse_line(struct keyring *kr, char *l, unsigned no, char *err, size_t errlen)
{
	bool master = !strncmp(l, "master ", 7);
	size_t at = master ? 7 : 5, hex = master ? 2 * IMG_MASTER_KEY_LEN : 64;
	char *path;

	if (is_hex64(l, strlen(l))) {
		if (kr->has_snap || snap_key_parse(l, 64, &kr->snap))
			goto bad;
		kr->has_snap = true;
		return 0;
	}
	if ((!master && strncmp(l, "disk ", 5)) || strlen(l) < at + hex + 2 ||
	    strspn(l + at, "0123456789abcdefABCDEF") != hex || l[at + hex] != ' ' ||
	    l[at + hex + 1] != '/')
		goto bad;
	if (kr->disks.n == KEYRING_DISKS) {
		snprintf(err, errlen, "line %u: more than %d disk keys", no, KEYRING_DISKS);
		return -EINVAL;
	}
	path = strdup(l + at + hex + 1);
	l[at + hex] = '\0';
	kr->disk[kr->disks.n] = (struct img_secret){.path = path,
	                                            .pass = key_of(l + at, master),
	                                            .len = master ? IMG_MASTER_KEY_LEN : 64,
	                                            .master = master};
	if (!path || !kr->disk[kr->disks.n].pass) {
		free(path);
		free((void *)kr->disk[kr->disks.n].pass);
		return -ENOMEM;
	}
	kr->disks.n++;
	return 0;
bad:
	snprintf(err, errlen,
	         "line %u is not 64 hex digits, 'disk HEX /PATH' or 'master HEX /PATH' (or a "
	         "second key)",
	         no);
	return -EINVAL;
}

int keyring_read_fd(int fd, struct keyring *kr, char *err, size_t errlen)
{
	/* Zeroed: whatever is read (at most KEYRING_MAX) ends with a NUL. */
	char *buf = calloc(1, KEYRING_MAX + 1), *save = NULL;
	size_t got = 0;
	unsigned no = 0;
	int rc = 0;

	*kr = (struct keyring){.disks.v = kr->disk};
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (!rc && got < KEYRING_MAX) {
		ssize_t n = read(fd, buf + got, KEYRING_MAX - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	if (!rc && got == KEYRING_MAX) {
		snprintf(err, errlen, "more than %u bytes", KEYRING_MAX);
		rc = -EINVAL;
	}
	for (char *l = rc ? NULL : strtok_r(buf, "\n", &save); l && !rc;
	     l = strtok_r(NULL, "\n", &save))
		rc = parse_line(kr, l, ++no, err, errlen);
	if (!rc && !no) {
		snprintf(err, errlen, "no key in it");
		rc = -EINVAL;
	}
	OPENSSL_cleanse(buf, got);
	free(buf);
	if (rc)
		keyring_free(kr);
	return rc;
}

void keyring_free(struct keyring *kr)
{
	for (unsigned i = 0; i < kr->disks.n; i++) {
		OPENSSL_cleanse((void *)kr->disk[i].pass, kr->disk[i].len);
		free((void *)kr->disk[i].pass);
		free((void *)kr->disk[i].path);
	}
	OPENSSL_cleanse(kr, sizeof(*kr));
}
