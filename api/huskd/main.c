// SPDX-License-Identifier: MIT
/*
 * huskd: the sandbox service. The REST API (api/API.md: routes/) on
 * 127.0.0.1:PORT and a Unix socket, the sandbox manager (sandbox/) with its
 * state in SQLite (store/), one husk-vmm per sandbox. VMMs outlive a huskd
 * restart and are adopted again.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "huskd_log.h"
#include "huskd_opts.h"
#include "keystore.h"
#include "routes.h"
#include "sbx.h"
#include "store.h"
#include "tenant.h"

struct huskd {
	uv_loop_t *loop;
	struct store *store;
	struct sbx_mgr *mgr;
	struct routes *routes;
	struct http_server *http;
	char **keys;
	struct tenants *tenants;
	struct keystore *keystore;
	uv_signal_t sigint, sigterm;
	uv_timer_t stop_watch; /* after a signal: what the loop still waits for */
	bool stopping;
};

/* Keys from HUSK_API_KEY (comma-separated), else the state folder's api-keys file, made once. */
static int load_keys(struct huskd *d, const char *state)
{
	const char *env = getenv("HUSK_API_KEY");
	char path[4096], line[256], *buf = NULL, *save = NULL;
	size_t n = 0;
	FILE *f;

	if (env && *env) {
		buf = strdup(env);
	} else {
		snprintf(path, sizeof(path), "%s/api-keys", state);
		f = fopen(path, "re");
		if (!f) {
			char id[STORE_ID_LEN];
			int fd;

			if (store_new_id("husk_", id))
				return -EIO;
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0 || dprintf(fd, "%s\n", id) < 0)
				return -errno;
			close(fd);
			f = fopen(path, "re");
			if (!f)
				return -errno;
		}
		buf = calloc(1, 1);
		while (buf && fgets(line, sizeof(line), f)) {
			char *joined;

			line[strcspn(line, "\r\n")] = '\0';
			if (!line[0] || line[0] == '#')
				continue;
			if (asprintf(&joined, "%s%s%s", buf, *buf ? "," : "", line) < 0)
				break;
			free(buf);
			buf = joined;
		}
		fclose(f);
	}
	if (!buf || !*buf) {
		free(buf);
		return -ENOKEY;
	}
	for (char *p = buf; p; p = strchr(p + 1, ','))
		n++;
	d->keys = calloc(n + 1, sizeof(*d->keys));
	n = 0;
	for (char *k = strtok_r(buf, ",", &save); d->keys && k; k = strtok_r(NULL, ",", &save))
		d->keys[n++] = strdup(k);
	free(buf);
	return d->keys ? 0 : -ENOMEM;
}

/*
 * The key that signs stream URLs: STATE/stream-key, 32 random bytes made at
 * first start, so URLs given out before a restart still work after it.
 */
static int load_stream_key(const char *state, unsigned char key[32])
{
	char path[4200];
	ssize_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/stream-key", state);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, key, 32);
		close(fd);
		return n == 32 ? 0 : -EINVAL;
	}
	if (errno != ENOENT || getrandom(key, 32, 0) != 32)
		return -errno;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, key, 32);
	if (fsync(fd) < 0)
		n = -1;
	close(fd);
	return n == 32 ? 0 : -EIO;
}

/* cpu.max needs a cgroup v2 subtree of our own with the cpu controller; NULL: none. */
static int controller_on(const char *dir, const char *name)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "+%s", name);
	return fclose(f) != 0 ? -1 : 0;
}

/* HUSKD_TRACE_QUERIES=FILE: each query parameter a route reads, "METHOD PATH KEY" (tests). */
static FILE *query_trace;

static void trace_query(const struct http_req *r, const char *key)
{
	fprintf(query_trace, "%s %s %s\n", http_method(r), http_path(r), key);
	fflush(query_trace);
}

static void setup_query_trace(void)
{
	const char *path = getenv("HUSKD_TRACE_QUERIES");

	if (!path || !*path)
		return;
	query_trace = fopen(path, "ae");
	if (query_trace)
		http_trace_queries(trace_query);
	else
		log_warn(NULL, "HUSKD_TRACE_QUERIES: cannot open %s: %s", path, strerror(errno));
}

