// SPDX-License-Identifier: MIT
/*
 * huskd: the sandbox service. REST API (api/API.md) on 127.0.0.1:PORT and a
 * Unix socket, state in SQLite, one husk-vmm per sandbox. VMMs outlive a
 * huskd restart and are adopted again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers.h"
#include "json_resp.h"
#include "router.h"

static const struct route routes[] = {
	{"POST", "/sandbox", h_create},
	{"GET", "/sandbox", h_list},
	{"GET", "/sandbox/runtimes", h_runtimes},
	{"GET", "/sandbox/stats", h_stats},
	{"GET", "/services/stats/:org", h_service_stats},
	{"GET", "/sandbox/status/:id", h_status},
	{"GET", "/sandbox/execution/:id", h_execution},
	{"GET", "/sandbox/sandboxes/:id/executions", h_executions},
	{"GET", "/sandbox/sandboxes/:id/events", h_events},
	{"GET", "/sandbox/:id", h_get},
	{"DELETE", "/sandbox/:id", h_destroy},
	{"POST", "/sandbox/:id/execute", h_execute},
	{"POST", "/sandbox/:id/pause", h_pause},
	{"POST", "/sandbox/:id/resume", h_resume},
	{"POST", "/sandbox/:id/snapshot", h_snap_create},
	{"POST", "/sandbox/:id/checkpoint", h_ckpt_create},
	{"GET", "/sandbox/checkpoints/:id", h_ckpt_list},
	{"POST", "/sandbox/:id/checkpoint/:ck/restore", h_ckpt_restore},
	{"DELETE", "/sandbox/:id/checkpoint/:ck", h_ckpt_delete},
	{"GET", "/sandbox/snapshots", h_snap_list},
	{"GET", "/sandbox/snapshots/public", h_snap_public_list},
	{"GET", "/sandbox/snapshots/public/:ref", h_snap_public_get},
	{"GET", "/sandbox/snapshots/lineage", h_snap_lineage},
	{"POST", "/sandbox/snapshots/build", h_snap_build_init},
	{"PUT", "/sandbox/snapshots/:snap/upload", h_snap_build_upload},
	{"POST", "/sandbox/snapshots/:snap/finalize", h_snap_build_finalize},
	{"GET", "/sandbox/snapshots/:snap", h_snap_get},
	{"PATCH", "/sandbox/snapshots/:snap", h_snap_tag},
	{"DELETE", "/sandbox/snapshots/:snap", h_snap_delete},
	{"GET", "/streams/:id", h_stream},
	{"PATCH", "/sandbox/env/:id", h_env},
	{"POST", "/sandbox/sandboxes/:id/jobs", h_job_create},
	{"GET", "/sandbox/sandboxes/:id/jobs", h_job_list},
	{"GET", "/sandbox/sandboxes/:id/jobs/:job", h_job_get},
	{"DELETE", "/sandbox/sandboxes/:id/jobs/:job", h_job_stop},
	{"POST", "/fs/:id", h_fs_write},
	{"GET", "/fs/:id", h_fs_read},
	{"GET", "/fs/list/:id", h_fs_list},
	{"POST", "/fs/mkdir/:id", h_fs_mkdir},
	{"POST", "/fs/rm/:id", h_fs_rm},
	{"POST", "/fs/rmdir/:id", h_fs_rmdir},
	{"GET", "/fs/download/:id", h_fs_download},
	{"POST", "/fs/upload/:id", h_fs_upload},
};

/* Stream URLs are capabilities (unguessable ids); the client fetches them without a key. */
static bool authorized(struct huskd *d, struct http_req *r)
{
	const char *h = http_header(r, "Authorization");

	if (!strncmp(http_path(r), "/streams/", 9))
		return true;
	if (!h || strncmp(h, "Bearer ", 7))
		return false;
	for (char **k = d->keys; *k; k++)
		if (!strcmp(h + 7, *k))
			return true;
	return false;
}

static void handle(struct http_req *r, void *ctx)
{
	struct huskd *d = ctx;

	if (!authorized(d, r)) {
		api_error(r, 401, "UNAUTHORIZED",
		          "a valid API key is required: send 'Authorization: Bearer <key>' (keys "
		          "are in "
		          "%s/api-keys or HUSK_API_KEY)",
		          d->state);
		return;
	}
	router_dispatch(r, routes, sizeof(routes) / sizeof(routes[0]), d);
}

