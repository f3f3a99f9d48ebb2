// SPDX-License-Identifier: MIT
/* POST /sandbox: checking the request, the layer, the VMM; then the setup (sbx_setup.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "huskd.h"
#include "img.h"
#include "sbx_priv.h"
#include "util.h"
#include "vmm_proc.h"

#define DEFAULT_MEM (512ll << 20)
#define MAX_VCPUS 16
/* A forgotten sandbox must not hold a VM forever; timeout.idle "0s" means never. */
#define DEFAULT_IDLE_MS (10 * 60 * 1000)

void sbx_vmm_spec(struct sandbox *sb, const char *restore, struct vmm_spec *spec)
{
	struct huskd *d = sb->d;

	*spec = (struct vmm_spec){.vmm = d->vmm,
	                          .kernel = d->kernel,
	                          .initrd = d->initrd,
	                          .dir = sb->dir,
	                          .disk = sb->layer,
	                          .serial = sb->id + strlen(sb->id) - 20,
	                          .cgroup = sb->cgroup,
	                          .mem_mib = sb->mem_mib,
	                          .vcpus = sb->vcpus,
	                          .restore = restore};
}

/* Reads resources into what the VMM gets; 400 with a message for nonsense. */
static int plan_resources(json_t *res, json_t *rt_req, int64_t *mem, int64_t *millis, int64_t *disk,
                          char *err, size_t errlen)
{
	const char *m = json_string_value(json_object_get(res, "memory"));
	const char *c = json_string_value(json_object_get(res, "cpu"));
	const char *k = json_string_value(json_object_get(res, "disk"));

	*mem = DEFAULT_MEM;
	*millis = 1000;
	*disk = 0;
	if (!m)
		m = json_string_value(json_object_get(rt_req, "memory"));
	if (m && (store_parse_bytes(m, mem) || *mem < (64ll << 20) || *mem > (64ll << 30))) {
		snprintf(err, errlen,
		         "resources.memory '%s': give a size from 64Mi to 64Gi, e.g. 512Mi", m);
		return 400;
	}
	if (*mem < (256ll << 20))
		*mem = 256ll << 20; /* below this a runtime's language does not start reliably */
	if (c && (store_parse_cpu(c, millis) || *millis < 100 || *millis > MAX_VCPUS * 1000)) {
		snprintf(err, errlen,
		         "resources.cpu '%s': give millicores (500m) or cores (2), up to %d", c,
		         MAX_VCPUS);
		return 400;
	}
	if (k && (store_parse_bytes(k, disk) || *disk <= 0 || *disk > (1ll << 40))) {
		snprintf(err, errlen, "resources.disk '%s': give a size such as 2Gi", k);
		return 400;
	}
	return 0;
}

/* Writes the cgroup's cpu.max: the quota of millis millicores, or none (millis 0). */
static int write_cpu_max(const char *dir, int64_t millis)
{
	char file[4200], val[64];
	FILE *f;

	snprintf(file, sizeof(file), "%s/cpu.max", dir);
	if (millis)
		snprintf(val, sizeof(val), "%lld 100000\n", (long long)millis * 100);
	else
		snprintf(val, sizeof(val), "max 100000\n");
	f = fopen(file, "we");
	if (!f || fputs(val, f) < 0 || fclose(f) != 0) {
		if (f)
			fclose(f);
		return -errno;
	}
	return 0;
}

/*
 * While a VMM starts, boots or restores, huskd's own work for it (guest
 * memory filled from a snapshot, decompression) runs in its cgroup too:
 * the quota holds from the moment the sandbox is ready, not before.
 */
void sbx_cpu_limit(struct sandbox *sb, bool limited)
{
	int rc = sb->cgroup ? write_cpu_max(sb->cgroup, limited ? sb->cpu_millis : 0) : 0;

	if (rc)
		huskd_log(sb->id, "cannot %s its cpu limit: %s", limited ? "set" : "lift",
		          strerror(-rc));
}

/* The sandbox's cgroup, its cpu not limited yet; NULL where cgroups are not ours. */
static char *make_cgroup(struct huskd *d, const char *id)
{
	char *dir;

	if (!d->cgroups || asprintf(&dir, "%s/%s", d->cgroup_root, id) < 0)
		return NULL;
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || write_cpu_max(dir, 0)) {
		huskd_log(id, "cannot set up cgroup %s (%s); cpu is not limited", dir,
		          strerror(errno));
		rmdir(dir);
		free(dir);
		return NULL;
	}
	return dir;
}

