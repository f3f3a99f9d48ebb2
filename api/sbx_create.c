// SPDX-License-Identifier: MIT
/* POST /sandbox: checking the request, the layer, the VMM, and the setup task. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "huskd.h"
#include "img.h"
#include "sbx_priv.h"
#include "util.h"
#include "vmm_proc.h"

/* Under nested emulation a guest takes seconds to boot; natively well under one. */
#define READY_TIMEOUT_MS 180000
#define DEFAULT_MEM (512ll << 20)
#define MAX_VCPUS 16
/* A forgotten sandbox must not hold a VM forever; timeout.idle "0s" means never. */
#define DEFAULT_IDLE_MS (10 * 60 * 1000)

struct setup {
	struct sandbox *sb;
	char vsock[4096];
	json_t *env, *files;
	bool restored; /* started from a snapshot's memory */
	int rc;
	char err[256];
};

int sbx_write_files(struct agent_client *c, json_t *files, char *err, size_t errlen)
{
	size_t i;
	json_t *f, *out = NULL;

	json_array_foreach(files, i, f)
	{
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *b64 = json_string_value(json_object_get(f, "content"));
		size_t len = 0;
		unsigned char *data = b64 ? base64_decode(b64, &len) : NULL;
		char full[4096];
		int fd, rc;

		if (!path || !data) {
			free(data);
			snprintf(err, errlen, "files[%zu] needs a path and base64 content", i);
			return -EINVAL;
		}
		workspace_path(WORKSPACE, path, full, sizeof(full));
		fd = memfd_create("husk-file", MFD_CLOEXEC);
		rc = fd < 0 || write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0
		             ? -errno
		             : agent_put(c, full, fd, -1, &out);
		free(data);
		if (fd >= 0)
			close(fd);
		json_decref(out);
		out = NULL;
		if (rc) {
			snprintf(err, errlen, "cannot write %s: %s", full,
			         rc > 0 ? "refused by the sandbox" : strerror(-rc));
			return rc > 0 ? -EIO : rc;
		}
	}
	return 0;
}

/* On its own thread: waits for the agent, then prepares the sandbox. */
static void setup_work(void *arg)
{
	struct setup *s = arg;
	struct agent_client *c = NULL;
	struct timespec tick = {0, 20 * 1000 * 1000};
	json_t *req, *out = NULL;
	int rc = -ETIMEDOUT;

	for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 20) {
		rc = agent_client_connect_vsock(s->vsock, AGENT_VSOCK_PORT, &c);
		if (!rc)
			break;
		nanosleep(&tick, NULL);
	}
	if (rc) {
		s->rc = rc;
		snprintf(s->err, sizeof(s->err), "the sandbox's agent did not answer within %d s",
		         READY_TIMEOUT_MS / 1000);
		return;
	}
	/* Resumed from a snapshot's memory: its clock and random state are the snapshot's. */
	if (s->restored && agent_resumed(c))
		huskd_log(s->sb->id, "the resumed guest's clock was not set");
	req = json_pack("{sssssb}", "op", "file.mkdir", "path", WORKSPACE, "parents", 1);
	rc = agent_call(c, req, &out);
	json_decref(req);
	json_decref(out);
	out = NULL;
	if (!rc && json_object_size(s->env)) {
		req = json_pack("{sssO}", "op", "env.set", "vars", s->env);
		rc = agent_call(c, req, &out);
		json_decref(req);
		json_decref(out);
	}
	if (rc) {
		snprintf(s->err, sizeof(s->err), "cannot prepare the sandbox (workspace, env): %s",
		         rc > 0 ? "refused by the agent" : strerror(-rc));
		s->rc = rc > 0 ? -EIO : rc;
	} else if (s->files) {
		s->rc = sbx_write_files(c, s->files, s->err, sizeof(s->err));
	}
	agent_client_close(c);
}

void sbx_ready_fail(struct sandbox *sb)
{
	struct ready_cb *w = sb->waiting;

	sb->waiting = NULL;
	while (w) {
		struct ready_cb *next = w->next;
		w->fn(sb, false, w->arg);
		free(w);
		w = next;
	}
}

