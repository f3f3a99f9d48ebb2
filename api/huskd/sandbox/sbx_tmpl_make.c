// SPDX-License-Identifier: MIT
/*
 * Making a template (sbx_tmpl.c): a hidden sandbox of the runtime and shape
 * boots, its agent dials in, the guest syncs, and it pauses to disk. Its
 * layer and memory.snap move to state/templates/<key>.new, the sandbox goes
 * (no record stays), and its memory file is made there (sbx_memfile.c). The
 * files are then made root's and read-only to all, meta.json written, and
 * the folder renamed to <key>: ready. One template is made at a time; a
 * shape asked for meanwhile boots and asks again at its next create.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_int.h"
#include "sbx_pause.h"
#include "sbx_tmpl.h"

/* The port a maker with a NIC exposes (nothing listens): what gives it the NIC. */
#define MAKER_PORT 65535

struct sbx_tmpl_make {
	struct sbx_mgr *m;
	struct sbx_tmpl *t;
	char sandbox[STORE_ID_LEN];
	char tmp[4300]; /* <key>.new: the template until it is whole */
	uint64_t t0;
	bool closed; /* huskd stops: t is not touched again */
};

static void tmp_path(const struct sbx_tmpl_make *mk, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", mk->tmp, name);
}

static void make_free(struct sbx_tmpl_make *mk)
{
	if (mk->m->making == mk)
		mk->m->making = NULL;
	free(mk);
}

static void make_end(struct sbx_tmpl_make *mk, const char *why)
{
	struct sbx_tmpl *t = mk->t;
	struct sandbox *sb = mk->sandbox[0] ? sbx_find(mk->m, mk->sandbox) : NULL;

	if (mk->closed) {
		make_free(mk);
		return;
	}
	if (why) {
		log_warn(NULL,
		         "template of %s (%llu MiB, %u vCPUs%s) not made: %s; its creates boot",
		         t->rt_name, (unsigned long long)t->mem_mib, t->vcpus,
		         t->nic ? ", NIC" : "", why);
		t->state = TMPL_FAILED;
		t->failed_ms = uv_now(mk->m->loop);
		json_decref(t->like);
		t->like = NULL;
		sbx_remove_dir(mk->tmp);
	}
	if (sb && sb->state != SBX_STOPPING && sb->state != SBX_GONE)
		sbx_end(sb, "deleted",
		        why ? "its template could not be made" : "its template is made", NULL);
	make_free(mk);
}

static int finish(struct sbx_tmpl_make *mk)
{
	struct sbx_tmpl *t = mk->t;
	char path[4400];
	json_t *meta;
	int rc = 0;

	/* Root's, read-only to all: no VMM may change what children start from. */
	for (const char *const *f =
	             (const char *const[]){"disk.qcow2", "memory.snap", "memory.raw", NULL};
	     *f && !rc; f++) {
		tmp_path(mk, *f, path, sizeof(path));
		rc = sbx_seal(path, 0644);
	}
	if (!rc)
		rc = sbx_seal(mk->tmp, 0755);
	meta = json_pack("{sssssssIsIsbsI}", "identity", t->identity, "runtime", t->runtime,
	                 "runtimeName", t->rt_name, "memMib", (json_int_t)t->mem_mib, "vcpus",
	                 (json_int_t)t->vcpus, "nic", t->nic, "madeMs",
	                 (json_int_t)(uv_now(mk->m->loop) - mk->t0));
	tmp_path(mk, "meta.json", path, sizeof(path));
	if (!rc && (!meta || json_dump_file(meta, path, JSON_COMPACT)))
		rc = -EIO;
	json_decref(meta);
	/* Never over a template already there: sandboxes may sit on its disk. */
	if (!rc)
		rc = rename(mk->tmp, t->dir) < 0 ? -errno : 0;
	return rc;
}

/* Its memory file is made (sbx_memfile.c): the template is whole, or it failed. */
static void extracted(struct sbx_mgr *m, int rc, const char *why, void *arg)
{
	struct sbx_tmpl_make *mk = arg;
	json_t *like;
	char e[160];

	if (mk->closed) {
		make_free(mk);
		return;
	}
	if (rc) {
		make_end(mk, why);
		return;
	}
	rc = finish(mk);
	if (rc) {
		snprintf(e, sizeof(e), "cannot keep its files: %s", strerror(-rc));
		make_end(mk, e);
		return;
	}
	mk->t->state = TMPL_READY;
	log_info(NULL, "template of %s (%llu MiB, %u vCPUs%s) ready in %llu ms: %s", mk->t->rt_name,
	         (unsigned long long)mk->t->mem_mib, mk->t->vcpus, mk->t->nic ? ", NIC" : "",
	         (unsigned long long)(uv_now(mk->m->loop) - mk->t0), mk->t->dir);
	like = mk->t->like;
	mk->t->like = NULL;
	make_end(mk, NULL);
	/* The create that found it being made wants a warm VMM of it (the pool decides). */
	if (like)
		m->hooks->pool_wanted(m, like);
	json_decref(like);
}

