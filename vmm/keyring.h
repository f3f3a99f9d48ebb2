/* SPDX-License-Identifier: MIT */
#ifndef HUSK_KEYRING_H
#define HUSK_KEYRING_H

#include <stdbool.h>

#include "img.h"
#include "snap/snapfile.h"

/*
 * The keys huskd hands a VMM in a pipe (--key-fd), one per line:
 *   HEX                 the snapshot key: opens a sealed --restore, seals saves
 *   disk HEX PATH       the passphrase of the encrypted disk image at PATH
 *   master HEX PATH     its master key instead (128 hex digits; a layer's first start,
 *                       from huskd that made it: no PBKDF2 and key stripes to open it)
 * HEX is 64 hex digits. Held in memory only; keyring_free() wipes them.
 */
#define KEYRING_DISKS 48 /* huskd: SBX_DKEYS_MAX */

struct keyring {
	bool has_snap;
	struct snap_key snap;
	struct img_secret disk[KEYRING_DISKS];
	struct img_secrets disks; /* over disk[] */
};

/* Reads fd to its end (at most 64 KiB) and closes it: 0, or -EINVAL naming the line in err. */
int keyring_read_fd(int fd, struct keyring *kr, char *err, size_t errlen)
	__attribute__((warn_unused_result));
void keyring_free(struct keyring *kr);

#endif
