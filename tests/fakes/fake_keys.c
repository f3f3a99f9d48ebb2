// SPDX-License-Identifier: MIT
/*
 * The key pipe (--key-fd) as husk-vmm reads it (vmm/keyring.h): a sealed
 * snapshot's key, and "disk HEX PATH" lines for encrypted disk images. The
 * disk is opened with them through the real image library and refused, as
 * vmm/virtio/blk.c refuses it, when an image of its chain has no key or the
 * wrong one: huskd's keys are checked against the files it made.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake.h"

#define KEYS_MAX (64u << 10)

/* "disk HEX64 /PATH" (a passphrase, kept as its text) or "master HEX128 /PATH" (as bytes). */
static int disk_line(char *l, struct fake_keys *k)
{
	bool master = !strncmp(l, "master ", 7);
	size_t at = master ? 7 : 5, hex = master ? 2 * IMG_MASTER_KEY_LEN : 64, n = 0;
	struct img_secret *s = &k->disk[k->disks.n];
	uint8_t *b;

	if (strlen(l) < at + hex + 2 || l[at + hex] != ' ' || l[at + hex + 1] != '/' ||
	    strspn(l + at, "0123456789abcdefABCDEF") != hex || k->disks.n == FAKE_DISK_KEYS)
		return -EINVAL;
	l[at + hex] = '\0';
	*s = (struct img_secret){.path = strdup(l + at + hex + 1),
	                         .len = master ? IMG_MASTER_KEY_LEN : hex,
	                         .master = master};
	if (!master) {
		s->pass = strdup(l + at);
	} else if ((b = malloc(IMG_MASTER_KEY_LEN))) {
		s->pass = b;
		if (!OPENSSL_hexstr2buf_ex(b, IMG_MASTER_KEY_LEN, &n, l + at, '\0'))
			return -EINVAL;
		k->masters++;
	}
	if (!s->path || !s->pass)
		return -ENOMEM;
	k->disks.n++;
	return 0;
}

int fake_keys_read(int fd, struct fake_keys *k)
{
	char *buf = calloc(1, KEYS_MAX + 1), *save = NULL;
	size_t got = 0;
	ssize_t n;
	int rc = 0;

	*k = (struct fake_keys){.disks.v = k->disk};
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < KEYS_MAX && (n = read(fd, buf + got, KEYS_MAX - got)) > 0)
		got += (size_t)n;
	close(fd);
	for (char *l = strtok_r(buf, "\n", &save); l && !rc; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "disk ", 5) || !strncmp(l, "master ", 7))
			rc = disk_line(l, k);
		else if (k->snap[0])
			rc = -EINVAL;
		else
			rc = key_fingerprint(l, strlen(l), k->snap);
	}
	free(buf);
	return rc;
}

int fake_disk_check(const char *spec, const struct fake_keys *k)
{
	struct img *img;
	char err[512] = "", disk[4200];
	int rc;

	/* PATH[,serial=S,...] as husk-vmm's --disk takes it. */
	snprintf(disk, sizeof(disk), "%.*s", (int)strcspn(spec, ","), spec);
	rc = img_open_secrets(&img, disk, IMG_FMT_AUTO, IMG_RDONLY, &k->disks, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "husk-vmm: disk '%s': %s\n", disk, err);
		return rc;
	}
	for (struct img *i = img; i; i = img_backing(i)) {
		if (!img_key_missing(i))
			continue;
		fprintf(stderr,
		        "husk-vmm: disk '%s': %s is encrypted and no key for it was given "
		        "(--key-fd: disk HEX PATH)\n",
		        disk, img_path(i));
		rc = -ENOKEY;
		break;
	}
	(void)img_close(img);
	return rc;
}
