/* SPDX-License-Identifier: MIT */
#ifndef HUSK_TEST_SNAP_H
#define HUSK_TEST_SNAP_H

/* Helpers for the snapshot unit tests: files in one temporary directory, guest RAM patterns. */
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"
#include "snap/snapfile.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define PAGE 4096

/* /tmp/husk-snap-unit-XXXXXX/name (the folder goes when the runner exits). */
char *tsnap_path(const char *name);

/* The next value of a xorshift generator whose state is *x. */
uint64_t tsnap_xs(uint64_t *x);

/* len pseudo-random bytes, the same for the same seed. */
void tsnap_fill_random(uint8_t *p, size_t len, uint64_t seed);

enum fill { FILL_ZERO, FILL_RANDOM, FILL_MIXED };

/* Fills guest RAM page by page: random, zero, or a mix with edge cases. */
void tsnap_fill_mem(const struct guest_mem *mem, enum fill how, uint64_t seed);

/* 1 when both guests have the same layout and bytes. */
int tsnap_mem_equal(const struct guest_mem *a, const struct guest_mem *b);

/* A whole file in a new buffer (free()), or NULL. */
uint8_t *tsnap_slurp(const char *path, size_t *len);

/* Writes a whole file; 0 or -1. */
int tsnap_spit(const char *path, const void *buf, size_t len);

/* A snapshot with a few blobs and, when mem is given, its RAM; 0 or -errno. */
int tsnap_write(const char *path, const struct guest_mem *mem, int threads);

/* A diff snapshot of g over the memory file b (a blob and g's pages that differ). 0 or -errno. */
struct memfile_base;
int tsnap_write_diff(const char *path, const struct guest_mem *g, const struct memfile_base *b);

/*
 * A thread's work (pthread_create): reads rounds pages of mem at random,
 * as vCPUs would during a lazy restore, counting in bad those that differ
 * from want's.
 */
struct tsnap_toucher {
	const struct guest_mem *want, *mem;
	uint64_t seed;
	int rounds;
	int bad;
};
void *tsnap_touch_pages(void *arg);

/*
 * Opens path (with key, which may be NULL) and reads every section and, when
 * into is given, all RAM into it: 0 only when all of it succeeds.
 */
int tsnap_read_all(const char *path, const struct snap_key *key, const struct guest_mem *into,
                   char *err, size_t errlen);

#endif