static void setup_done(void *arg)
{
	struct setup *s = arg;
	struct sandbox *sb = s->sb;

	sb->setup_running = false;
	json_decref(s->env);
	json_decref(s->files);
	if (sb->ending) {
		free(s);
		sbx_maybe_free(sb);
		return;
	}
	if (s->rc) {
		huskd_log(sb->id, "setup failed: %s", s->err);
		sbx_end(sb, "failed", s->err, NULL);
		free(s);
		return;
	}
	free(s);
	sb->ready = true;
	/*
	 * A oneshot's command starts from the waiting list and sets "running"
	 * itself: it must never look idle before its command ran (API.md §7.1).
	 */
	if (!sb->oneshot || !sb->current)
		sbx_transition(sb->d, sb->id, "idle", NULL, NULL);
	sbx_ready_run(sb);
}

void sbx_ready_run(struct sandbox *sb)
{
	struct ready_cb *w = sb->waiting;

	sb->waiting = NULL;
	while (w) {
		struct ready_cb *next = w->next;
		w->fn(sb, true, w->arg);
		free(w);
		w = next;
	}
}

void sbx_when_ready(struct sandbox *sb, void (*fn)(struct sandbox *sb, bool ready, void *arg),
                    void *arg)
{
	struct ready_cb *w, **pp;

	if (sb->ready || sb->ending) {
		fn(sb, sb->ready && !sb->ending, arg);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		fn(sb, false, arg);
		return;
	}
	w->fn = fn;
	w->arg = arg;
	for (pp = &sb->waiting; *pp; pp = &(*pp)->next)
		;
	*pp = w;
	if (!strcmp(sb->status, "paused"))
		sbx_wake(sb);
}

int sbx_boot(struct sandbox *sb, char *err, size_t errlen)
{
	struct vmm_spec spec;
	struct setup *s;

	if (sb->cgroup)
		mkdir(sb->cgroup, 0755);
	sbx_vmm_spec(sb, NULL, &spec);
	if (sbx_start_vmm(sb, &spec, err, errlen))
		return -EIO;
	sb->vmm_gone = false;
	s = calloc(1, sizeof(*s));
	if (s) {
		s->sb = sb;
		snprintf(s->vsock, sizeof(s->vsock), "%s", sb->vsock);
		s->env = json_incref(sb->env);
	}
	if (!s || task_run(sb->d->tasks, setup_work, setup_done, s)) {
		if (s)
			json_decref(s->env);
		free(s);
		snprintf(err, errlen, "cannot start the sandbox's setup");
		return -ENOMEM;
	}
	sb->setup_running = true;
	return 0;
}

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

/* The sandbox's cgroup, with cpu.max from its millicores; NULL where cgroups are not ours. */
static char *make_cgroup(struct huskd *d, const char *id, int64_t millis)
{
	char *dir, *file, val[64];
	FILE *f;

	if (!d->cgroups || asprintf(&dir, "%s/%s", d->cgroup_root, id) < 0)
		return NULL;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		goto fail;
	if (asprintf(&file, "%s/cpu.max", dir) < 0)
		goto fail;
	f = fopen(file, "we");
	free(file);
	snprintf(val, sizeof(val), "%lld 100000\n", (long long)millis * 100);
	if (!f || fputs(val, f) < 0 || fclose(f) != 0) {
		if (f)
			fclose(f);
		goto fail;
	}
	return dir;
fail:
	huskd_log(id, "cannot set up cgroup %s (%s); cpu is not limited", dir, strerror(errno));
	rmdir(dir);
	free(dir);
	return NULL;
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
	struct setup *s;
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
	sbx_base_apply(sb, &b, pub, priv);
	status = store_sandbox_insert(d->store, pub, priv, info) ? 500 : 0;
	if (status) {
		snprintf(err, errlen, "cannot record the sandbox");
		sbx_remove_dir(sb->dir);
		sbx_free(sb);
		goto out;
	}
	cgroup = make_cgroup(d, id, millis);
	sb->cgroup = cgroup ? strdup(cgroup) : NULL;
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
	s = calloc(1, sizeof(*s));
	if (s) {
		s->sb = sb;
		snprintf(s->vsock, sizeof(s->vsock), "%s", sb->vsock);
		s->env = json_incref(sb->env);
		s->files = sb->files;
		s->restored = warm != NULL;
		sb->files = NULL;
	}
	if (!s || task_run(d->tasks, setup_work, setup_done, s)) {
		free(s);
		snprintf(err, errlen, "cannot start the sandbox's setup");
		sbx_end(sb, "failed", err, NULL);
		status = 500;
		goto out;
	}
	sb->setup_running = true;
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
