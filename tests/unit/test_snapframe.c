// SPDX-License-Identifier: MIT
/*
 * One section's LZ4 frame (vmm/snap/snapframe.c): husk-vmm adds the content
 * checksum itself (xxHash), and the frame must be byte for byte the one
 * liblz4 makes with its own, so that files stay the format FORMAT.md names
 * and older readers read them; and it reads back, its checksum checked.
 */
#include <errno.h>
#include <lz4frame.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snap/snap_priv.h"
#include "unit.h"

/* The frame liblz4 makes of src with every checksum its own (the writer's settings). */
static size_t lz4_own(uint8_t *dst, size_t cap, const uint8_t *src, size_t len)
{
	LZ4F_preferences_t prefs = {
		.frameInfo = {.blockSizeID = LZ4F_max256KB,
	                      .blockMode = LZ4F_blockIndependent,
	                      .contentChecksumFlag = LZ4F_contentChecksumEnabled,
	                      .blockChecksumFlag = LZ4F_blockChecksumEnabled,
	                      .contentSize = len},
		.compressionLevel = 0};
	LZ4F_cctx *c = NULL;
	size_t at = 0, n;

	if (LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)))
		return 0;
	n = LZ4F_compressBegin(c, dst, cap, &prefs);
	at = LZ4F_isError(n) ? 0 : n;
	if (at && len) {
		n = LZ4F_compressUpdate(c, dst + at, cap - at, src, len, NULL);
		at = LZ4F_isError(n) ? 0 : at + n;
	}
	if (at) {
		n = LZ4F_compressEnd(c, dst + at, cap - at, NULL);
		at = LZ4F_isError(n) ? 0 : at + n;
	}
	LZ4F_freeCompressionContext(c);
	return at;
}

UNIT_TEST(snap_frame_is_liblz4s_own)
{
	/* Several blocks and a part one, incompressible; zeros; text; one byte; none. */
	static const size_t lens[] = {(3U << 20) + 12345, 1U << 20, 70000, 1, 0};
	size_t cap = snap_frame_bound(4U << 20);
	uint8_t *src = malloc(4U << 20), *ours = malloc(cap), *theirs = malloc(cap),
		*back = malloc(4U << 20);
	LZ4F_dctx *d = NULL;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	char why[200];

	CHECK(src && ours && theirs && back);
	CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t len = lens[k], stored = 0, want;
		uint32_t csum = 0;

		for (size_t i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			src[i] = k == 1   ? 0
			         : k == 2 ? (uint8_t)("husk snapshot "[i % 14])
			                  : (uint8_t)x;
		}
		want = lz4_own(theirs, cap, src, len);
		CHECK(want > 0);
		CHECK(snap_frame_compress(NULL, ours, cap, src, len, &stored, &csum) == 0);
		CHECK(stored == want);
		CHECK(memcmp(ours, theirs, want) == 0);
		CHECK(csum == snap_get32(theirs + want - 4));
		memset(back, 0xa5, len);
		CHECK(snap_frame_decompress(d, ours, stored, back, len, csum, why, sizeof(why)) ==
		      0);
		CHECK(memcmp(back, src, len) == 0);
		/* The table's checksum is what the content is checked against. */
		CHECK(snap_frame_decompress(d, ours, stored, back, len, csum ^ 1, why,
		                            sizeof(why)) == -EIO);
	}
	/* Too small a buffer for the checksum: an error, not a write past it. */
	{
		size_t stored, n = lz4_own(theirs, cap, src, 1000);
		uint32_t csum;

		CHECK(snap_frame_compress(NULL, ours, n - 2, src, 1000, &stored, &csum) < 0);
	}
	LZ4F_freeDecompressionContext(d);
	free(src);
	free(ours);
	free(theirs);
	free(back);
}

/* Content changed where liblz4 decodes it without complaint (block checksums unchecked). */
UNIT_TEST(snap_frame_content_change_refused)
{
	size_t len = 300000, cap = snap_frame_bound(len), stored;
	uint8_t *src = malloc(len), *f = malloc(cap), *back = malloc(len);
	LZ4F_dctx *d = NULL;
	uint32_t csum;
	char why[200] = "";

	CHECK(src && f && back);
	CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
	for (size_t i = 0, x = 88172645463325252ULL; i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		src[i] = (uint8_t)x;
	}
	CHECK(snap_frame_compress(NULL, f, cap, src, len, &stored, &csum) == 0);
	/* Incompressible: the first block is stored as it is (its size's top bit), after the
	 * header. */
	CHECK(snap_get32(f + 15) & 0x80000000U);
	f[15 + 4 + 100] ^= 0x20;
	CHECK(snap_frame_decompress(d, f, stored, back, len, csum, why, sizeof(why)) == -EIO);
	CHECK(why[0] != '\0');
	LZ4F_freeDecompressionContext(d);
	free(src);
	free(f);
	free(back);
}
