// SPDX-License-Identifier: MIT
/*
 * Spare layers (issue J): a sandbox's own disk layer made ahead for the next
 * create over the same base, of the same size, for the same org. An
 * encrypted layer costs what LUKS costs to make (PBKDF2 and the 4,000-stripe
 * split QEMU's reader insists on): 360-600 ms nested, the largest step of a
 * template child's create before its VMM starts. A create that finds a spare
 * renames it into its folder and takes its key; each create leaves one being
 * made for the next. A spare has a fresh key of its own, wrapped for its
 * org, as a layer made at create has. Before use it is checked: its key
 * still opens (the org's key may have been shredded since) and its base is
 * still the file it was made over (a template remade at the same path is
 * another disk: a layer over it would read garbage). Spares live in
 * state/spares and never outlive huskd: their keys are only in memory.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_base.h"
#include "sbx_spare.h"

/* Bounds the disk they hold: a few MiB each (an encrypted layer's key slots). */
#define SPARES_MAX 4

struct sbx_spare {
	struct sbx_mgr *m;
	uv_work_t req;
	char base[4300], path[4300], org[STORE_ID_LEN];
	int64_t disk;        /* resources.disk asked for, 0: the base's size */
	uint64_t vsize;      /* the layer's size */
	struct stat base_st; /* the base when the spare was made over it */
	char *key;           /* its wrapped key, NULL: clear */
	char pass[SBX_DKEY_HEX];
	uint8_t mk[IMG_MASTER_KEY_LEN]; /* encrypted: its master key, for the first VMM start */
	bool ready;
	int rc;
	uint64_t t0; /* uv_hrtime() when it was wanted */
	char err[300];
	struct sbx_spare *next;
};

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

void sbx_spare_start(struct sbx_mgr *m)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/spares", m->cfg.state);
	sbx_remove_dir(dir);
	mkdir(dir, 0700);
}

void sbx_spare_free(struct sbx_spare *s)
{
	if (!s)
		return;
	/* Gone already when it was used; else nothing may keep it. */
	unlink(s->path);
	OPENSSL_cleanse(s->pass, sizeof(s->pass));
	OPENSSL_cleanse(s->mk, sizeof(s->mk));
	free(s->key);
	free(s);
}

static void unlist(struct sbx_spare *s)
{
	for (struct sbx_spare **p = &s->m->spares; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			return;
		}
}

static bool matches(const struct sbx_spare *s, const struct sandbox *sb, const char *base,
                    int64_t disk)
{
	return !strcmp(s->base, base) && s->disk == disk && !strcmp(s->org, sb->org) &&
	       !s->key == !sbx_dkey_wanted(sb);
}

/* Still usable: its base unchanged, its key still opens. */
static bool usable(struct sbx_spare *s)
{
	struct stat st;

	if (stat(s->base, &st) < 0 || !same_file(&st, &s->base_st))
		return false;
	return !s->key || sbx_dkey_opens(s->m, s->key);
}

struct sbx_spare *sbx_spare_take(struct sandbox *sb, const char *base, int64_t disk)
{
	struct sbx_spare *s, *next;

	for (s = sb->m->spares; s; s = next) {
		next = s->next;
		if (!matches(s, sb, base, disk))
			continue;
		if (!s->ready) {
			log_debug(sb->id, "its spare layer is still being made (for %.0f ms)",
			          (double)(uv_hrtime() - s->t0) / 1e6);
			continue;
		}
		unlist(s);
		if (!usable(s)) {
			log_debug(NULL, "a spare layer over %s dropped: its base or key changed",
			          base);
			sbx_spare_free(s);
			continue;
		}
		sb->disk_key = s->key;
		s->key = NULL;
		return s;
	}
	return NULL;
}

int sbx_spare_use(struct sbx_spare *s, struct sandbox *sb, uint64_t *vsize)
{
	if (rename(s->path, sb->layer) < 0)
		return -errno;
	*vsize = s->vsize;
	if (sb->disk_key)
		sbx_dkey_first(sb, s->mk);
	return 0;
}

