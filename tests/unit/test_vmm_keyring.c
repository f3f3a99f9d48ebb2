// SPDX-License-Identifier: MIT
/* husk-vmm's key pipe (vmm/keyring.c): a snapshot key and disk keys, one a line; nothing else. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "keyring.h"
#include "unit.h"

#define HEX_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HEX_B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

/* Parses text as the pipe's content. */
static int parse(const char *text, struct keyring *kr, char *err, size_t errlen)
{
	int p[2];

	if (pipe(p) || write(p[1], text, strlen(text)) != (ssize_t)strlen(text))
		return -EIO;
	close(p[1]);
	return keyring_read_fd(p[0], kr, err, errlen);
}

UNIT_TEST(vmm_keyring_lines)
{
	struct keyring kr;
	char err[200];

	CHECK(parse(HEX_A "\ndisk " HEX_B " /var/a b.qcow2\ndisk " HEX_A " /x\n", &kr, err,
	            sizeof(err)) == 0);
	CHECK(kr.has_snap && kr.snap.k[1] == 0x11 && kr.disks.n == 2);
	CHECK(!strcmp(kr.disk[0].path, "/var/a b.qcow2") && kr.disk[0].len == 64 &&
	      !memcmp(kr.disk[0].pass, HEX_B, 64) && kr.disks.v == kr.disk);
	keyring_free(&kr);
	/* Disk keys alone: no snapshot key. */
	CHECK(parse("disk " HEX_B " /d\n", &kr, err, sizeof(err)) == 0 && !kr.has_snap &&
	      kr.disks.n == 1);
	keyring_free(&kr);
	CHECK(parse(HEX_A "\n" HEX_B "\n", &kr, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "line 2"));
	CHECK(parse("disk " HEX_B " relative\n", &kr, err, sizeof(err)) == -EINVAL);
	CHECK(parse("disk 1234 /d\n", &kr, err, sizeof(err)) == -EINVAL);
	CHECK(parse("", &kr, err, sizeof(err)) == -EINVAL && strstr(err, "no key"));
}

/* A master key line: 128 hex digits, given to the image library as its 64 bytes. */
UNIT_TEST(vmm_keyring_master_lines)
{
	struct keyring kr;
	char err[200];

	CHECK(parse("master " HEX_A HEX_B " /l.qcow2\ndisk " HEX_A " /b\n", &kr, err,
	            sizeof(err)) == 0);
	CHECK(kr.disks.n == 2 && kr.disk[0].master && !kr.disk[1].master &&
	      kr.disk[0].len == IMG_MASTER_KEY_LEN && !strcmp(kr.disk[0].path, "/l.qcow2"));
	CHECK(((const uint8_t *)kr.disk[0].pass)[1] == 0x11 &&
	      ((const uint8_t *)kr.disk[0].pass)[32] == 0xff &&
	      ((const uint8_t *)kr.disk[0].pass)[63] == 0x00);
	keyring_free(&kr);
	/* A passphrase's length is not a master key's, nor the other way round. */
	CHECK(parse("master " HEX_A " /l\n", &kr, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "line 1"));
	CHECK(parse("disk " HEX_A HEX_B " /l\n", &kr, err, sizeof(err)) == -EINVAL);
	CHECK(parse("master " HEX_A HEX_B "x /l\n", &kr, err, sizeof(err)) == -EINVAL);
	CHECK(parse("master " HEX_A HEX_B " l\n", &kr, err, sizeof(err)) == -EINVAL);
}
