// SPDX-License-Identifier: MIT
#include "control.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "evloop.h"
#include "log.h"
#include "netstack.h"
#include "vm.h"

#define MAX_CLIENTS 4
#define LINE_MAX_LEN 512
#define PAUSE_TIMEOUT_MS 5000
/* Compression threads for a snapshot's memory; the guest is paused meanwhile. */
#define SNAPSHOT_THREADS 2

struct client {
	struct control *c;
	int fd;
	size_t len;
	char line[LINE_MAX_LEN];
};

struct control {
	struct vm *vm;
	struct netstack *net; /* NULL: the guest has no network */
	char *path;
	int listen_fd;
	int paused;
	struct client clients[MAX_CLIENTS];
};

static void client_close(struct client *cl)
{
	if (cl->fd < 0)
		return;
	evloop_del(cl->c->vm->loop, cl->fd);
	close(cl->fd);
	cl->fd = -1;
	cl->len = 0;
}

static void reply(struct client *cl, const char *fmt, const char *arg)
{
	char out[LINE_MAX_LEN];
	int n = snprintf(out, sizeof(out), fmt, arg);

	/* Replies are short; a peer that does not read them loses its connection. */
	if (n < 0 || send(cl->fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		client_close(cl);
}

/* Saves the paused VM; the reply says how long it took. */
static void snapshot(struct client *cl, const char *path, bool diff)
{
	char err[400], msg[64];
	struct timespec t0, t1;

	if (!cl->c->paused) {
		reply(cl, "ERR %s\n", "pause the VM before taking a snapshot");
		return;
	}
	if (!*path) {
		reply(cl, "ERR %s\n", "snapshot needs a file name");
		return;
	}
	if (diff && cl->c->vm->mem_base.fd < 0) {
		reply(cl, "ERR %s\n",
		      "this VM runs on no memory file (--mem-file): take a full snapshot");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (vm_snapshot_save(cl->c->vm, path, SNAPSHOT_THREADS, diff, err, sizeof(err))) {
		log_err("snapshot: %s", err);
		reply(cl, "ERR %s\n", err);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	snprintf(msg, sizeof(msg), "%lld",
	         (long long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	log_info("%ssnapshot %s written in %s ms", diff ? "diff " : "", path, msg);
	reply(cl, "OK saved in %s ms\n", msg);
}

/* "expose PORT PATH": the guest's TCP port served at the Unix socket PATH from now on. */
static void expose(struct client *cl, const char *arg)
{
	char *end;
	unsigned long port = strtoul(arg, &end, 10);
	int ret;

	if (!cl->c->net) {
		reply(cl, "ERR %s\n", "this VM has no network device (start it with --net slirp)");
		return;
	}
	if (end == arg || *end != ' ' || port < 1 || port > 65535 || end[1] != '/') {
		reply(cl, "ERR %s\n",
		      "expose takes a TCP port (1-65535) and a socket's absolute path");
		return;
	}
	ret = netstack_expose(cl->c->net, (unsigned)port, end + 1);
	if (ret) {
		log_warn("cannot expose guest port %lu at %s: %s", port, end + 1, strerror(-ret));
		reply(cl, "ERR cannot expose the port: %s\n", strerror(-ret));
		return;
	}
	log_debug("guest port %lu exposed at %s", port, end + 1);
	reply(cl, "OK %s\n", "exposed");
}

static void run_command(struct client *cl, const char *cmd)
{
	struct control *c = cl->c;
	int ret;

	if (strcmp(cmd, "status") == 0) {
		reply(cl, "OK %s\n", c->paused ? "paused" : "running");
	} else if (strcmp(cmd, "pause") == 0) {
		ret = c->paused ? 0 : vm_pause(c->vm, PAUSE_TIMEOUT_MS);
		if (ret == 0) {
			if (!c->paused)
				log_info("paused");
			c->paused = 1;
			reply(cl, "OK %s\n", "paused");
		} else {
			reply(cl, "ERR cannot pause: %s\n", strerror(-ret));
		}
	} else if (strcmp(cmd, "resume") == 0) {
		if (c->paused) {
			vm_resume(c->vm);
			log_info("resumed");
		}
		c->paused = 0;
		reply(cl, "OK %s\n", "running");
	} else if (strcmp(cmd, "dump") == 0) {
		vm_dump(c->vm, !c->paused);
		reply(cl, "OK %s\n", "dumped");
	} else if (strcmp(cmd, "quit") == 0) {
		/* After a snapshot: the saved guest lives on in the file, not here. */
		reply(cl, "OK %s\n", "quitting");
		vm_stop(c->vm, VM_EXIT_OK, "stopped by the control socket");
	} else if (strcmp(cmd, "key none") == 0) {
		c->vm->has_key = false;
		OPENSSL_cleanse(&c->vm->key, sizeof(c->vm->key));
		reply(cl, "OK %s\n", "snapshots are not sealed");
	} else if (strncmp(cmd, "key ", 4) == 0) {
		/* The snapshots this VM writes from now on are sealed with it. */
		ret = snap_key_parse(cmd + 4, strlen(cmd + 4), &c->vm->key);
		if (!ret && snap_seal_init())
			ret = -ENOTSUP;
		c->vm->has_key = ret == 0;
		if (ret)
			OPENSSL_cleanse(&c->vm->key, sizeof(c->vm->key));
		if (ret == -ENOTSUP)
			reply(cl, "ERR %s\n",
			      "this host's OpenSSL has no AES-256-GCM: cannot seal");
		else if (ret)
			reply(cl, "ERR %s\n", "key takes 64 hex digits (or none)");
		else
			reply(cl, "OK %s\n", "snapshots are sealed");
	} else if (strncmp(cmd, "snapshot ", 9) == 0) {
		snapshot(cl, cmd + 9, false);
	} else if (strncmp(cmd, "snapshot-diff ", 14) == 0) {
		snapshot(cl, cmd + 14, true);
	} else if (strncmp(cmd, "expose ", 7) == 0) {
		expose(cl, cmd + 7);
	} else {
		reply(cl,
		      "ERR unknown command '%.64s' (status, pause, resume, key HEX|none, "
		      "snapshot FILE, snapshot-diff FILE, expose PORT PATH, quit)\n",
		      cmd);
	}
}

static void client_event(void *ctx, uint32_t events)
{
	struct client *cl = ctx;
	ssize_t n;
	char *nl;

	(void)events;
	n = recv(cl->fd, cl->line + cl->len, sizeof(cl->line) - 1 - cl->len, MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			client_close(cl);
		return;
	}
	cl->len += (size_t)n;
	cl->line[cl->len] = '\0';
	while (cl->fd >= 0 && (nl = strchr(cl->line, '\n'))) {
		*nl = '\0';
		if (nl > cl->line && nl[-1] == '\r')
			nl[-1] = '\0';
		run_command(cl, cl->line);
		if (cl->fd < 0)
			return;
		cl->len -= (size_t)(nl + 1 - cl->line);
		memmove(cl->line, nl + 1, cl->len + 1);
	}
	if (cl->len == sizeof(cl->line) - 1) {
		reply(cl, "ERR %s\n", "line too long");
		client_close(cl);
	}
}

static void listener_event(void *ctx, uint32_t events)
{
	struct control *c = ctx;
	int fd;

	(void)events;
	while ((fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct client *cl = NULL;

		for (int i = 0; i < MAX_CLIENTS && !cl; i++)
			if (c->clients[i].fd < 0)
				cl = &c->clients[i];
		if (!cl || evloop_add(c->vm->loop, fd, EPOLLIN, client_event, cl)) {
			static const char busy[] = "ERR too many control connections\n";

			if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				log_debug("control: %s", strerror(errno));
			close(fd);
			continue;
		}
		cl->fd = fd;
		cl->len = 0;
	}
}

struct control *control_create(struct vm *vm, const char *path, struct netstack *net)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct control *c;
	struct stat st;

	if (strlen(path) >= sizeof(a.sun_path)) {
		log_err("control socket path '%s' is too long", path);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(path))) {
		free(c);
		return NULL;
	}
	c->vm = vm;
	c->net = net;
	/* A held VM (husk-vmm --held) starts paused. */
	c->paused = atomic_load(&vm->pause_req);
	for (int i = 0; i < MAX_CLIENTS; i++)
		c->clients[i] = (struct client){.c = c, .fd = -1};
	strcpy(a.sun_path, path);
	/* A socket file left by a dead VMM is in the way; anything else is not ours to remove. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(c->listen_fd, 8) < 0 ||
	    evloop_add(vm->loop, c->listen_fd, EPOLLIN, listener_event, c)) {
		log_err("cannot listen on the control socket '%s': %s", path, strerror(errno));
		if (c->listen_fd >= 0)
			close(c->listen_fd);
		free(c->path);
		free(c);
		return NULL;
	}
	return c;
}

void control_destroy(struct control *c)
{
	if (!c)
		return;
	for (int i = 0; i < MAX_CLIENTS; i++)
		client_close(&c->clients[i]);
	evloop_del(c->vm->loop, c->listen_fd);
	close(c->listen_fd);
	unlink(c->path);
	free(c->path);
	free(c);
}