/* Keys from HUSK_API_KEY (comma-separated), else the state folder's api-keys file, made once. */
static int load_keys(struct huskd *d)
{
	const char *env = getenv("HUSK_API_KEY");
	char path[4096], line[256], *buf = NULL;
	size_t n = 0;
	FILE *f;

	if (env && *env) {
		buf = strdup(env);
	} else {
		snprintf(path, sizeof(path), "%s/api-keys", d->state);
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
			line[strcspn(line, "\r\n")] = '\0';
			if (!line[0] || line[0] == '#')
				continue;
			char *joined;
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
	for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save))
		d->keys[n++] = strdup(k);
	free(buf);
	return 0;
}

/* cpu.max needs a cgroup v2 subtree of our own with the cpu controller. */
static void setup_cgroups(struct huskd *d)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/fs/cgroup/husk");
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		goto off;
	f = fopen("/sys/fs/cgroup/cgroup.subtree_control", "we");
	if (!f || fputs("+cpu", f) < 0 || fclose(f) != 0)
		goto off;
	f = fopen("/sys/fs/cgroup/husk/cgroup.subtree_control", "we");
	if (!f || fputs("+cpu", f) < 0 || fclose(f) != 0)
		goto off;
	d->cgroup_root = strdup(path);
	d->cgroups = true;
	return;
off:
	huskd_log(NULL, "cgroup v2 with the cpu controller is not available here: cpu limits are "
	                "not enforced (vCPU counts still are)");
}

static uv_signal_t sigint, sigterm;

static void on_signal(uv_signal_t *s, int sig)
{
	struct huskd *d = s->data;

	huskd_log(NULL,
	          "signal %d: stopping; sandboxes keep running and are adopted at the next start",
	          sig);
	wait_drop_all(d);
	http_server_stop(d->http);
	uv_signal_stop(&sigint);
	uv_signal_stop(&sigterm);
	uv_stop(d->loop);
}

