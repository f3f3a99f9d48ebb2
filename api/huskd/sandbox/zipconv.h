/* SPDX-License-Identifier: MIT */
#ifndef HUSK_ZIPCONV_H
#define HUSK_ZIPCONV_H

/*
 * The files API's zip, with libarchive: a guest speaks tar.gz (its tar), a
 * client may send or want zip. Entries are copied from one archive format to
 * the other as a stream - nothing is extracted on the host, no path is ever
 * opened. Both directions read bytes nobody vouches for (a client's zip, a
 * guest's tar): bounded by max bytes of entry data and ZIPCONV_MAX_ENTRIES.
 */
#include <stddef.h>
#include <stdint.h>

#define ZIPCONV_MAX_ENTRIES 1000000

/*
 * A tar (gzip or not) read from in_fd's start, written to out_fd as zip.
 * 0, -EINVAL (not a tar: err says why), -EFBIG (over max bytes of data or
 * too many entries), or another -errno.
 */
int zipconv_to_zip(int in_fd, int out_fd, uint64_t max, char *err, size_t errlen)
	__attribute__((warn_unused_result));
/* A zip (len bytes at zip) written to out_fd as a plain (pax) tar; the same results. */
int zipconv_to_tar(const void *zip, size_t len, int out_fd, uint64_t max, char *err, size_t errlen)
	__attribute__((warn_unused_result));

#endif
