// SPDX-License-Identifier: MIT
/*
 * POST /sandbox: the request checked (sbx_create_plan.c), the host asked
 * whether it can take one more, the sandbox's copy-on-write layer made off
 * the loop, its record written, its VMM started (booting, or resuming a
 * snapshot's memory) - or a warm VMM taken (sbx_pool.c), whose layer and
 * VMM are there already. Also the creates of a template's maker and of a
 * warm VMM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_base.h"
#include "sbx_create_plan.h"
#include "sbx_int.h"
#include "sbx_pool.h"
#include "sbx_spare.h"
#include "sbx_tmpl.h"

/* A request's create; a template's maker's; a warm VMM's (sbx_pool.c). */
enum create_kind { CREATE_USER, CREATE_MAKER, CREATE_POOLED };

struct create {
	enum create_kind kind;
	sbx_done_fn done;
	void *ctx;
	bool warm_vmm; /* sb is a warm VMM taken from the pool: made, restored, parked */
	json_t *like;  /* a create like this one, to make a warm VMM for the next (or NULL) */
	struct sbx_pool_key key; /* what a warm VMM for a create like this one is made for */
	struct sbx_base base;
	json_t *pub, *priv;
	int64_t disk;         /* resources.disk, 0: the base's size */
	const char *warm;     /* the snapshot's memory to resume from, or NULL */
	const char *mem_file; /* warm's RAM as a file to map, or NULL */
	const char *warm_key; /* warm's wrapped key when it is sealed, or NULL */
	/* The template it restores (registry entries live as long as the manager), or NULL. */
	const struct sbx_tmpl *tmpl;
	struct sbx_spare *spare; /* its layer, made ahead (sbx_spare.c), or NULL */
	char snap_mem[4300];     /* a base snapshot's memory file */
	uint64_t vsize;          /* the layer's size */
	char err[384];           /* from the worker */
	enum sbx_fault why;      /* from the worker */
	/* uv_hrtime() at the request, the worker's start, the base read, the layer made */
	uint64_t t_req, t_work, t_base, t_layer;
};

/* On a worker: the layer over the base, of the disk size asked for. */
static int layer_work(struct sandbox *sb, void *arg)
{
	struct create *c = arg;
	uint64_t size;
	char e[256] = "";
	int rc;

	c->t_work = uv_hrtime();
	if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		c->why = SBX_INTERNAL;
		snprintf(c->err, sizeof(c->err), "cannot make %s: %s", sb->dir, strerror(-rc));
		return rc;
	}
	/* Made ahead with this base, size and org, and sb->disk_key its key. */
	if (c->spare && sbx_spare_use(c->spare, sb, &c->vsize) == 0) {
		c->t_base = c->t_layer = uv_hrtime();
		return 0;
	}
	rc = sbx_base_layer_size(c->base.path, c->disk, &size, e, sizeof(e));
	c->t_base = uv_hrtime();
	if (rc == -ERANGE) {
		c->why = SBX_BAD_INPUT;
		snprintf(c->err, sizeof(c->err), "%s", e);
		return -EINVAL;
	}
	if (rc) {
		c->why = SBX_INTERNAL;
		snprintf(c->err, sizeof(c->err), "the base image is unusable: %s", e);
		return rc;
	}
	c->vsize = size;
	rc = sbx_dkey_layer(sb, c->base.path, size, true, e, sizeof(e));
	c->t_layer = uv_hrtime();
	if (rc) {
		c->why = SBX_INTERNAL;
		snprintf(c->err, sizeof(c->err), "cannot create the sandbox's disk: %s", e);
	}
	return rc;
}

static void create_free(struct create *c)
{
	sbx_spare_free(c->spare);
	json_decref(c->like);
	sbx_base_free(&c->base);
	json_decref(c->pub);
	json_decref(c->priv);
	free(c);
}

/* Creation failed before the sandbox was up: it goes, and the request says why. */
static void create_fail(struct sandbox *sb, struct create *c, const struct sbx_err *err)
{
	c->done(c->ctx, err, NULL);
	/* Ended already (huskd stopping, a warm VMM's snapshot deleted): nothing more to end. */
	if (sb->state != SBX_STOPPING && sb->state != SBX_GONE) {
		sb->end_status = "failed";
		if (sb->stored)
			log_error(sb->id, "failed: %s", err->msg);
		sbx_to(sb, SBX_STOPPING, err->msg, NULL);
	}
	/*
	 * Cut short by huskd's stop, which keeps sandboxes' folders for the next
	 * huskd to take up: this one was never recorded, and no one would.
	 */
	if (sb->m->closing && !sb->stored)
		sbx_remove_dir(sb->dir);
	create_free(c);
}