/* At exit: sandboxes keep running; what huskd holds for them goes. */
static void huskd_free(struct huskd *d)
{
	while (d->sandboxes)
		sbx_forget(d->sandboxes);
	task_runner_destroy(d->tasks);
	uv_close((uv_handle_t *)&sigint, NULL);
	uv_close((uv_handle_t *)&sigterm, NULL);
	uv_run(d->loop, UV_RUN_NOWAIT);
	store_close(d->store);
	for (char **k = d->keys; k && *k; k++)
		free(*k);
	free(d->keys);
	free(d->cgroup_root);
	free(d->state);
	free(d->streams);
	free(d->vmm);
	free(d->kernel);
	free(d->initrd);
	free(d->public_url);
	uv_loop_close(d->loop);
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

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: huskd [--port N] [--listen ADDR] [--unix PATH] [--state DIR] [--images "
	        "DIR]\n"
	        "             [--vmm PATH] [--public-url URL]\n"
	        "\n"
	        "  --port N        listen on 127.0.0.1:N (default 8371)\n"
	        "  --listen ADDR   listen on ADDR instead of 127.0.0.1 (no TLS: keep it private)\n"
	        "  --unix PATH     also listen on a Unix socket\n"
	        "  --state DIR     state folder (default ~/.local/state/husk)\n"
	        "  --images DIR    bzImage, initramfs.cpio, runtimes/ (default build/images)\n"
	        "  --vmm PATH      husk-vmm (default: next to huskd)\n"
	        "  --public-url U  base of stream URLs (default: from each request's Host)\n"
	        "  --output-limit SIZE  output kept per stream of a command (default 64Mi)\n"
	        "  --durable       commit to disk before answering (for machines that get cut "
	        "off)\n"
	        "  --on-idle pause|terminate  what timeout.idle does (default terminate; pause\n"
	        "                  writes the sandbox to disk, the next request resumes it)\n"
	        "API keys: HUSK_API_KEY=key[,key...], else STATE/api-keys (made on first "
	        "start).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
	                                     {"listen", required_argument, NULL, 'l'},
	                                     {"unix", required_argument, NULL, 'u'},
	                                     {"state", required_argument, NULL, 's'},
	                                     {"images", required_argument, NULL, 'i'},
	                                     {"vmm", required_argument, NULL, 'v'},
	                                     {"public-url", required_argument, NULL, 'P'},
	                                     {"output-limit", required_argument, NULL, 'o'},
	                                     {"durable", no_argument, NULL, 'D'},
	                                     {"on-idle", required_argument, NULL, 'I'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct huskd d = {.loop = uv_default_loop(), .output_limit = 64ull << 20};
	struct http_config cfg = {.tcp_host = "127.0.0.1", .tcp_port = 8371};
	const char *images = "build/images", *home = getenv("HOME");
	char path[4096], err[512], self[4096];
	bool durable = false;
	ssize_t n;
	int c, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			cfg.tcp_port = atoi(optarg);
			break;
		case 'l':
			cfg.tcp_host = optarg;
			break;
		case 'u':
			cfg.unix_path = optarg;
			break;
		case 's':
			d.state = strdup(optarg);
			break;
		case 'i':
			images = optarg;
			break;
		case 'v':
			d.vmm = strdup(optarg);
			break;
		case 'P':
			d.public_url = strdup(optarg);
			break;
		case 'D':
			durable = true;
			break;
		case 'I':
			if (strcmp(optarg, "pause") && strcmp(optarg, "terminate")) {
				fprintf(stderr, "huskd: --on-idle '%s': give pause or terminate\n",
				        optarg);
				return 2;
			}
			d.idle_pause = !strcmp(optarg, "pause");
			break;
		case 'o': {
			int64_t bytes;

			if (store_parse_bytes(optarg, &bytes) || bytes < 1024) {
				fprintf(stderr,
				        "huskd: --output-limit '%s': give a size of at least "
				        "1Ki, e.g. 64Mi\n",
				        optarg);
				return 2;
			}
			d.output_limit = (uint64_t)bytes;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!d.state && asprintf(&d.state, "%s/.local/state/husk", home ? home : "/root") < 0)
		return 1;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (!d.vmm && (!strrchr(self, '/') || asprintf(&d.vmm, "%.*s/husk-vmm",
	                                               (int)(strrchr(self, '/') - self), self) < 0))
		return 1;
	if (asprintf(&d.kernel, "%s/bzImage", images) < 0 ||
	    asprintf(&d.initrd, "%s/initramfs.cpio", images) < 0 ||
	    asprintf(&d.streams, "%s/streams", d.state) < 0)
		return 1;
	for (const char *p = d.state; (p = strchr(p + 1, '/'));) {
		snprintf(path, sizeof(path), "%.*s", (int)(p - d.state), d.state);
		mkdir(path, 0755);
	}
	mkdir(d.state, 0700);
	snprintf(path, sizeof(path), "%s/sandboxes", d.state);
	mkdir(path, 0700);
	mkdir(d.streams, 0700);
	if (access(d.kernel, R_OK) || access(d.initrd, R_OK) || access(d.vmm, X_OK)) {
		fprintf(stderr,
		        "huskd: need %s, %s and %s; run 'make' first (or give --images/--vmm)\n",
		        d.kernel, d.initrd, d.vmm);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/huskd.db", d.state);
	if (store_open(path, &d.store, err, sizeof(err))) {
		fprintf(stderr, "huskd: %s\n", err);
		return 2;
	}
	if (durable && store_set_durable(d.store)) {
		fprintf(stderr, "huskd: cannot make %s durable\n", path);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/runtimes/catalog.json", images);
	if (store_runtimes_load(d.store, path, err, sizeof(err)))
		fprintf(stderr, "huskd: no runtimes: %s (run 'make images')\n", err);
	if (load_keys(&d)) {
		fprintf(stderr, "huskd: no API key: set HUSK_API_KEY or write one in %s/api-keys\n",
		        d.state);
		return 2;
	}
	setup_cgroups(&d);
	if (task_runner_create(d.loop, &d.tasks))
		return 1;
	rc = http_server_start(d.loop, &cfg, handle, &d, &d.http);
	if (rc) {
		fprintf(stderr, "huskd: cannot listen on %s:%d%s%s: %s\n", cfg.tcp_host,
		        cfg.tcp_port, cfg.unix_path ? " or " : "",
		        cfg.unix_path ? cfg.unix_path : "", uv_strerror(rc));
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	uv_signal_init(d.loop, &sigint);
	uv_signal_init(d.loop, &sigterm);
	sigint.data = sigterm.data = &d;
	uv_signal_start(&sigint, on_signal, SIGINT);
	uv_signal_start(&sigterm, on_signal, SIGTERM);
	sbx_adopt_all(&d);
	huskd_log(NULL, "listening on http://%s:%d%s%s, state in %s, mode: %s", cfg.tcp_host,
	          http_server_port(d.http), cfg.unix_path ? " and " : "",
	          cfg.unix_path ? cfg.unix_path : "", d.state, mode_text());
	uv_run(d.loop, UV_RUN_DEFAULT);
	huskd_free(&d);
	return 0;
}
