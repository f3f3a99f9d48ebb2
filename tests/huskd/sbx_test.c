// SPDX-License-Identifier: MIT
/* The harness of the manager's tests: fixtures, waiting on the loop, PASS/FAIL lines. */
#include "sbx_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "img.h"
#include "keystore.h"
#include "outbuf.h"
#include "vmm_proc.h"

struct t_env T;
int t_failed, t_passed;

bool t_check(const char *name, bool cond, const char *fmt, ...)
{
	va_list ap;

	if (cond) {
		printf("PASS manager/%s\n", name);
		t_passed++;
	} else {
		printf("FAIL manager/%s: ", name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		t_failed++;
	}
	fflush(stdout);
	return cond;
}

static void changed(void *arg, const char *id)
{
	(void)arg;
	(void)id;
	T.changes++;
}

void t_open(void)
{
	char path[512], err[256];

	snprintf(path, sizeof(path), "%s/state/huskd.db", T.root);
	if (store_open(path, &T.store, err, sizeof(err))) {
		fprintf(stderr, "sbx-test: store: %s\n", err);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/images", T.root);
	json_t *catalog =
		json_pack("{s[{sssssss{ss}}]}", "runtimes", "id", "srt_test", "name", "base:latest",
	                  "description", "a test base", "image", "file", "base.qcow2");
	if (store_runtimes_upsert(T.store, catalog, path, err, sizeof(err))) {
		fprintf(stderr, "sbx-test: catalog: %s\n", err);
		exit(1);
	}
	json_decref(catalog);
	if (sbx_mgr_open(T.loop, T.store, &T.cfg, &T.m)) {
		fprintf(stderr, "sbx-test: cannot open the manager\n");
		exit(1);
	}
	sbx_mgr_on_change(T.m, changed, NULL);
}

struct guard {
	bool fired;
};

static void guard_fired(uv_timer_t *t)
{
	((struct guard *)t->data)->fired = true;
}

bool t_close(void)
{
	struct guard g = {0};
	uv_timer_t timer;
	bool drained;

	sbx_mgr_close(T.m);
	/* Drained: every handle the manager had is closed (the unreferenced guard bounds a hang).
	 */
	uv_timer_init(T.loop, &timer);
	timer.data = &g;
	uv_timer_start(&timer, guard_fired, T_WAIT_MS, 0);
	uv_unref((uv_handle_t *)&timer);
	while (uv_run(T.loop, UV_RUN_ONCE) && !g.fired)
		;
	drained = !g.fired;
	uv_close((uv_handle_t *)&timer, NULL);
	if (!drained)
		t_kill_all();
	uv_run(T.loop, UV_RUN_DEFAULT);
	sbx_mgr_free(T.m);
	T.m = NULL;
	store_close(T.store);
	T.store = NULL;
	return drained;
}

void t_kill_all(void)
{
	char cmd[512];

	/* The fakes run in sessions of their own, named by our state folder. */
	snprintf(cmd, sizeof(cmd), "pkill -KILL -f -- '--vsock %s/' 2>/dev/null", T.root);
	if (system(cmd) < 0)
		perror("pkill");
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

bool t_wait(bool (*pred)(void *arg), void *arg, unsigned ms)
{
	struct guard g = {0};
	uv_timer_t timer;
	bool ok;

	uv_timer_init(T.loop, &timer);
	timer.data = &g;
	uv_timer_start(&timer, guard_fired, ms, 0);
	while (!(ok = pred(arg)) && !g.fired)
		uv_run(T.loop, UV_RUN_ONCE);
	uv_timer_stop(&timer);
	uv_close((uv_handle_t *)&timer, NULL);
	uv_run(T.loop, UV_RUN_NOWAIT);
	return ok;
}

void t_spin(void)
{
	uv_run(T.loop, UV_RUN_NOWAIT);
}

void t_done_cb(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct t_done *d = ctx;

	d->done = true;
	d->ok = !err;
	if (err) {
		d->fault = err->fault;
		snprintf(d->msg, sizeof(d->msg), "%s", err->msg);
	}
	json_decref(d->data);
	d->data = reply && reply->data ? json_deep_copy(reply->data) : NULL;
	if (reply && reply->has_fd) {
		ssize_t n = pread(reply->fd, d->bytes, sizeof(d->bytes) - 1, 0);

		d->bytes[n > 0 ? n : 0] = '\0';
		d->len = reply->len;
		if (reply->live) {
			outbuf_ref(reply->live);
			d->live = reply->live;
			d->live_fd = fcntl(reply->fd, F_DUPFD_CLOEXEC, 0);
		}
	}
}

static bool is_done(void *arg)
{
	struct t_done *d = arg;

	return d->done && (!d->live || outbuf_closed(d->live));
}

bool t_wait_done(struct t_done *d)
{
	bool ok = t_wait(is_done, d, T_WAIT_MS);
	ssize_t n;

	/* A read answered as it came: what its file holds at the end. */
	if (ok && d->live) {
		n = pread(d->live_fd, d->bytes, sizeof(d->bytes) - 1, 0);
		d->bytes[n > 0 ? n : 0] = '\0';
		d->len = (size_t)outbuf_len(d->live);
		d->failed = outbuf_failed(d->live);
	}
	return ok;
}

void t_done_reset(struct t_done *d)
{
	if (d->live) {
		outbuf_unref(d->live);
		close(d->live_fd);
	}
	json_decref(d->data);
	*d = (struct t_done){0};
}

const char *t_create(const char *body, const char *mode, char *err, size_t errlen)
{
	static char id[STORE_ID_LEN];
	struct t_done d = {0};
	json_t *b = json_loads(body, 0, NULL);

	if (mode)
		setenv("FAKE_VMM", mode, 1);
	else
		unsetenv("FAKE_VMM");
	sbx_create(T.m, b, t_done_cb, &d);
	json_decref(b);
	if (!t_wait_done(&d) || !d.ok) {
		snprintf(err, errlen, "%s", d.done ? d.msg : "create never answered");
		t_done_reset(&d);
		unsetenv("FAKE_VMM");
		return NULL;
	}
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(d.data, "sandboxId")));
	t_done_reset(&d);
	unsetenv("FAKE_VMM");
	return id;
}

struct sandbox *t_sb(const char *id)
{
	return T.m ? sbx_find(T.m, id) : NULL;
}

void t_destroy(const char *id)
{
	struct sbx_err err;

	if (sbx_destroy(T.m, id, &err))
		fprintf(stderr, "sbx-test: cannot destroy %s: %s\n", id, err.msg);
	t_wait_state(id, SBX_GONE);
}

enum sbx_state t_state(const char *id)
{
	struct sandbox *sb = t_sb(id);

	return sb ? sb->state : SBX_GONE;
}

struct want_state {
	const char *id;
	enum sbx_state s;
};

static bool in_state(void *arg)
{
	struct want_state *w = arg;

	return t_state(w->id) == w->s;
}

bool t_wait_state(const char *id, enum sbx_state s)
{
	struct want_state w = {id, s};

	return t_wait(in_state, &w, T_WAIT_MS);
}

const char *t_status(const char *id, char *buf, size_t len)
{
	json_t *info = NULL;

	buf[0] = '\0';
	if (store_sandbox_get(T.store, id, &info, NULL) == 0)
		snprintf(buf, len, "%s", json_string_value(json_object_get(info, "status")));
	json_decref(info);
	return buf;
}

pid_t t_vmm_pid(const char *id)
{
	struct sandbox *sb = t_sb(id);

	return sb && sb->vmm ? vmm_proc_pid(sb->vmm) : 0;
}

bool t_ended(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;

	waitpid(pid, NULL, WNOHANG);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* A zombie another process has not reaped yet has ended too. */
	return !p || p[2] == 'Z' || p[2] == 'X';
}

const char *t_exec_start(const char *id, const char *argv, uint64_t timeout_ms, char *err,
                         size_t errlen)
{
	static char eid[STORE_ID_LEN];
	struct sbx_exec_req req = {.base = "http://test", .timeout_ms = timeout_ms};
	struct sbx_err e;
	json_t *exec = NULL;
	bool resumed;

	req.argv = json_loads(argv, 0, NULL);
	if (sbx_exec_start(T.m, id, &req, &exec, &resumed, &e)) {
		snprintf(err, errlen, "%s", e.msg);
		json_decref(req.argv);
		return NULL;
	}
	snprintf(eid, sizeof(eid), "%s", json_string_value(json_object_get(exec, "executionId")));
	json_decref(exec);
	json_decref(req.argv);
	return eid;
}

static bool exec_ended(void *arg)
{
	json_t *rec = NULL;
	bool terminal = false;

	if (sbx_execution_get(T.m, arg, &rec, &terminal) == 0)
		json_decref(rec);
	return terminal;
}

json_t *t_exec_wait(const char *exec_id)
{
	json_t *rec = NULL;
	bool terminal;

	if (!t_wait(exec_ended, (void *)exec_id, T_WAIT_MS))
		return NULL;
	if (sbx_execution_get(T.m, exec_id, &rec, &terminal))
		return NULL;
	return rec;
}

json_t *t_exec(const char *id, const char *argv)
{
	char err[512];
	const char *eid = t_exec_start(id, argv, 0, err, sizeof(err));

	return eid ? t_exec_wait(eid) : NULL;
}

/* A folder of our own, a base image and stand-ins for the kernel files. */
static void setup(const char *fake)
{
	struct img_create_opts o = {.size = 64ull << 20};
	char path[512], err[256];
	FILE *f;

	snprintf(T.root, sizeof(T.root), "/tmp/sbx-test.XXXXXX");
	if (!mkdtemp(T.root)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/images", T.root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/state", T.root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/images/base.qcow2", T.root);
	if (img_create(path, &o, err, sizeof(err))) {
		fprintf(stderr, "sbx-test: base image: %s\n", err);
		exit(1);
	}
	for (const char *const *k = (const char *const[]){"bzImage", "initramfs.cpio", NULL}; *k;
	     k++) {
		snprintf(path, sizeof(path), "%s/images/%s", T.root, *k);
		f = fopen(path, "w");
		if (f)
			fclose(f);
	}
	T.loop = uv_default_loop();
	T.cfg = (struct sbx_config){.output_limit = 1 << 20, .ready_ms = 20000};
	snprintf(path, sizeof(path), "%s/state", T.root);
	T.cfg.state = strdup(path);
	T.cfg.vmm = fake;
	snprintf(path, sizeof(path), "%s/images/bzImage", T.root);
	T.cfg.kernel = strdup(path);
	snprintf(path, sizeof(path), "%s/images/initramfs.cpio", T.root);
	T.cfg.initrd = strdup(path);
	/* Pauses seal, as huskd's default: every test here runs through the keys. */
	snprintf(path, sizeof(path), "%s/state", T.root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/state/keys", T.root);
	if (keystore_open(path, NULL, &T.cfg.keys)) {
		fprintf(stderr, "sbx-test: cannot open a key store in %s\n", path);
		exit(1);
	}
	T.cfg.seal = true;
}

int main(int argc, char **argv)
{
	char cmd[600];

	if (argc != 2) {
		fprintf(stderr, "usage: sbx-test FAKE-VMM\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Each fake VMM refuses to run with a descriptor of ours beyond stdio and its keys'. */
	setenv("FAKE_VMM_FDS", "1", 1);
	huskd_log_set_level(getenv("SBX_TEST_DEBUG") ? HLOG_DEBUG : HLOG_ERROR);
	setup(argv[1]);
	t_open();
	t_table();
	t_lifecycle();
	t_executions();
	t_failures();
	t_adoption();
	t_reaping();
	t_admission();
	t_cgroup_io();
	t_templates();
	t_sealing();
	t_disk_keys();
	t_spares();
	t_pool();
	t_ahead();
	if (T.m)
		t_close();
	t_kill_all();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T.root);
	if (!t_failed && system(cmd) < 0)
		perror("rm");
	printf("manager: %d passed, %d failed\n", t_passed, t_failed);
	free((char *)T.cfg.state);
	free((char *)T.cfg.kernel);
	free((char *)T.cfg.initrd);
	keystore_free(T.cfg.keys);
	return t_failed ? 1 : 0;
}

bool t_file_has(const char *path, const char *text)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n = -1;
	bool found = false;

	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
		found = memmem(buf, (size_t)n, text, strlen(text)) != NULL;
	free(buf);
	if (f)
		fclose(f);
	return found;
}

bool t_in_store_files(const char *text)
{
	char path[600];

	for (const char *const *f = (const char *const[]){"huskd.db", "huskd.db-wal", NULL}; *f;
	     f++) {
		snprintf(path, sizeof(path), "%s/state/%s", T.root, *f);
		if (t_file_has(path, text))
			return true;
	}
	return false;
}

bool t_pause(const char *id)
{
	struct t_done d = {0};
	bool ok;

	sbx_pause(T.m, id, t_done_cb, &d);
	ok = t_wait_done(&d) && d.ok && t_state(id) == SBX_PAUSED;
	t_done_reset(&d);
	return ok;
}

void t_snapshot(const char *id, const char *body, char sid[STORE_ID_LEN])
{
	json_t *snap = json_loads(body, 0, NULL);
	struct t_done d = {0};

	sid[0] = '\0';
	sbx_snap_create(T.m, id, snap, t_done_cb, &d);
	if (t_wait_done(&d) && d.ok)
		snprintf(sid, STORE_ID_LEN, "%s",
		         json_string_value(json_object_get(d.data, "snapshotId")));
	t_done_reset(&d);
	json_decref(snap);
}

/* The fake VMM's last "disk keys" line in id's vmm.log: how its last start got them. */
const char *t_keys_given(const char *id, char *out, size_t len)
{
	char path[4200], line[300];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/vmm.log", t_sb(id) ? t_sb(id)->dir : "/nonexistent");
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "fake-vmm: disk keys: "))
			snprintf(out, len, "%.*s", (int)strcspn(line + 21, "\n"), line + 21);
	if (f)
		fclose(f);
	return out;
}