static const char *setup_cgroups(void)
{
	static const char dir[] = "/sys/fs/cgroup/husk";
	struct statfs fs;
	FILE *f;

	/* A v1 hierarchy (or a plain tmpfs there) would take our files and limit nothing. */
	if (statfs("/sys/fs/cgroup", &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
		goto off;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		goto off;
	f = fopen("/sys/fs/cgroup/cgroup.subtree_control", "we");
	if (!f || fputs("+cpu", f) < 0 || fclose(f) != 0)
		goto off;
	f = fopen("/sys/fs/cgroup/husk/cgroup.subtree_control", "we");
	if (!f || fputs("+cpu", f) < 0 || fclose(f) != 0)
		goto off;
	/* Each on its own: a kernel without one still limits the others. */
	for (const char *const *c = (const char *const[]){"memory", "pids", "io", NULL}; *c; c++)
		if (controller_on("/sys/fs/cgroup", *c) || controller_on(dir, *c))
			log_warn(NULL,
			         "the cgroup %s controller is not available here: sandboxes' %s "
			         "is not limited",
			         *c, *c);
	return dir;
off:
	log_warn(NULL, "cgroup v2 with the cpu controller is not available here: cpu limits are "
	               "not enforced (vCPU counts still are)");
	return NULL;
}

/*
 * Each sandbox holds descriptors here: as many as the system lets us have.
 * Returns how many HTTP connections to take at once: half of them.
 */
static unsigned raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) && getrlimit(RLIMIT_NOFILE, &rl))
			return 0;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 131072)
		return 65536;
	return rl.rlim_cur > 256 ? (unsigned)(rl.rlim_cur / 2) : 0;
}

static void connections_refused(unsigned count, unsigned limit)
{
	log_error(NULL, "%u connection(s) refused: huskd holds its limit of %u at once", count,
	          limit);
}

/* A handle that keeps the loop running, logged: a stop that hangs names what it waits for. */
static void still_open(uv_handle_t *h, void *arg)
{
	unsigned *n = arg;
	uv_os_fd_t fd;

	if ((!uv_is_active(h) && !uv_is_closing(h)) || !uv_has_ref(h))
		return;
	(*n)++;
	if (h->type == UV_PROCESS)
		log_warn(NULL, "still stopping: waiting for process %d to exit",
		         ((uv_process_t *)h)->pid);
	else if (uv_fileno(h, &fd) == 0)
		log_warn(NULL, "still stopping: a %s handle (fd %d)%s",
		         uv_handle_type_name(h->type), fd, uv_is_closing(h) ? ", closing" : "");
	else
		log_warn(NULL, "still stopping: a %s handle%s", uv_handle_type_name(h->type),
		         uv_is_closing(h) ? ", closing" : "");
}

static void stop_watch(uv_timer_t *t)
{
	unsigned n = 0;

	uv_walk(t->loop, still_open, &n);
	log_warn(NULL, "huskd has not stopped yet: %u handle(s) keep it running", n);
}

static void on_signal(uv_signal_t *s, int sig)
{
	struct huskd *d = s->data;

	log_info(NULL,
	         "signal %d: stopping; sandboxes keep running and are adopted at the next start",
	         sig);
	routes_close(d->routes);
	http_server_stop(d->http);
	sbx_mgr_close(d->mgr);
	uv_signal_stop(&d->sigint);
	uv_signal_stop(&d->sigterm);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	/* Not itself a reason to run on (unreferenced). */
	if (!d->stopping && uv_timer_init(d->loop, &d->stop_watch) == 0) {
		d->stopping = true;
		uv_timer_start(&d->stop_watch, stop_watch, 15000, 60000);
		uv_unref((uv_handle_t *)&d->stop_watch);
	}
}

/*
 * Users must know whether their sandboxes run on hardware KVM: nested ones
 * are an order of magnitude slower. tools/husk-up sets HUSK_MODE=nested when
 * it starts us inside its first-level VM.
 */
static const char *mode_text(void)
{
	const char *m = getenv("HUSK_MODE");

	if (m && strcmp(m, "nested") == 0)
		return "nested (inside a first-level VM under QEMU, this host has no hardware "
		       "KVM; the API is forwarded to the host)";
	if (access("/sys/module/kvm_intel", F_OK) == 0 || access("/sys/module/kvm_amd", F_OK) == 0)
		return "native (hardware KVM)";
	return "native on a /dev/kvm that is not hardware-assisted (guests run emulated)";
}