static void layer_done(struct sandbox *sb, int rc, void *arg)
{
	struct create *c = arg;
	struct sbx_reply reply = {0};
	struct sbx_err err;
	char e[512];
	json_t *info = NULL;
	uint64_t t_done = uv_hrtime(), t_stored;

	if (rc) {
		sbx_fail(&err, c->why ? c->why : SBX_INTERNAL, rc, "%s",
		         c->err[0] ? c->err : strerror(-rc));
		create_fail(sb, c, &err);
		return;
	}
	/*
	 * Ended while its layer was made: huskd stopped (a VMM started now would
	 * keep huskd's loop, and so huskd, running), or it was a warm VMM of a
	 * snapshot deleted meanwhile.
	 */
	if (sb->state == SBX_STOPPING || sb->state == SBX_GONE) {
		if (sb->m->closing)
			sbx_fail(&err, SBX_UNAVAILABLE, -ESHUTDOWN,
			         "huskd is stopping; try again once it is back");
		else
			sbx_fail(&err, SBX_ENDED, -ESHUTDOWN,
			         "the sandbox ended while it was created: %s", sb->end_reason);
		create_fail(sb, c, &err);
		return;
	}
	json_object_set_new(json_object_get(c->pub, "resources"), "disk",
	                    json_sprintf("%lluMi", (unsigned long long)(c->vsize >> 20)));
	/* A warm VMM is recorded when a create takes it. */
	rc = c->kind == CREATE_POOLED ? 0
	                              : store_sandbox_insert(sb->m->store, c->pub, c->priv, &info);
	if (rc) {
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot record the sandbox: %s", strerror(-rc));
		create_fail(sb, c, &err);
		return;
	}
	sb->stored = c->kind != CREATE_POOLED;
	sb->pool.vsize = c->vsize;
	t_stored = uv_hrtime();
	if (c->warm_vmm)
		rc = sbx_pool_resume(sb, e, sizeof(e));
	else
		rc = sbx_vmm_start(sb, c->warm, c->mem_file, c->warm_key, e, sizeof(e));
	if (rc) {
		json_decref(info);
		sbx_fail(&err, SBX_INTERNAL, rc, "%s", e);
		create_fail(sb, c, &err);
		return;
	}
	if (c->kind == CREATE_POOLED)
		sbx_pool_vmm_started(sb);
	sbx_to(sb, c->warm ? SBX_RESTORING : SBX_BOOTING, NULL, NULL);
	if (c->warm_vmm)
		sbx_pool_claimed(sb);
	/* The next create like this one finds its layer made. */
	if (!c->base.snap)
		sbx_spare_want(sb, c->base.path, c->disk);
	/* And its warm VMM, made after this one's VMM started. */
	c->key.org = sb->org; /* the request's body may be gone by now */
	if (c->like && c->warm && !sbx_has_nic(sb) && sbx_pool_wanted(sb->m, &c->key))
		sbx_create_pooled(sb->m, c->like);
	/* Where a create's time goes before its VMM runs (ms). */
	log_debug(sb->id,
	          "%s took %.1f ms: to a worker %.1f, base read %.1f, layer %.1f%s, back on "
	          "the loop %.1f, record %.1f, VMM %s %.1f",
	          c->kind == CREATE_POOLED ? "a warm VMM's create" : "create",
	          (double)(uv_hrtime() - c->t_req) / 1e6, (double)(c->t_work - c->t_req) / 1e6,
	          (double)(c->t_base - c->t_work) / 1e6, (double)(c->t_layer - c->t_base) / 1e6,
	          c->spare ? " (a spare)" : "", (double)(t_done - c->t_layer) / 1e6,
	          (double)(t_stored - t_done) / 1e6, c->warm_vmm ? "resumed" : "started",
	          (double)(uv_hrtime() - t_stored) / 1e6);
	if (c->kind != CREATE_POOLED)
		log_info(sb->id, "created: %s%s%s, %llu MiB, %lldm cpu%s",
		         json_string_value(json_object_get(c->base.rt, "name")),
		         c->base.snap ? " from snapshot " : "",
		         c->base.snap
		                 ? json_string_value(json_object_get(c->base.snap, "snapshotId"))
		                 : "",
		         (unsigned long long)sb->mem_mib, (long long)sb->cpu_millis,
		         c->warm_vmm && c->base.snap ? ", a warm VMM of its snapshot"
		         : c->warm_vmm               ? ", a warm VMM of its runtime's template"
		         : c->tmpl                   ? ", restored from its runtime's template"
		         : c->mem_file               ? ", resumed from its memory file"
		         : c->warm                   ? ", resumed from its memory"
		                                     : "");
	reply.data = info;
	c->done(c->ctx, NULL, &reply);
	json_decref(info);
	create_free(c);
}

