// SPDX-License-Identifier: MIT
/*
 * What reading and writing snapshot files share (snap_priv.h): error
 * messages, whole-buffer I/O, and one section as one LZ4 frame, compressed
 * and decompressed with its checksums checked. The layout is in FORMAT.md.
 */
#include "snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "snap_priv.h"

void snap_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || !errlen)
		return;
	n = snprintf(err, errlen, "snapshot %s: ", path);
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

void snap_describe(const struct snap_reader *r, uint32_t i, char *buf, size_t len)
{
	const struct snap_entry *e = &r->ents[i];

	switch (e->type) {
	case SNAP_VM:
		snprintf(buf, len, "section %u (vm)", i);
		break;
	case SNAP_VCPU:
		snprintf(buf, len, "section %u (vcpu %u)", i, e->id);
		break;
	case SNAP_DEVICE:
		snprintf(buf, len, "section %u (device %s %u)", i, e->name, e->id);
		break;
	case SNAP_RAM:
		snprintf(buf, len, "section %u (ram layout)", i);
		break;
	case SNAP_MEMORY:
		snprintf(buf, len, "section %u (memory chunk %u)", i, e->id);
		break;
	default:
		snprintf(buf, len, "section %u (type %u)", i, e->type);
	}
}

/*
 * Independent 256 KiB blocks: large enough that the per-block size and
 * checksum cost nothing, small enough for the contexts' buffers. Level 0
 * is LZ4's fast mode; snapshots are taken while the guest waits.
 */
static const LZ4F_preferences_t snap_prefs = {
	.frameInfo =
		{
			.blockSizeID = LZ4F_max256KB,
			.blockMode = LZ4F_blockIndependent,
			.contentChecksumFlag = LZ4F_contentChecksumEnabled,
			.blockChecksumFlag = LZ4F_blockChecksumEnabled,
		},
	.compressionLevel = 0,
};

size_t snap_frame_bound(size_t len)
{
	return LZ4F_compressFrameBound(len, &snap_prefs);
}

/*
 * The largest frame of len bytes that any writer could make: LZ4's
 * smallest blocks carry the most per-block overhead. Callers check len
 * against the stored size first, so that nothing here can wrap.
 */
size_t snap_frame_limit(size_t len)
{
	LZ4F_preferences_t prefs = snap_prefs;

	prefs.frameInfo.blockSizeID = LZ4F_max64KB;
	return LZ4F_compressFrameBound(len, &prefs);
}

/*
 * Ends a frame made without a content checksum with one, as liblz4 would
 * have (the same bytes; liblz4's own takes twice as long as xxHash's XXH32
 * natively, ten times under emulation): FLG's content-checksum bit set, the
 * header's check byte (the second byte of XXH32 of the descriptor between
 * the magic and that byte) redone, XXH32 of the content after the end mark
 * (LZ4 Frame Format, "Frame Descriptor"). hdr: the header's length, as
 * LZ4F_compressBegin() returned it.
 */
static int frame_add_csum(uint8_t *dst, size_t hdr, size_t at, size_t cap, const void *src,
                          size_t len, size_t *stored, uint32_t *csum)
{
	if (hdr < LZ4F_HEADER_SIZE_MIN || hdr > at || cap - at < 4)
		return -EIO;
	dst[4] |= 0x04;
	dst[hdr - 1] = (uint8_t)(XXH32(dst + 4, hdr - 5, 0) >> 8);
	*csum = XXH32(len ? src : dst, len, 0);
	snap_put32(dst + at, *csum);
	*stored = at + 4;
	return 0;
}

int snap_frame_compress(LZ4F_cctx *cctx, void *dst, size_t cap, const void *src, size_t len,
                        size_t *stored, uint32_t *csum)
{
	LZ4F_preferences_t prefs = snap_prefs;
	LZ4F_cctx *own = NULL;
	size_t n, at, hdr;
	int ret = -EIO;

	if (!cctx) {
		if (LZ4F_isError(LZ4F_createCompressionContext(&own, LZ4F_VERSION)))
			return -ENOMEM;
		cctx = own;
	}
	prefs.frameInfo.contentSize = len;
	prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
	n = LZ4F_compressBegin(cctx, dst, cap, &prefs);
	if (LZ4F_isError(n))
		goto out;
	at = hdr = n;
	if (len) {
		n = LZ4F_compressUpdate(cctx, (uint8_t *)dst + at, cap - at, src, len, NULL);
		if (LZ4F_isError(n))
			goto out;
		at += n;
	}
	n = LZ4F_compressEnd(cctx, (uint8_t *)dst + at, cap - at, NULL);
	if (LZ4F_isError(n))
		goto out;
	at += n;
	ret = frame_add_csum(dst, hdr, at, cap, src, len, stored, csum);
out:
	LZ4F_freeCompressionContext(own);
	return ret;
}

