// SPDX-License-Identifier: MIT
/*
 * POST /sandbox: the request checked, the host asked whether it can take
 * one more, the sandbox's copy-on-write layer made off the loop, its record
 * written, its VMM started (booting, or resuming a snapshot's memory).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_base.h"
#include "sbx_int.h"
#include "sbx_spare.h"
#include "sbx_tmpl.h"

#define DEFAULT_MEM (512ll << 20)
#define MAX_VCPUS 16
/* A forgotten sandbox must not hold a VM forever; timeout.idle "0s" means never. */
#define DEFAULT_IDLE_MS (10 * 60 * 1000)
/* What a booting guest touches, and what the host keeps for itself, in MiB. */

struct create {
	sbx_done_fn done;
	void *ctx;
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

/* Reads resources into what the VMM gets. */
static int plan_resources(json_t *res, json_t *rt_req, int64_t *mem, int64_t *millis, int64_t *disk,
                          struct sbx_err *err)
{
	const char *m = json_string_value(json_object_get(res, "memory"));
	const char *c = json_string_value(json_object_get(res, "cpu"));
	const char *k = json_string_value(json_object_get(res, "disk"));

	*mem = DEFAULT_MEM;
	*millis = 1000;
	*disk = 0;
	if (!m)
		m = json_string_value(json_object_get(rt_req, "memory"));
	if (m && (store_parse_bytes(m, mem) || *mem < (64ll << 20) || *mem > (64ll << 30)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.memory '%s': give a size from 64Mi to 64Gi, e.g. 512Mi",
		                m);
	if (*mem < (256ll << 20))
		*mem = 256ll << 20; /* below this a runtime's language does not start reliably */
	if (c && (store_parse_cpu(c, millis) || *millis < 100 || *millis > MAX_VCPUS * 1000))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.cpu '%s': give millicores (500m) or cores (2), up to %d",
		                c, MAX_VCPUS);
	if (k && (store_parse_bytes(k, disk) || *disk <= 0 || *disk > (1ll << 40)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.disk '%s': give a size such as 2Gi", k);
	return 0;
}

/*
 * network: {enabled, port, allPorts, urlToken, allow, deny, egressBytesPerSec}; a network this
 * host cannot give is refused here, not at boot.
 */
static int plan_network(struct sbx_mgr *m, json_t *body, struct sandbox *sb, struct sbx_err *err)
{
	json_t *net = json_object_get(body, "network");
	json_t *on = json_object_get(net, "enabled"), *port = json_object_get(net, "port");
	json_t *rate = json_object_get(net, "egressBytesPerSec");
	json_t *token = json_object_get(net, "urlToken"), *all = json_object_get(net, "allPorts");

	sb->egress_rate = m->cfg.egress_rate;
	if (!net || json_is_null(net))
		return 0;
	if (!json_is_object(net) || (on && !json_is_boolean(on)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network must be an object such as {\"enabled\": true}");
	if (port && !json_is_null(port) &&
	    (!json_is_integer(port) || json_integer_value(port) < 1024 ||
	     json_integer_value(port) > 65535))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.port must be a number from 1024 to 65535");
	sb->port = json_is_integer(port) ? (unsigned)json_integer_value(port) : 0;
	if (all && !json_is_boolean(all))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.allPorts must be true or false (true: every guest TCP "
		                "port is served at the sandbox's url forms)");
	sb->all_ports = json_is_true(all);
	if (token &&
	    (!json_is_boolean(token) || (json_is_true(token) && !sb->port && !sb->all_ports)))
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"network.urlToken must be true or false, and true needs network.port "
			"or network.allPorts (it guards their urls)");
	if (rate && (!json_is_integer(rate) || json_integer_value(rate) < 1000))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.egressBytesPerSec must be a number of bytes per second, "
		                "1000 or more");
	/* A sandbox may ask for less than huskd's limit, never more. */
	if (rate && (!sb->egress_rate || (uint64_t)json_integer_value(rate) < sb->egress_rate))
		sb->egress_rate = (uint64_t)json_integer_value(rate);
	sb->net = json_is_true(on);
	if ((json_object_get(net, "allow") || json_object_get(net, "deny")) && !sb->net)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.allow and network.deny need network.enabled: true");
	if (sb->net &&
	    sbx_net_policy(sb, json_object_get(net, "allow"), json_object_get(net, "deny"), err))
		return -EINVAL;
	if (sbx_has_nic(sb) && (!m->cfg.jail || !sbx_net(m)))
		return sbx_fail(err, SBX_UNAVAILABLE, -EOPNOTSUPP,
		                "%s: this huskd gives sandboxes no network (%s)",
		                sb->net    ? "network.enabled"
		                : sb->port ? "network.port"
		                           : "network.allPorts",
		                m->cfg.jail ? m->net_why : "husk-jail was not found beside huskd");
	return 0;
}

/* Timeouts and the other fields the sandbox keeps; the request's shape checked. */
static int plan_limits(json_t *body, struct sandbox *sb, struct sbx_err *err)
{
	json_t *cmd = json_object_get(body, "command"), *env = json_object_get(body, "env");
	json_t *timeout = json_object_get(body, "timeout");
	const char *dur, *mode;

	if (env && !json_is_object(env))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "env must be an object of strings");
	if (cmd && !json_is_array(json_object_get(cmd, "exec")))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "command.exec must be an array of strings");
	sb->idle_ms = DEFAULT_IDLE_MS;
	if (timeout && (dur = json_string_value(json_object_get(timeout, "execution"))) &&
	    parse_duration_ms(dur, &sb->exec_timeout_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.execution '%s' is not a duration such as 30s or 5m", dur);
	if (timeout && (dur = json_string_value(json_object_get(timeout, "idle"))) &&
	    parse_duration_ms(dur, &sb->idle_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.idle '%s' is not a duration such as 10m or 1h (0s: never)",
		                dur);
	if (timeout && (dur = json_string_value(json_object_get(timeout, "paused"))) &&
	    parse_duration_ms(dur, &sb->paused_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.paused '%s' is not a duration such as 30m or 24h (0s: "
		                "never)",
		                dur);
	mode = cmd ? json_string_value(json_object_get(cmd, "mode")) : NULL;
	sb->oneshot = mode && !strcmp(mode, "oneshot");
	if (env)
		json_object_update(sb->env, env);
	sb->files = json_array();
	if (json_is_array(json_object_get(cmd, "files")))
		json_array_extend(sb->files, json_object_get(cmd, "files"));
	if (json_is_array(json_object_get(body, "files")))
		json_array_extend(sb->files, json_object_get(body, "files"));
	if (!json_array_size(sb->files)) {
		json_decref(sb->files);
		sb->files = NULL;
	}
	return 0;
}

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
	sbx_base_free(&c->base);
	json_decref(c->pub);
	json_decref(c->priv);
	free(c);
}

/* Creation failed before the sandbox was up: it goes, and the request says why. */
static void create_fail(struct sandbox *sb, struct create *c, const struct sbx_err *err)
{
	c->done(c->ctx, err, NULL);
	sb->end_status = "failed";
	if (sb->stored)
		log_error(sb->id, "failed: %s", err->msg);
	sbx_to(sb, SBX_STOPPING, err->msg, NULL);
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
	json_object_set_new(json_object_get(c->pub, "resources"), "disk",
	                    json_sprintf("%lluMi", (unsigned long long)(c->vsize >> 20)));
	rc = store_sandbox_insert(sb->m->store, c->pub, c->priv, &info);
	if (rc) {
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot record the sandbox: %s", strerror(-rc));
		create_fail(sb, c, &err);
		return;
	}
	sb->stored = true;
	t_stored = uv_hrtime();
	rc = sbx_vmm_start(sb, c->warm, c->mem_file, c->warm_key, e, sizeof(e));
	if (rc) {
		json_decref(info);
		sbx_fail(&err, SBX_INTERNAL, rc, "%s", e);
		create_fail(sb, c, &err);
		return;
	}
	sbx_to(sb, c->warm ? SBX_RESTORING : SBX_BOOTING, NULL, NULL);
	/* The next create like this one finds its layer made. */
	if (!c->base.snap)
		sbx_spare_want(sb, c->base.path, c->disk);
	/* Where a create's time goes before its VMM runs (ms). */
	log_debug(sb->id,
	          "create took %.1f ms: to a worker %.1f, base read %.1f, layer %.1f%s, back on "
	          "the loop %.1f, record %.1f, VMM started %.1f",
	          (double)(uv_hrtime() - c->t_req) / 1e6, (double)(c->t_work - c->t_req) / 1e6,
	          (double)(c->t_base - c->t_work) / 1e6, (double)(c->t_layer - c->t_base) / 1e6,
	          c->spare ? " (a spare)" : "", (double)(t_done - c->t_layer) / 1e6,
	          (double)(t_stored - t_done) / 1e6, (double)(uv_hrtime() - t_stored) / 1e6);
	log_info(sb->id, "created: %s%s%s, %llu MiB, %lldm cpu%s",
	         json_string_value(json_object_get(c->base.rt, "name")),
	         c->base.snap ? " from snapshot " : "",
	         c->base.snap ? json_string_value(json_object_get(c->base.snap, "snapshotId")) : "",
	         (unsigned long long)sb->mem_mib, (long long)sb->cpu_millis,
	         c->tmpl       ? ", restored from its runtime's template"
	         : c->mem_file ? ", resumed from its memory file"
	         : c->warm     ? ", resumed from its memory"
	                       : "");
	reply.data = info;
	c->done(c->ctx, NULL, &reply);
	json_decref(info);
	create_free(c);
}

/* The SandboxInfo to record: what the request asked for, as the sandbox gets it. */
static json_t *public_info(json_t *body, struct sandbox *sb, json_t *rt, int64_t mem)
{
	json_t *cmd = json_object_get(body, "command"), *timeout = json_object_get(body, "timeout");
	json_t *pub;

	json_t *org = json_object_get(body, "org");

	pub = json_pack(
		"{sssss{ssss}s{ssss}s{sosos{}}sssssb}", "sandboxId", sb->id, "status", "creating",
		"runtime", "id", json_string_value(json_object_get(rt, "id")), "name",
		json_string_value(json_object_get(rt, "name")), "org", "id", sbx_info_org(body),
		"name", json_string_value(json_object_get(org, "name")) ?: STORE_DEFAULT_ORG_NAME,
		"resources", "memory", json_sprintf("%lldMi", (long long)(mem >> 20)), "cpu",
		json_sprintf("%lldm", (long long)sb->cpu_millis), "disk", "region", "local", "mode",
		sb->oneshot ? "oneshot" : "interactive", "networkEnabled", sb->net);
	if (!pub)
		return NULL;
	if (sb->port)
		json_object_set_new(pub, "networkPort", json_integer(sb->port));
	/* The routes give and check the token (an HMAC of the id); the record says it is needed. */
	if (sb->all_ports)
		json_object_set_new(pub, "networkAllPorts", json_true());
	if ((sb->port || sb->all_ports) &&
	    json_is_true(json_object_get(json_object_get(body, "network"), "urlToken")))
		json_object_set_new(pub, "urlTokenRequired", json_true());
	for (const char *const *k =
	             (const char *const[]){"name", "description", "metadata", "projectId",
	                                   "dependencies", "packages", NULL};
	     *k; k++)
		if (json_object_get(body, *k))
			json_object_set(pub, *k, json_object_get(body, *k));
	if (timeout)
		json_object_set(pub, "timeout", timeout);
	if (cmd)
		json_object_set_new(pub, "command",
		                    json_pack("{sOss}", "exec", json_object_get(cmd, "exec"),
		                              "mode", sb->oneshot ? "oneshot" : "interactive"));
	return pub;
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

static void create(struct sbx_mgr *m, json_t *body, bool maker, sbx_done_fn done, void *ctx);

void sbx_create(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx)
{
	create(m, body, false, done, ctx);
}

void sbx_create_maker(struct sbx_mgr *m, json_t *body, sbx_done_fn done, void *ctx)
{
	create(m, body, true, done, ctx);
}

static void create(struct sbx_mgr *m, json_t *body, bool maker, sbx_done_fn done, void *ctx)
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
	c->done = done;
	c->ctx = ctx;
	c->t_req = uv_hrtime();
	rc = sbx_base_find(m, body, &c->base, &err);
	if (!rc)
		rc = plan_resources(json_object_get(body, "resources"),
		                    json_object_get(c->base.rt, "requirements"), &mem, &millis,
		                    &c->disk, &err);
	if (!rc)
		rc = sbx_admit(m, (uint64_t)mem >> 20, (unsigned)((millis + 999) / 1000), &err);
	if (rc)
		goto fail;
	sb = sbx_new(m, id);
	if (!sb) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		goto fail;
	}
	snprintf(layer, sizeof(layer), "%s/layer.qcow2", sb->dir);
	sb->layer = strdup(layer);
	sb->mem_mib = (uint64_t)mem >> 20;
	sb->cpu_millis = millis;
	sb->vcpus = (unsigned)((millis + 999) / 1000);
	sb->hidden = maker;
	snprintf(sb->org, sizeof(sb->org), "%s", sbx_info_org(body));
	/* An imported image's env first, a built snapshot's over it, the request's over both. */
	if (json_is_object(json_object_get(c->base.rt, "defaults"))) {
		sb->image = json_deep_copy(json_object_get(c->base.rt, "defaults"));
		if (json_is_object(json_object_get(sb->image, "env")))
			json_object_update(sb->env, json_object_get(sb->image, "env"));
	}
	if (json_is_object(json_object_get(c->base.snap_priv, "env")))
		json_object_update(sb->env, json_object_get(c->base.snap_priv, "env"));
	rc = plan_limits(body, sb, &err);
	if (!rc)
		rc = plan_network(m, body, sb, &err);
	if (!rc)
		rc = sbx_deps_plan(sb, body, &err);
	if (rc)
		goto fail;
	c->pub = public_info(body, sb, c->base.rt, mem);
	c->priv = json_pack("{sssssbsIsIsIsOsIsIsI}", "dir", sb->dir, "layer", layer, "oneshot",
	                    sb->oneshot, "execTimeoutMs", (json_int_t)sb->exec_timeout_ms, "idleMs",
	                    (json_int_t)sb->idle_ms, "pausedMs", (json_int_t)sb->paused_ms, "env",
	                    sb->env, "memMib", (json_int_t)sb->mem_mib, "vcpus",
	                    (json_int_t)sb->vcpus, "cpuMillis", (json_int_t)millis);
	if (c->priv)
		json_object_set_new(c->priv, "orgId", json_string(sb->org));
	if (c->priv && sb->net)
		json_object_set_new(c->priv, "network", json_true());
	if (c->pub && c->priv && maker) {
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
	if (!maker)
		use_template(m, sb, c);
	sbx_base_apply(sb, &c->base, c->pub, c->priv);
	if (!maker && !c->base.snap)
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