/* The template of its runtime and shape, if one is ready: the create restores it. */
static void use_template(struct sbx_mgr *m, struct sandbox *sb, struct create *c)
{
	const struct sbx_tmpl *t;

	if (c->base.snap || !(t = sbx_tmpl_get(m, c->base.rt, c->base.rt_priv, sb->mem_mib,
	                                       sb->vcpus, sbx_has_nic(sb))))
		return;
	c->tmpl = t;
	sb->from_template = true;
	c->base.path = t->disk;
	json_object_set_new(c->priv, "template", json_string(t->key));
}

static void create(struct sbx_mgr *m, json_t *body, enum create_kind kind, sbx_done_fn done,
                   void *ctx);

void sbx_create(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx)
{
	create(m, body, CREATE_USER, done, ctx);
}

void sbx_create_maker(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx)
{
	create(m, body, CREATE_MAKER, done, ctx);
}

static void pooled_made(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	(void)ctx;
	(void)reply;
	if (err)
		log_info(NULL, "no warm VMM made: %s", err->msg);
}

void sbx_create_pooled(struct sbx_mgr *m, json_t *body)
{
	create(m, body, CREATE_POOLED, pooled_made, NULL);
}

/* What sbx_has_nic() says once the network is planned: a warm VMM has no NIC. */
static bool wants_nic(json_t *body)
{
	json_t *net = json_object_get(body, "network"), *port = json_object_get(net, "port");

	return json_is_true(json_object_get(net, "enabled")) || (port && !json_is_null(port)) ||
	       json_is_true(json_object_get(net, "allPorts"));
}

/*
 * A snapshot's keys still open (its org's key not shredded since): else its
 * create goes the usual way, which says so, not to a warm VMM made before.
 */
static bool snap_keys_open(struct sbx_mgr *m, json_t *snap_priv)
{
	const char *mem = json_string_value(json_object_get(snap_priv, "memKey")), *k;
	json_t *v;

	if (mem && !sbx_dkey_opens(m, mem))
		return false;
	json_object_foreach(json_object_get(snap_priv, "diskKeys"), k, v)
	{
		if (json_is_string(v) && !sbx_dkey_opens(m, json_string_value(v)))
			return false;
	}
	return true;
}

/*
 * A warm VMM for this create (then sb is its sandbox, its id this one's), or
 * NULL; c->like and c->key set for the next create's when pooling is on: a
 * create of a template, or of a snapshot's memory, without a network.
 */