/* Decompresses one whole frame into exactly raw bytes; why says what failed. */
int snap_frame_decompress(LZ4F_dctx *dctx, const uint8_t *src, size_t stored, void *dst, size_t raw,
                          uint32_t csum, char *why, size_t whylen)
{
	/*
	 * liblz4 checks a frame's checksums at a fraction of the speed of
	 * xxHash's own XXH32 (64 MiB: 31 ms against 15 natively, 850 against 40
	 * under emulation), so it only decompresses and the content checksum,
	 * which covers every byte, is checked here. Block checksums go
	 * unchecked: liblz4 decodes corrupt input safely, and the content check
	 * catches what it decoded wrong.
	 */
	LZ4F_decompressOptions_t opts = {.skipChecksums = 1};
	LZ4F_frameInfo_t fi;
	size_t in_off, out_off = 0, n, rc;
	uint8_t dummy = 0;

	if (stored < SNAP_FRAME_MIN || snap_get32(src + stored - 4) != csum) {
		snprintf(why, whylen, "its checksum does not match the table's");
		return -EIO;
	}
	LZ4F_resetDecompressionContext(dctx);
	in_off = stored;
	rc = LZ4F_getFrameInfo(dctx, &fi, src, &in_off);
	if (LZ4F_isError(rc)) {
		snprintf(why, whylen, "bad LZ4 frame header (%s)", LZ4F_getErrorName(rc));
		return -EIO;
	}
	/* Checksums are what make this format safe to load: insist on them. */
	if (fi.frameType != LZ4F_frame || fi.contentChecksumFlag != LZ4F_contentChecksumEnabled ||
	    fi.blockChecksumFlag != LZ4F_blockChecksumEnabled || fi.contentSize != raw) {
		snprintf(why, whylen, "its LZ4 frame lacks checksums or has the wrong size");
		return -EIO;
	}
	for (;;) {
		size_t in = stored - in_off, out = raw - out_off;

		rc = LZ4F_decompress(dctx, raw ? (uint8_t *)dst + out_off : &dummy, &out,
		                     src + in_off, &in, &opts);
		if (LZ4F_isError(rc)) {
			snprintf(why, whylen, "lz4 reports %s", LZ4F_getErrorName(rc));
			return -EIO;
		}
		in_off += in;
		out_off += out;
		if (rc == 0)
			break;
		if (in == 0 && out == 0) {
			snprintf(why, whylen, "its LZ4 frame ends early");
			return -EIO;
		}
	}
	n = stored - in_off;
	if (n || out_off != raw) {
		snprintf(why, whylen, "%zu bytes follow its LZ4 frame", n);
		return -EIO;
	}
	if (XXH32(raw ? dst : &dummy, raw, 0) != csum) {
		snprintf(why, whylen, "its content does not match its checksum");
		return -EIO;
	}
	return 0;
}

int snap_pio_all(int fd, void *buf, size_t len, uint64_t off, int write)
{
	while (len) {
		ssize_t n =
			write ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf = (uint8_t *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int snap_section_read(struct snap_reader *r, uint32_t i, LZ4F_dctx *dctx, void *src, void *dst,
                      char *err, size_t errlen)
{
	const struct snap_entry *e = &r->ents[i];
	LZ4F_dctx *own = NULL;
	void *own_src = NULL;
	char why[160], what[80];
	size_t stored;
	int ret;

	if (!dctx) {
		if (LZ4F_isError(LZ4F_createDecompressionContext(&own, LZ4F_VERSION)))
			return -ENOMEM;
		dctx = own;
	}
	if (!src && !(src = own_src = malloc(e->stored))) {
		ret = -ENOMEM;
		goto out;
	}
	ret = snap_pio_all(r->fd, src, e->stored, e->off, 0);
	if (ret) {
		snap_describe(r, i, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s cannot be read: %s", what, strerror(-ret));
		goto out;
	}
	stored = e->stored - snap_tag_len(r->flags); /* entry_check(): at least a tag */
	if ((r->flags & SNAP_FLAG_SEALED) &&
	    snap_unseal(&r->key, r->salt, i, src, stored, (uint8_t *)src + stored)) {
		snap_describe(r, i, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s is corrupt: it does not decrypt (altered?)",
		          what);
		ret = -EIO;
		goto out;
	}
	ret = snap_frame_decompress(dctx, src, stored, dst, e->raw, e->csum, why, sizeof(why));
	if (ret) {
		snap_describe(r, i, what, sizeof(what));
		snap_fail(err, errlen, r->path, "%s is corrupt: %s", what, why);
	}
out:
	free(own_src);
	LZ4F_freeDecompressionContext(own);
	return ret;
}