static int layer_create(const char *path, const char *base, int64_t want, uint64_t *vsize,
                        char *err, size_t errlen)
{
	struct img_create_opts o = {.backing = base, .backing_fmt = IMG_FMT_QCOW2};
	struct img *b;
	char e[256] = "";
	int rc = img_open(&b, base, IMG_FMT_QCOW2, IMG_RDONLY, e, sizeof(e));

	if (rc) {
		snprintf(err, errlen, "the runtime image is unusable: %s", e);
		return 500;
	}
	o.size = img_size(b);
	(void)img_close(b);
	/* The runtime's file system must fit: a smaller disk would cut it off. */
	if (want && (uint64_t)want < o.size) {
		snprintf(err, errlen, "resources.disk must be at least %llu MiB for this runtime",
		         (unsigned long long)(o.size >> 20));
		return 400;
	}
	if (want)
		o.size = ((uint64_t)want + 511) & ~511ull;
	*vsize = o.size;
	rc = img_create(path, &o, e, sizeof(e));
	if (rc) {
		snprintf(err, errlen, "cannot create the sandbox's disk: %s", e);
		return 500;
	}
	return 0;
}

int sbx_create(struct huskd *d, json_t *body, json_t **info, struct sandbox **out, char *err,
               size_t errlen)
{
	json_t *cmd = json_object_get(body, "command"), *env = json_object_get(body, "env");
	json_t *timeout = json_object_get(body, "timeout"), *rt;
	json_t *pub = NULL, *priv = NULL, *files;
	const char *base, *dur, *mode, *warm;
	struct sbx_base b;
	int64_t mem, millis, disk;
	uint64_t exec_ms = 0, vsize = 0, idle_ms = DEFAULT_IDLE_MS, paused_ms = 0;
	char id[STORE_ID_LEN], layer[4096], *cgroup = NULL;
	struct vmm_spec spec;
	struct sandbox *sb;
	int status;

	if (env && !json_is_object(env)) {
		snprintf(err, errlen, "env must be an object of strings");
		return 400;
	}
	if (cmd && !json_is_array(json_object_get(cmd, "exec"))) {
		snprintf(err, errlen, "command.exec must be an array of strings");
		return 400;
	}
	if (timeout && (dur = json_string_value(json_object_get(timeout, "execution"))) &&
	    parse_duration_ms(dur, &exec_ms)) {
		snprintf(err, errlen, "timeout.execution '%s' is not a duration such as 30s or 5m",
		         dur);
		return 400;
	}
	if (timeout && (dur = json_string_value(json_object_get(timeout, "idle"))) &&
	    parse_duration_ms(dur, &idle_ms)) {
		snprintf(err, errlen,
		         "timeout.idle '%s' is not a duration such as 10m or 1h (0s: never)", dur);
		return 400;
	}
	if (timeout && (dur = json_string_value(json_object_get(timeout, "paused"))) &&
	    strcmp(dur, "0") && parse_duration_ms(dur, &paused_ms)) {
		snprintf(err, errlen,
		         "timeout.paused '%s' is not a duration such as 30m or 24h (0s: never)",
		         dur);
		return 400;
	}
	status = sbx_base_find(d, body, &b, err, errlen);
	if (status)
		return status;
	rt = b.rt;
	base = b.path;
	status = plan_resources(json_object_get(body, "resources"),
	                        json_object_get(rt, "requirements"), &mem, &millis, &disk, err,
	                        errlen);
	if (status || store_new_id("sbx_", id)) {
		if (!status)
			snprintf(err, errlen, "out of ids"), status = 500;
		goto out;
	}
	sb = sbx_new(d, id);
	if (!sb) {
		snprintf(err, errlen, "out of memory");
		status = 500;
		goto out;
	}
	mkdir(sb->dir, 0700);
	snprintf(layer, sizeof(layer), "%s/layer.qcow2", sb->dir);
	status = layer_create(layer, base, disk, &vsize, err, errlen);
	if (status) {
		sbx_remove_dir(sb->dir);
		sbx_free(sb);
		goto out;
	}
	mode = cmd ? json_string_value(json_object_get(cmd, "mode")) : NULL;
	sb->oneshot = mode && !strcmp(mode, "oneshot");
	sb->exec_timeout_ms = exec_ms;
	sb->idle_ms = idle_ms;
	sb->paused_ms = paused_ms;
	/* A built snapshot's env first, the request's over it. */
	if (json_is_object(json_object_get(b.snap_priv, "env")))
		json_object_update(sb->env, json_object_get(b.snap_priv, "env"));
	if (env)
		json_object_update(sb->env, env);
	files = json_array();
	if (json_is_array(json_object_get(cmd, "files")))
		json_array_extend(files, json_object_get(cmd, "files"));
	if (json_is_array(json_object_get(body, "files")))
		json_array_extend(files, json_object_get(body, "files"));
	sb->files = files;

	pub = json_pack("{sssss{ssss}s{ssss}s{sssssI}}", "sandboxId", id, "status", "creating",
	                "runtime", "id", json_string_value(json_object_get(rt, "id")), "name",
	                json_string_value(json_object_get(rt, "name")), "org", "id", "org_local",
	                "name", "local", "resources", "memory", "", "cpu", "", "disk",
	                (json_int_t)0);
	json_object_set_new(json_object_get(pub, "resources"), "memory",
	                    json_sprintf("%lldMi", (long long)(mem >> 20)));
	json_object_set_new(json_object_get(pub, "resources"), "cpu",
	                    json_sprintf("%lldm", (long long)millis));
	json_object_set_new(json_object_get(pub, "resources"), "disk",
	                    json_sprintf("%lluMi", (unsigned long long)(vsize >> 20)));
	json_object_set_new(pub, "region", json_string("local"));
	json_object_set_new(pub, "mode", json_string(sb->oneshot ? "oneshot" : "interactive"));
	json_object_set_new(pub, "networkEnabled", json_false());
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
	priv = json_pack("{sssssbsIsIsIsOsIsI}", "dir", sb->dir, "layer", layer, "oneshot",
	                 sb->oneshot, "execTimeoutMs", (json_int_t)exec_ms, "idleMs",
	                 (json_int_t)idle_ms, "pausedMs", (json_int_t)paused_ms, "env", sb->env,
	                 "memMib", (json_int_t)((uint64_t)mem >> 20), "vcpus",
	                 (json_int_t)((millis + 999) / 1000));
	json_object_set_new(priv, "cpuMillis", json_integer(millis));
	sbx_base_apply(sb, &b, pub, priv);
	status = store_sandbox_insert(d->store, pub, priv, info) ? 500 : 0;
	if (status) {
		snprintf(err, errlen, "cannot record the sandbox");
		sbx_remove_dir(sb->dir);
		sbx_free(sb);
		goto out;
	}
	cgroup = make_cgroup(d, id);
	sb->cgroup = cgroup ? strdup(cgroup) : NULL;
	sb->cpu_millis = millis;
	sb->layer = strdup(layer);
	sb->mem_mib = (uint64_t)mem >> 20;
	sb->vcpus = (unsigned)((millis + 999) / 1000);
	/* A snapshot with memory of this shape: resume it rather than boot. */
	warm = sbx_base_memory(&b, sb->mem_mib, sb->vcpus);
	sbx_vmm_spec(sb, warm, &spec);
	if (!sb->layer || sbx_start_vmm(sb, &spec, err, errlen)) {
		huskd_log(id, "%s", err);
		sb->vmm_gone = true;
		sbx_end(sb, "failed", err, NULL);
		status = 500;
		goto out;
	}
	files = sb->files;
	sb->files = NULL;
	if (sbx_setup_start(sb, files, warm != NULL)) {
		snprintf(err, errlen, "cannot start the sandbox's setup");
		sbx_end(sb, "failed", err, NULL);
		status = 500;
		goto out;
	}
	*out = sb;
	huskd_log(id, "created: %s%s%s, %lld MiB, %lldm cpu%s",
	          json_string_value(json_object_get(rt, "name")), b.snap ? " from snapshot " : "",
	          b.snap ? json_string_value(json_object_get(b.snap, "snapshotId")) : "",
	          (long long)(mem >> 20), (long long)millis,
	          warm ? ", resumed from its memory" : "");
out:
	free(cgroup);
	json_decref(pub);
	json_decref(priv);
	sbx_base_free(&b);
	return status;
}