/* On a worker: the layer, as a create makes it (sbx_create.c layer_work). */
static void make(uv_work_t *req)
{
	struct sbx_spare *s = req->data;

	if (stat(s->base, &s->base_st) < 0) {
		s->rc = -errno;
		snprintf(s->err, sizeof(s->err), "its base: %s", strerror(errno));
		return;
	}
	s->rc = sbx_base_layer_size(s->base, s->disk, &s->vsize, s->err, sizeof(s->err));
	if (!s->rc)
		s->rc = sbx_dkey_make(s->path, s->base, s->vsize, s->key ? s->pass : NULL, s->mk,
		                      s->err, sizeof(s->err));
}

static void made(uv_work_t *req, int status)
{
	struct sbx_spare *s = req->data;

	OPENSSL_cleanse(s->pass, sizeof(s->pass));
	if (status == UV_ECANCELED)
		s->rc = -ECANCELED;
	if (s->rc || s->m->closing) {
		if (s->rc && !s->m->closing)
			log_debug(NULL, "no spare layer over %s: %s", s->base,
			          s->err[0] ? s->err : strerror(-s->rc));
		unlist(s);
		sbx_spare_free(s);
		return;
	}
	s->ready = true;
	log_debug(NULL, "a spare layer over %s made in %.0f ms", s->base,
	          (double)(uv_hrtime() - s->t0) / 1e6);
}

/* Room for one more: the oldest ready spare goes (the list is newest first). */
static bool room(struct sbx_mgr *m)
{
	struct sbx_spare *s, *oldest = NULL;
	unsigned n = 0;

	for (s = m->spares; s; s = s->next) {
		n++;
		if (s->ready)
			oldest = s;
	}
	if (n < SPARES_MAX)
		return true;
	if (!oldest)
		return false;
	unlist(oldest);
	sbx_spare_free(oldest);
	return true;
}

void sbx_spare_want(struct sandbox *sb, const char *base, int64_t disk)
{
	struct sbx_mgr *m = sb->m;
	uint8_t key[KEYSTORE_KEY_LEN];
	char id[STORE_ID_LEN], err[300];
	struct sbx_spare *s;

	if (m->closing || sb->hidden)
		return;
	for (s = m->spares; s; s = s->next)
		if (matches(s, sb, base, disk))
			return;
	if (!room(m) || !(s = calloc(1, sizeof(*s))))
		return;
	s->m = m;
	s->t0 = uv_hrtime();
	s->disk = disk;
	s->req.data = s;
	snprintf(s->base, sizeof(s->base), "%s", base);
	snprintf(s->org, sizeof(s->org), "%s", sb->org);
	if (store_new_id("spr_", id)) {
		free(s);
		return;
	}
	snprintf(s->path, sizeof(s->path), "%s/spares/%s.qcow2", m->cfg.state, id);
	if (sbx_dkey_wanted(sb)) {
		if (keystore_new_key(m->cfg.keys, sb->org[0] ? sb->org : STORE_DEFAULT_ORG, key,
		                     &s->key, err, sizeof(err))) {
			log_warn(sb->id, "no spare layer: cannot make its key: %s", err);
			free(s);
			return;
		}
		keystore_hex(key, s->pass);
		OPENSSL_cleanse(key, sizeof(key));
	}
	if (uv_queue_work(m->loop, &s->req, make, made)) {
		sbx_spare_free(s);
		return;
	}
	s->next = m->spares;
	m->spares = s;
}

unsigned sbx_spare_count(struct sbx_mgr *m, bool ready)
{
	unsigned n = 0;

	for (struct sbx_spare *s = m->spares; s; s = s->next)
		n += !ready || s->ready;
	return n;
}

void sbx_spare_close(struct sbx_mgr *m)
{
	struct sbx_spare *s, *next;

	for (s = m->spares; s; s = next) {
		next = s->next;
		if (s->ready) {
			unlist(s);
			sbx_spare_free(s);
		}
	}
}