/* The state folder, the guest images and husk-vmm; 0 or 2 (said why). */
static int locate(struct options *o)
{
	const char *home = getenv("HOME"), *images = o->images;
	char self[4096], path[4200], *real;
	ssize_t n;

	if (!o->state && asprintf(&o->state, "%s/.local/state/husk", home ? home : "/root") < 0)
		return 2;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (!o->vmm &&
	    (!strrchr(self, '/') ||
	     asprintf(&o->vmm, "%.*s/husk-vmm", (int)(strrchr(self, '/') - self), self) < 0))
		return 2;
	/* Paths the jail binds and checks are compared as the kernel sees them. */
	if (realpath(o->images, path))
		images = path;
	/* The uncompressed kernel boots faster; a folder with only a bzImage still works. */
	if (asprintf(&o->kernel, "%s/vmlinux", images) < 0 ||
	    asprintf(&o->initrd, "%s/initramfs.cpio", images) < 0)
		return 2;
	if (access(o->kernel, R_OK)) {
		free(o->kernel);
		if (asprintf(&o->kernel, "%s/bzImage", images) < 0)
			return 2;
	}
	for (const char *p = o->state; (p = strchr(p + 1, '/'));) {
		snprintf(path, sizeof(path), "%.*s", (int)(p - o->state), o->state);
		mkdir(path, 0755);
	}
	mkdir(o->state, 0700);
	real = realpath(o->state, NULL);
	if (real) {
		free(o->state);
		o->state = real;
	}
	real = realpath(o->vmm, NULL);
	if (real) {
		free(o->vmm);
		o->vmm = real;
	}
	if (access(o->kernel, R_OK) || access(o->initrd, R_OK) || access(o->vmm, X_OK)) {
		fprintf(stderr,
		        "huskd: need %s, %s and %s; run 'make' first (or give --images/--vmm)\n",
		        o->kernel, o->initrd, o->vmm);
		return 2;
	}
	o->sbx.state = o->state;
	o->sbx.vmm = o->vmm;
	o->sbx.kernel = o->kernel;
	o->sbx.initrd = o->initrd;
	/* Beside huskd, like husk-vmm: every VMM starts confined by it. */
	if (strrchr(self, '/') &&
	    asprintf(&o->jail, "%.*s/husk-jail", (int)(strrchr(self, '/') - self), self) > 0 &&
	    access(o->jail, X_OK) == 0)
		o->sbx.jail = o->jail;
	if (!o->sbx.jail)
		log_warn(NULL, "VMMs run unconfined: husk-jail is not beside huskd");
	/* Also beside huskd: what husk runtime import runs. */
	if (strrchr(self, '/') &&
	    asprintf(&o->importer, "%.*s/husk-import", (int)(strrchr(self, '/') - self), self) >
	            0 &&
	    access(o->importer, X_OK) == 0)
		o->sbx.importer = o->importer;
	else if (geteuid() != 0) {
		log_warn(NULL, "VMMs run unconfined and without network: the jail needs huskd "
		               "to run as root");
		o->sbx.jail = NULL;
	}
	return 0;
}