static struct sandbox *take_warm(struct sbx_mgr *m, json_t *body, struct create *c, int64_t mem,
                                 int64_t millis)
{
	uint64_t mib = (uint64_t)mem >> 20;
	unsigned vcpus = (unsigned)((millis + 999) / 1000);
	struct sandbox *sb;

	if (!m->cfg.warm_pool || c->kind != CREATE_USER || wants_nic(body))
		return NULL;
	c->key = (struct sbx_pool_key){
		.org = sbx_info_org(body), .disk = c->disk, .mem_mib = mib, .vcpus = vcpus};
	if (c->base.snap) {
		if (!sbx_base_memory(&c->base, mib, vcpus, false) ||
		    !snap_keys_open(m, c->base.snap_priv))
			return NULL;
		c->key.snap = json_string_value(json_object_get(c->base.snap, "snapshotId"));
		c->key.snap_ref = json_string_value(json_object_get(body, "snapshot"));
	} else {
		c->key.tmpl = sbx_tmpl_get(m, c->base.rt, c->base.rt_priv, mib, vcpus, false);
	}
	c->like = json_object();
	for (const char *const *k = (const char *const[]){"runtime", "runtimeId", "snapshot",
	                                                  "resources", "org", NULL};
	     c->like && *k; k++)
		if (json_object_get(body, *k))
			json_object_set(c->like, *k, json_object_get(body, *k));
	/* Being made (or just asked for): its first warm VMM comes once it is ready. */
	if (!c->base.snap && !c->key.tmpl)
		sbx_tmpl_wish(m, c->base.rt, c->base.rt_priv, mib, vcpus, c->like);
	sb = sbx_pool_take(m, &c->key);
	if (sb) {
		c->warm_vmm = true;
		log_debug(sb->id, "a create takes this warm VMM");
	}
	return sb;
}

