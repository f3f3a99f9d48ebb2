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

static int parse_line(struct keyring *kr, char *l, unsigned no, char *err, size_t errlen)
{
	char *path;

	if (is_hex64(l, strlen(l))) {
		if (kr->has_snap || snap_key_parse(l, 64, &kr->snap))
			goto bad;
		kr->has_snap = true;
		return 0;
	}
	if (strncmp(l, "disk ", 5) || !is_hex64(l + 5, 64) || l[69] != ' ' || l[70] != '/')
		goto bad;
	if (kr->disks.n == KEYRING_DISKS) {
		snprintf(err, errlen, "line %u: more than %d disk keys", no, KEYRING_DISKS);
		return -EINVAL;
	}
	path = strdup(l + 70);
	l[69] = '\0';
	kr->disk[kr->disks.n] = (struct img_secret){.path = path, .pass = strdup(l + 5), .len = 64};
	if (!path || !kr->disk[kr->disks.n].pass) {
		free(path);
		return -ENOMEM;
	}
	kr->disks.n++;
	return 0;
bad:
	snprintf(err, errlen, "line %u is not 64 hex digits or 'disk HEX /PATH' (or a second key)",
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