/* The store, the manager, the routes, the listeners; 0 or 2 (said why). */
static int start(struct huskd *d, struct options *o)
{
	struct routes_config rcfg = {.loop = d->loop,
	                             .state = o->state,
	                             .public_url = o->public_url,
	                             .public_domain = o->public_domain};
	static char spool[4200]; /* the server keeps the pointer */
	char path[4200], err[512];
	int rc;

	snprintf(path, sizeof(path), "%s/huskd.db", o->state);
	if (store_open(path, &d->store, err, sizeof(err))) {
		fprintf(stderr, "huskd: %s\n", err);
		return 2;
	}
	if (store_set_exclusive(d->store))
		log_warn(NULL, "cannot take %s for huskd alone; it is shared (slower)", path);
	if (o->durable && store_set_durable(d->store)) {
		fprintf(stderr, "huskd: cannot make %s durable\n", path);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/runtimes/catalog.json", o->images);
	if (store_runtimes_load(d->store, path, err, sizeof(err)))
		log_warn(NULL, "no runtimes: %s (run 'make images')", err);
	if (load_keys(d, o->state)) {
		fprintf(stderr, "huskd: no API key: set HUSK_API_KEY or write one in %s/api-keys\n",
		        o->state);
		return 2;
	}
	rc = load_stream_key(o->state, rcfg.stream_key);
	if (rc) {
		fprintf(stderr,
		        "huskd: %s/stream-key: %s (it holds 32 bytes; remove it to make a new "
		        "one)\n",
		        o->state, strerror(-rc));
		return 2;
	}
	rcfg.stream_ttl_ms = o->stream_ttl_ms;
	rcfg.tls = o->http.tls_cert != NULL;
	rc = tenant_open(d->store, d->keys, &d->tenants);
	if (!rc)
		tenant_set_limits(d->tenants, &o->keys);
	if (rc) {
		fprintf(stderr, "huskd: cannot read the API keys from %s/huskd.db: %s\n", o->state,
		        strerror(-rc));
		return 2;
	}
	snprintf(path, sizeof(path), "%s/keys", o->state);
	rc = keystore_open(path, o->kms, &d->keystore);
	if (rc) {
		fprintf(stderr, "huskd: cannot use %s for org keys: %s\n", path, strerror(-rc));
		return 2;
	}
	o->sbx.keys = d->keystore;
	rcfg.keystore = d->keystore;
	o->sbx.cgroup_dir = setup_cgroups();
	setup_query_trace();
	rc = sbx_mgr_open(d->loop, d->store, &o->sbx, &d->mgr);
	rcfg.tenants = d->tenants;
	if (!rc)
		rc = routes_open(d->mgr, &rcfg, &d->routes);
	if (rc) {
		fprintf(stderr, "huskd: cannot start: %s\n", strerror(-rc));
		return 2;
	}
	o->http.admit = routes_admit;
	if (huskd_log_enabled(HLOG_DEBUG))
		o->http.served = routes_served;
	/* Bodies over 1 MiB (uploads, file writes) wait in STATE/streams, not in memory. */
	snprintf(spool, sizeof(spool), "%s/streams", o->state);
	o->http.spool_dir = spool;
	o->http.spool_over = 1 << 20;
	rc = http_server_start(d->loop, &o->http, routes_handle, d->routes, &d->http);
	if (rc) {
		fprintf(stderr, "huskd: cannot listen on %s:%d%s%s: %s\n", o->http.tcp_host,
		        o->http.tcp_port, o->http.unix_path ? " or " : "",
		        o->http.unix_path ? o->http.unix_path : "", uv_strerror(rc));
		return 2;
	}
	return 0;
}

/* What main made, freed; the loop run once more for handles that close asynchronously. */
static void cleanup(struct huskd *d, struct options *o)
{
	if (d->stopping)
		uv_close((uv_handle_t *)&d->stop_watch, NULL);
	uv_run(d->loop, UV_RUN_NOWAIT);
	sbx_mgr_free(d->mgr);
	routes_free(d->routes);
	tenant_free(d->tenants);
	keystore_free(d->keystore);
	store_close(d->store);
	for (char **k = d->keys; k && *k; k++)
		free(*k);
	free(d->keys);
	free(o->state);
	free(o->vmm);
	free(o->jail);
	free(o->importer);
	free(o->kernel);
	free(o->initrd);
	for (int k = 0; k < 2; k++) {
		free(o->egress[k]);
		free(o->egress_text[k]);
	}
	uv_loop_close(d->loop);
}

int main(int argc, char **argv)
{
	struct huskd d = {.loop = uv_default_loop()};
	struct options o = {.http = {.tcp_host = "127.0.0.1", .tcp_port = 8371},
	                    .sbx = {.output_limit = 64ull << 20},
	                    .images = "build/images"};
	int rc = huskd_options(argc, argv, &o);

	if (rc) {
		cleanup(&d, &o);
		return rc == 1 ? 0 : rc;
	}
	signal(SIGPIPE, SIG_IGN);
	o.http.max_connections = raise_nofile();
	o.http.refused = connections_refused;
	rc = locate(&o);
	if (!rc)
		rc = start(&d, &o);
	if (rc) {
		cleanup(&d, &o);
		return rc;
	}
	uv_signal_init(d.loop, &d.sigint);
	uv_signal_init(d.loop, &d.sigterm);
	d.sigint.data = d.sigterm.data = &d;
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	sbx_mgr_adopt(d.mgr);
	log_info(NULL, "listening on %s://%s:%d%s%s, state in %s, mode: %s",
	         o.http.tls_cert ? "https" : "http", o.http.tcp_host, http_server_port(d.http),
	         o.http.unix_path ? " and " : "", o.http.unix_path ? o.http.unix_path : "", o.state,
	         mode_text());
	/* Returns once a signal closed everything and the work in flight has drained. */
	uv_run(d.loop, UV_RUN_DEFAULT);
	cleanup(&d, &o);
	return 0;
}