static void create(struct sbx_mgr *m, json_t *body, enum create_kind kind, sbx_done_fn done,
                   void *ctx)
{
	struct create *c = calloc(1, sizeof(*c));
	char id[STORE_ID_LEN], layer[4200];
	struct sandbox *sb = NULL;
	int64_t mem, millis;
	struct sbx_err err;
	int rc;

	if (!c || store_new_id("sbx_", id)) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		goto fail;
	}
	c->kind = kind;
	c->done = done;
	c->ctx = ctx;
	c->t_req = uv_hrtime();
	rc = sbx_base_find(m, body, &c->base, &err);
	if (!rc)
		rc = sbx_plan_resources(json_object_get(body, "resources"),
		                        json_object_get(c->base.rt, "requirements"), &mem, &millis,
		                        &c->disk, &err);
	if (!rc)
		rc = sbx_admit(m, (uint64_t)mem >> 20, (unsigned)((millis + 999) / 1000), &err);
	if (rc)
		goto fail;
	sb = take_warm(m, body, c, mem, millis);
	if (!sb)
		sb = sbx_new(m, id);
	if (!sb) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		goto fail;
	}
	snprintf(layer, sizeof(layer), "%s/layer.qcow2", sb->dir);
	free(sb->layer);
	sb->layer = strdup(layer);
	sb->mem_mib = (uint64_t)mem >> 20;
	sb->cpu_millis = millis;
	sb->vcpus = (unsigned)((millis + 999) / 1000);
	sb->hidden = kind == CREATE_MAKER;
	snprintf(sb->org, sizeof(sb->org), "%s", sbx_info_org(body));
	/* An imported image's env first, a built snapshot's over it, the request's over both. */
	if (json_is_object(json_object_get(c->base.rt, "defaults"))) {
		json_decref(sb->image);
		sb->image = json_deep_copy(json_object_get(c->base.rt, "defaults"));
		if (json_is_object(json_object_get(sb->image, "env")))
			json_object_update(sb->env, json_object_get(sb->image, "env"));
	}
	if (json_is_object(json_object_get(c->base.snap_priv, "env")))
		json_object_update(sb->env, json_object_get(c->base.snap_priv, "env"));
	rc = sbx_plan_limits(body, sb, &err);
	if (!rc)
		rc = sbx_plan_network(m, body, sb, &err);
	if (!rc)
		rc = sbx_deps_plan(sb, body, &err);
	if (rc)
		goto fail;
	c->pub = sbx_plan_info(body, sb, c->base.rt, mem);
	c->priv = json_pack("{sssssbsIsIsIsOsIsIsI}", "dir", sb->dir, "layer", layer, "oneshot",
	                    sb->oneshot, "execTimeoutMs", (json_int_t)sb->exec_timeout_ms, "idleMs",
	                    (json_int_t)sb->idle_ms, "pausedMs", (json_int_t)sb->paused_ms, "env",
	                    sb->env, "memMib", (json_int_t)sb->mem_mib, "vcpus",
	                    (json_int_t)sb->vcpus, "cpuMillis", (json_int_t)millis);
	if (c->priv)
		json_object_set_new(c->priv, "orgId", json_string(sb->org));
	if (c->priv && sb->net)
		json_object_set_new(c->priv, "network", json_true());
	if (c->pub && c->priv && kind == CREATE_MAKER) {
		json_object_set_new(c->pub, "mode", json_string("template"));
		json_object_set_new(c->priv, "templateMaker", json_true());
	}
	if (c->priv && sb->image)
		json_object_set(c->priv, "image", sb->image);
	if (c->priv && sb->port)
		json_object_set_new(c->priv, "port", json_integer(sb->port));
	if (c->priv && sb->all_ports)
		json_object_set_new(c->priv, "allPorts", json_true());
	if (c->priv && sbx_has_nic(sb))
		sbx_net_identity(sb, c->priv);
	if (c->priv && sb->egress_rate)
		json_object_set_new(c->priv, "egressRate",
		                    json_integer((json_int_t)sb->egress_rate));
	/* The lists as given, checked: parsed again when huskd restarts. */
	for (const char *const *k = (const char *const[]){"allow", "deny", NULL}; c->priv && *k;
	     k++)
		if (json_is_array(json_object_get(json_object_get(body, "network"), *k)))
			json_object_set(c->priv, !strcmp(*k, "allow") ? "netAllow" : "netDeny",
			                json_object_get(json_object_get(body, "network"), *k));
	if (!c->pub || !c->priv || !sb->layer) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		goto fail;
	}
	if (kind != CREATE_MAKER)
		use_template(m, sb, c);
	sbx_base_apply(sb, &c->base, c->pub, c->priv);
	if (kind != CREATE_MAKER && !c->base.snap && !c->warm_vmm)
		c->spare = sbx_spare_take(sb, c->base.path, c->disk);
	rc = sbx_dkey_plan(sb, c->base.snap_priv, c->priv, c->err, sizeof(c->err));
	if (rc) {
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot make the sandbox's disk key: %s", c->err);
		goto fail;
	}
	/* A template, or a snapshot with memory of this shape: resume it rather than boot. */
	if (c->tmpl) {
		c->warm = c->tmpl->snap;
		c->mem_file = c->tmpl->mem;
	} else if ((c->warm = sbx_base_memory(&c->base, sb->mem_mib, sb->vcpus, sbx_has_nic(sb)))) {
		c->warm_key = json_string_value(json_object_get(c->base.snap_priv, "memKey"));
		/* Sealed memory is never written out in the clear, as a memory file would be. */
		if (!c->warm_key)
			c->mem_file =
				sbx_base_memfile(m, &c->base, c->snap_mem, sizeof(c->snap_mem));
	}
	/* A warm VMM restores (a template, or the one just found) and has no NIC. */
	if ((kind == CREATE_POOLED || c->warm_vmm) && (!c->warm || sbx_has_nic(sb))) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOENT,
		         "what it restores (its runtime's template, its snapshot's memory) went "
		         "away during the create; try again");
		goto fail;
	}
	if (kind == CREATE_POOLED) {
		c->key = (struct sbx_pool_key){
			.tmpl = c->tmpl,
			.snap = c->tmpl ? NULL : sb->base_snap,
			.org = sb->org,
			.disk = c->disk,
			.mem_mib = sb->mem_mib,
			.vcpus = sb->vcpus,
		};
		/* Asked for twice meanwhile, or the bound met: one is enough. */
		if (!sbx_pool_wanted(m, &c->key)) {
			sbx_fail(&err, SBX_UNAVAILABLE, -EAGAIN,
			         "as many warm VMMs of it as huskd --warm-pool asks are made");
			goto fail;
		}
		sbx_pool_begin(sb, &c->key, body);
	}
	/* A warm VMM's layer is there: the create goes on at once. */
	if (c->warm_vmm) {
		c->vsize = sb->pool.vsize;
		c->t_work = c->t_base = c->t_layer = uv_hrtime();
		layer_done(sb, 0, c);
		return;
	}
	rc = sbx_work(sb, layer_work, layer_done, c);
	if (rc) {
		sbx_fail(&err, SBX_UNAVAILABLE, rc, "cannot queue the sandbox's disk: %s",
		         uv_strerror(rc));
		goto fail;
	}
	return;
fail:
	if (sb) {
		sb->end_status = "failed";
		sbx_to(sb, SBX_STOPPING, NULL, NULL);
	}
	if (c) {
		done(ctx, &err, NULL);
		create_free(c);
	} else {
		done(ctx, &err, NULL);
	}
}