/* Off the loop, the guest paused to disk: its layer and memory become the template's. */
static int freeze(struct sandbox *sb, void *arg, char *err, size_t errlen)
{
	struct sbx_tmpl_make *mk = arg;
	char path[4400], src[4200];

	sbx_remove_dir(mk->tmp);
	if (mkdir(mk->tmp, 0700) < 0) {
		snprintf(err, errlen, "cannot make %s: %s", mk->tmp, strerror(errno));
		return -errno;
	}
	tmp_path(mk, "disk.qcow2", path, sizeof(path));
	if (rename(sb->layer, path) < 0) {
		snprintf(err, errlen, "cannot keep its layer: %s", strerror(errno));
		return -errno;
	}
	snprintf(src, sizeof(src), "%s/memory.snap", sb->dir);
	tmp_path(mk, "memory.snap", path, sizeof(path));
	if (rename(src, path) < 0) {
		snprintf(err, errlen, "cannot keep its memory: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static void frozen(struct sandbox *sb, int rc, const char *why, void *arg)
{
	struct sbx_tmpl_make *mk = arg;
	char e[512], snap[4400];

	if (rc) {
		make_end(mk, why ? why : "its pause failed");
		return;
	}
	/* Its files moved out: the sandbox itself goes now. */
	sbx_end(sb, "deleted", "its template is made", NULL);
	tmp_path(mk, "memory.snap", snap, sizeof(snap));
	if (sbx_memfile_make(mk->m, snap, mk->tmp, mk->t->mem_mib, extracted, mk, e, sizeof(e)))
		make_end(mk, e);
}

static void synced(struct sandbox *sb, const struct sbx_err *err, const struct sbx_run_out *out,
                   void *arg)
{
	struct sbx_pause_plan plan = {.reason = "paused to become a template",
	                              .full = true, /* children restore it alone */
	                              .freeze = freeze,
	                              .after = frozen,
	                              .arg = arg};
	struct sbx_err e;

	char why[1200];

	if (err) {
		make_end(arg, err->msg);
		return;
	}
	/*
	 * An image without a sync program (127) still makes a template: the
	 * memory and the disk are saved at one instant, so what the guest has
	 * not written yet is in the memory that goes with the disk.
	 */
	if (out->exit_code && out->exit_code != 127) {
		snprintf(why, sizeof(why), "sync failed in the guest (exit %d%s%.*s)",
		         out->exit_code, out->err_len ? ": " : "", (int)out->err_len, out->err);
		make_end(arg, why);
		return;
	}
	if (sbx_pause_start(sb, &plan, &e))
		make_end(arg, e.msg);
}

static void ready(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	if (err) {
		make_end(arg, err->msg);
		return;
	}
	/* What the guest wrote at boot on its disk before the pause, as the memory says. */
	sbx_run(sb, json_pack("[s]", "sync"), NULL, 0, synced, arg);
}

static void created(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct sbx_tmpl_make *mk = ctx;
	struct sandbox *sb;

	if (err) {
		make_end(mk, err->msg);
		return;
	}
	snprintf(mk->sandbox, sizeof(mk->sandbox), "%s",
	         json_string_value(json_object_get(reply->data, "sandboxId")));
	sb = sbx_find(mk->m, mk->sandbox);
	if (!sb) {
		make_end(mk, "its sandbox is gone");
		return;
	}
	log_info(mk->sandbox, "making the template of %s (%llu MiB, %u vCPUs%s)", mk->t->rt_name,
	         (unsigned long long)mk->t->mem_mib, mk->t->vcpus, mk->t->nic ? ", NIC" : "");
	sbx_when_ready(sb, ready, mk);
}

void sbx_tmpl_make(struct sbx_mgr *m, struct sbx_tmpl *t)
{
	struct sbx_tmpl_make *mk;
	json_t *body;

	/* Its memory file needs the one tool uid: not while a snapshot's is being made. */
	if (m->making || m->memfile || m->closing || !(mk = calloc(1, sizeof(*mk)))) {
		/* Not now: asked for again by the next create of its shape. */
		t->state = TMPL_FAILED;
		t->failed_ms = 0;
		return;
	}
	*mk = (struct sbx_tmpl_make){.m = m, .t = t, .t0 = uv_now(m->loop)};
	snprintf(mk->tmp, sizeof(mk->tmp), "%s.new", t->dir);
	m->making = mk;
	/*
	 * A shape with a NIC: the maker has one, configured as every child's is
	 * (each child's own stack gives the same address), but no way out: a
	 * port alone gives a NIC in a namespace of lo (husk-jail --net none).
	 */
	body = json_pack("{sss{ssss}s{ss}}", "runtime", t->runtime, "resources", "memory", "",
	                 "cpu", "", "timeout", "idle", "0s");
	if (body && t->nic)
		json_object_set_new(body, "network",
		                    json_pack("{sbsi}", "enabled", 0, "port", MAKER_PORT));
	if (!body) {
		make_end(mk, "out of memory");
		return;
	}
	json_object_set_new(json_object_get(body, "resources"), "memory",
	                    json_sprintf("%lluMi", (unsigned long long)t->mem_mib));
	json_object_set_new(json_object_get(body, "resources"), "cpu",
	                    json_sprintf("%um", t->vcpus * 1000));
	sbx_create_maker(m, body, created, mk);
	json_decref(body);
}

void sbx_tmpl_close(struct sbx_mgr *m)
{
	struct sbx_tmpl_make *mk = m->making;

	if (!mk || mk->closed)
		return;
	/*
	 * Its sandbox's callbacks may still come (told huskd stops), or its
	 * extraction's (sbx_memfile_close): they only free it.
	 */
	mk->closed = true;
	mk->t->state = TMPL_FAILED;
}
