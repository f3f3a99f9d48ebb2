// SPDX-License-Identifier: MIT
/*
 * fake-vmm: husk-vmm's command line and control socket (vmm/control.h)
 * around a pretend guest whose agent dials home (README.md beside this
 * file), for huskd's host-only tests. One thread, one poll() loop: the
 * control connections always; the guest (its connection, its timers, its
 * dialling) only while it is not paused.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fake.h"

#define MAX_CTL 16
#define CTL_LINE 512
#define DIAL_RETRY_MS 20
#define SHORT_CONN_MS 1000 /* a connection that ends sooner is redialled after DIAL_RETRY_MS */

/*
 * The leak check at exit lists the process's threads in /proc, and
 * husk-jail's root has none: there it would fail, and the exit status with
 * it, for every fake that quits by itself (a pause). On there, off here.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return access("/proc/self/task", F_OK) == 0 ? "" : "detect_leaks=0";
}

struct ctl {
	int fd; /* -1: a free slot */
	size_t len;
	char line[CTL_LINE];
};

struct vmm {
	struct fake fk;
	struct fake_opts o;
	int listen_fd;
	struct ctl ctl[MAX_CTL];
	struct sockaddr_un dial_addr; /* <--vsock>_PORT */
	bool can_dial;
	int64_t next_dial, connected_at; /* host monotonic ms */
	bool quit;
};

/* What the fake's memory file says of the snapshot it was made of (as the real one, not its path).
 */
static void mem_file_line(const char *snap, char *out, size_t len)
{
	struct stat st;

	snprintf(out, len, "fake memory of a snapshot of %lld bytes\n",
	         stat(snap, &st) == 0 ? (long long)st.st_size : -1LL);
}

/* Whether path is a memory file --extract-memory made of snap (of g's base if g is a diff). */
static bool mem_file_of(const char *path, const char *snap, struct guest *g)
{
	char line[256] = "", want[256];
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(line, sizeof(line), f);

	if (f)
		fclose(f);
	if (g->diff)
		snprintf(want, sizeof(want), "%s", g->base);
	else
		mem_file_line(snap, want, sizeof(want));
	if (ok && !strcmp(line, want))
		snprintf(g->base, sizeof(g->base), "%s", line);
	return ok && !strcmp(line, want);
}

/* --extract-memory: the snapshot checked, a file naming it written; the exit status. */
static int extract(const struct fake_opts *o)
{
	struct guest g = {0};
	char line[256];
	FILE *f;

	if (snap_load(&g, o->restore)) {
		fprintf(stderr, "husk-vmm: %s: not a snapshot\n", o->restore);
		return EXIT_USAGE;
	}
	if (g.diff || g.sealed[0]) {
		fprintf(stderr, "husk-vmm: %s is %s\n", o->restore,
		        g.sealed[0] ? "sealed: no memory file is made of it"
		                    : "a diff: a memory file is made of a full snapshot");
		guest_free(&g);
		return EXIT_USAGE;
	}
	guest_free(&g);
	mem_file_line(o->restore, line, sizeof(line));
	f = fopen(o->extract, "we");
	if (!f || fputs(line, f) < 0 || fclose(f)) {
		fprintf(stderr, "husk-vmm: cannot write %s\n", o->extract);
		return EXIT_USAGE;
	}
	return 0;
}

static int guest_boot(struct vmm *v)
{
	struct guest *g = &v->fk.g;
	uint8_t id[16];

	if (v->o.restore) {
		if (snap_load(g, v->o.restore)) {
			fprintf(stderr, "husk-vmm: %s: not a snapshot\n", v->o.restore);
			return EXIT_USAGE;
		}
		/* As husk-vmm: sealed, it opens only with the key it was sealed with. */
		if (g->sealed[0] && strcmp(g->sealed, v->fk.key)) {
			fprintf(stderr, "husk-vmm: cannot restore %s: it is sealed %s\n",
			        v->o.restore,
			        v->fk.key[0] ? "with another key" : "and no key was given");
			return EXIT_USAGE;
		}
		/* The fake's memory file: a line naming the snapshot it was made of. */
		if (g->diff && !v->o.mem_file) {
			fprintf(stderr,
			        "husk-vmm: %s is a diff over another snapshot's memory: give that "
			        "snapshot's memory file with --mem-file\n",
			        v->o.restore);
			return EXIT_USAGE;
		}
		if (v->o.mem_file && !mem_file_of(v->o.mem_file, v->o.restore, g)) {
			fprintf(stderr, "husk-vmm: %s is not a memory file of %s\n", v->o.mem_file,
			        v->o.restore);
			return EXIT_USAGE;
		}
		if ((v->o.mem_set && v->o.mem != g->mem) ||
		    (v->o.vcpus_set && v->o.vcpus != g->vcpus)) {
			fprintf(stderr,
			        "husk-vmm: cannot restore %s: saved with --mem %lluM --vcpus %u\n",
			        v->o.restore, (unsigned long long)(g->mem >> 20), g->vcpus);
			return EXIT_USAGE;
		}
		return 0;
	}
	if (getrandom(id, sizeof(id), 0) != sizeof(id))
		return 1;
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(g->boot_id + 2 * i, 3, "%02x", id[i]);
	g->dial_port = dial_port(v->o.cmdline);
	g->mem = v->o.mem;
	g->vcpus = v->o.vcpus;
	/* husk-agent's defaults, as its init sets them in a guest. */
	g->env = json_pack("{s:s, s:s, s:s, s:s}", "PATH",
	                   "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME",
	                   "/root", "TERM", "linux", "LANG", "C.UTF-8");
	return g->env ? 0 : 1;
}

/* The console file gets a line, as a guest's serial console would. */
static int console_write(const struct vmm *v)
{
	FILE *f = !v->o.console || !strcmp(v->o.console, "stdio") ? stdout
	                                                          : fopen(v->o.console, "we");

	if (!f) {
		fprintf(stderr, "husk-vmm: cannot open console file '%s': %s\n", v->o.console,
		        strerror(errno));
		return EXIT_USAGE;
	}
	fprintf(f, "fake guest %s: %s\n", v->fk.g.boot_id, v->o.restore ? "restored" : "booted");
	if (f == stdout)
		fflush(f);
	else
		fclose(f);
	return 0;
}

static int control_listen(struct vmm *v)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *path = v->o.control;

	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "husk-vmm: control socket path too long: %s\n", path);
		return 1;
	}
	strcpy(a.sun_path, path);
	v->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	unlink(path); /* a stale socket of an earlier run */
	if (v->listen_fd < 0 || bind(v->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(v->listen_fd, MAX_CTL)) {
		fprintf(stderr, "husk-vmm: cannot listen on %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

static void ctl_close(struct ctl *cl)
{
	close(cl->fd);
	cl->fd = -1;
	cl->len = 0;
}

static void ctl_reply(struct ctl *cl, const char *fmt, const char *arg)
{
	char out[CTL_LINE + 128];
	int n = snprintf(out, sizeof(out), fmt, arg);

	/* Replies are short; a peer that does not take one loses its connection. */
	if (n < 0 || (size_t)n >= sizeof(out) ||
	    send(cl->fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		ctl_close(cl);
}

static void ctl_snapshot(struct vmm *v, struct ctl *cl, const char *path, bool diff)
{
	int64_t t0 = mono_ms();
	char err[CTL_LINE + 64], ms[32];

	if (!v->fk.paused) {
		ctl_reply(cl, "ERR %s\n", "not paused");
	} else if (!*path) {
		ctl_reply(cl, "ERR %s\n", "snapshot needs a file name");
	} else if (diff && !v->fk.g.base[0]) {
		ctl_reply(cl, "ERR %s\n", "this VM runs on no memory file (--mem-file)");
	} else if (v->fk.fail & FAIL_SNAPSHOT) {
		ctl_reply(cl, "ERR cannot write %s: No space left on device\n", path);
	} else if (snap_save(&v->fk, path, diff, err, sizeof(err))) {
		fprintf(stderr, "fake-vmm: snapshot: %s\n", err);
		ctl_reply(cl, "ERR %s\n", err);
	} else {
		snprintf(ms, sizeof(ms), "%lld", (long long)(mono_ms() - t0));
		fprintf(stderr, "fake-vmm: %ssnapshot %s written in %s ms\n", diff ? "diff " : "",
		        path, ms);
		ctl_reply(cl, "OK saved in %s ms\n", ms);
	}
}

static void ctl_command(struct vmm *v, struct ctl *cl, const char *cmd)
{
	struct fake *fk = &v->fk;

	if (!strcmp(cmd, "status")) {
		ctl_reply(cl, "OK %s\n", fk->paused ? "paused" : "running");
	} else if (!strcmp(cmd, "pause")) {
		if (!fk->paused) {
			fk->paused_at = mono_ms();
			fprintf(stderr, "fake-vmm: paused after %u execs\n", fk->execs);
		}
		fk->paused = true;
		ctl_reply(cl, "OK %s\n", "paused");
	} else if (!strcmp(cmd, "resume")) {
		if (fk->paused)
			fk->paused_total += mono_ms() - fk->paused_at;
		fk->paused = false;
		ctl_reply(cl, "OK %s\n", "running");
	} else if (!strcmp(cmd, "quit")) {
		ctl_reply(cl, "OK %s\n", "quitting");
		v->quit = true;
	} else if (!strcmp(cmd, "key none")) {
		fk->key[0] = '\0';
		ctl_reply(cl, "OK %s\n", "snapshots are not sealed");
	} else if (!strncmp(cmd, "key ", 4)) {
		if (key_fingerprint(cmd + 4, strlen(cmd + 4), fk->key))
			ctl_reply(cl, "ERR %s\n", "key takes 64 hex digits (or none)");
		else
			ctl_reply(cl, "OK %s\n", "snapshots are sealed");
	} else if (!strcmp(cmd, "snapshot") || !strncmp(cmd, "snapshot ", 9)) {
		ctl_snapshot(v, cl, cmd + (cmd[8] ? 9 : 8), false);
	} else if (!strncmp(cmd, "snapshot-diff ", 14) && !(fk->fail & FAIL_NO_DIFF)) {
		ctl_snapshot(v, cl, cmd + 14, true);
	} else if (!strcmp(cmd, "dump")) {
		/* As husk-vmm's: a line in its log (the fake has no queues to show). */
		fprintf(stderr, "fake-vmm: state on request\n");
		ctl_reply(cl, "OK %s\n", "dumped");
	} else if (!strncmp(cmd, "expose ", 7)) {
		/* The fake has no guest network: nothing will answer at the socket. */
		ctl_reply(cl, "OK %s\n", "exposed");
	} else {
		ctl_reply(cl,
		          "ERR unknown command '%.64s' (status, pause, resume, snapshot FILE, "
		          "snapshot-diff FILE, dump, quit)\n",
		          cmd);
	}
}

static void ctl_read(struct vmm *v, struct ctl *cl)
{
	ssize_t n = recv(cl->fd, cl->line + cl->len, sizeof(cl->line) - 1 - cl->len, MSG_DONTWAIT);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		ctl_close(cl);
		return;
	}
	if (v->fk.fail & FAIL_HANG_CONTROL)
		return; /* taken, never answered */
	cl->len += (size_t)n;
	cl->line[cl->len] = '\0';
	while (cl->fd >= 0 && !v->quit && (nl = strchr(cl->line, '\n'))) {
		*nl = '\0';
		if (nl > cl->line && nl[-1] == '\r')
			nl[-1] = '\0';
		ctl_command(v, cl, cl->line);
		if (cl->fd < 0) /* the reply did not go */
			return;
		cl->len -= (size_t)(nl + 1 - cl->line);
		memmove(cl->line, nl + 1, cl->len + 1);
	}
	if (cl->len == sizeof(cl->line) - 1) {
		ctl_reply(cl, "ERR %s\n", "line too long");
		if (cl->fd >= 0)
			ctl_close(cl);
	}
}

static void ctl_accept(struct vmm *v)
{
	int fd;

	while ((fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		size_t i;

		for (i = 0; i < MAX_CTL && v->ctl[i].fd >= 0; i++)
			;
		if (i == MAX_CTL) {
			close(fd);
			continue;
		}
		v->ctl[i].fd = fd;
		v->ctl[i].len = 0;
	}
}

static void dial(struct vmm *v)
{
	struct fake *fk = &v->fk;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && !connect(fd, (struct sockaddr *)&v->dial_addr, sizeof(v->dial_addr))) {
		fk->g.dials++;
		fk->conn = conn_create(fk, fd);
		v->connected_at = mono_ms();
		fprintf(stderr, "fake-agent: dialled %s (dial %u)\n", v->dial_addr.sun_path,
		        fk->g.dials);
		return;
	}
	if (fd >= 0)
		close(fd);
	v->next_dial = mono_ms() + DIAL_RETRY_MS;
}

/* What the guest does while it runs: timers, output, dialling home. */
static void guest_run(struct vmm *v)
{
	struct fake *fk = &v->fk;

	if (fk->conn)
		conn_tick(fk->conn);
	jobs_tick(fk);
	if (fk->conn && conn_dead(fk->conn)) {
		conn_free(fk->conn);
		fk->conn = NULL;
		/* Again at once; a host that closes at once is not redialled in a tight loop. */
		v->next_dial = mono_ms();
		if (v->next_dial - v->connected_at < SHORT_CONN_MS)
			v->next_dial += DIAL_RETRY_MS;
	}
	if (!fk->conn && v->can_dial && mono_ms() >= v->next_dial)
		dial(v);
}

/* Lowers *t, ms from now or -1, to reach at (-1: never) from now. */
static void earliest(int64_t *t, int64_t at, int64_t now)
{
	int64_t d = at > now ? at - now : 0;

	if (at >= 0 && (*t < 0 || d < *t))
		*t = d;
}

/* ms until the guest has something to do, or -1. */
static int guest_timeout(const struct vmm *v)
{
	const struct fake *fk = &v->fk;
	int64_t t = -1, now = guest_ms(fk);

	if (fk->conn)
		earliest(&t, conn_deadline(fk->conn), now);
	earliest(&t, jobs_deadline(fk), now);
	if (!fk->conn && v->can_dial)
		earliest(&t, v->next_dial, mono_ms());
	return t > INT_MAX ? INT_MAX : (int)t;
}

static int vmm_run(struct vmm *v)
{
	struct pollfd pfd[2 + MAX_CTL];
	int slot[MAX_CTL], conn_slot, n;

	while (!v->quit) {
		if (!v->fk.paused)
			guest_run(v);
		n = 0;
		conn_slot = -1;
		pfd[n++] = (struct pollfd){.fd = v->listen_fd, .events = POLLIN};
		for (int i = 0; i < MAX_CTL; i++) {
			slot[i] = v->ctl[i].fd >= 0 ? n : -1;
			if (v->ctl[i].fd >= 0)
				pfd[n++] = (struct pollfd){.fd = v->ctl[i].fd, .events = POLLIN};
		}
		if (!v->fk.paused && v->fk.conn) {
			conn_slot = n;
			pfd[n++] = (struct pollfd){.fd = conn_fd(v->fk.conn),
			                           .events = conn_poll_events(v->fk.conn)};
		}
		if (poll(pfd, (nfds_t)n, v->fk.paused ? -1 : guest_timeout(v)) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "husk-vmm: poll: %s\n", strerror(errno));
			return 1;
		}
		for (int i = 0; i < MAX_CTL && !v->quit; i++)
			if (slot[i] >= 0 && pfd[slot[i]].revents)
				ctl_read(v, &v->ctl[i]);
		if (pfd[0].revents & POLLIN)
			ctl_accept(v);
		if (conn_slot >= 0 && pfd[conn_slot].revents && !v->fk.paused && !v->quit)
			conn_io(v->fk.conn, pfd[conn_slot].revents);
	}
	return 0;
}

static void dial_setup(struct vmm *v)
{
	const struct guest *g = &v->fk.g;
	int n;

	if (!v->o.vsock || !g->dial_port || (v->fk.fail & FAIL_NODIAL))
		return;
	v->dial_addr.sun_family = AF_UNIX;
	n = snprintf(v->dial_addr.sun_path, sizeof(v->dial_addr.sun_path), "%s_%u", v->o.vsock,
	             g->dial_port);
	if (n < 0 || (size_t)n >= sizeof(v->dial_addr.sun_path))
		fprintf(stderr, "fake-agent: cannot dial: %s_%u is too long\n", v->o.vsock,
		        g->dial_port);
	else
		v->can_dial = true;
}

/*
 * FAKE_VMM_FDS=1 (the manager tests): a descriptor of huskd's beyond stdio
 * and --key-fd reached the VMM; as husk-vmm it would hold it for its life.
 */
static int inherited_fd(int key_fd)
{
	DIR *d = getenv("FAKE_VMM_FDS") ? opendir("/proc/self/fd") : NULL;
	struct dirent *e;
	int fd, found = -1;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && (fd = atoi(e->d_name)) > 2 && fd != key_fd &&
		    fd != dirfd(d))
			found = fd;
	if (d)
		closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	struct vmm v = {.listen_fd = -1};
	static struct fake_keys keys; /* static: its keys stay reachable until exit */
	int status;

	keys.disks.v = keys.disk;
	if (parse_fail_modes(getenv("FAKE_VMM"), &v.fk.fail))
		return EXIT_USAGE;
	for (int i = 0; i < MAX_CTL; i++)
		v.ctl[i].fd = -1;
	status = parse_args(argc, argv, &v.o);
	if (status)
		return status;
	if (v.fk.fail & FAIL_CRASH_AT_START) {
		/* What a crashing guest leaves: its panic on the console. */
		FILE *f = v.o.console && strcmp(v.o.console, "stdio") ? fopen(v.o.console, "we")
		                                                      : NULL;

		if (f) {
			fputs("fake guest: Kernel panic - not syncing: crash-at-start\n", f);
			fclose(f);
		}
		fprintf(stderr, "fake: crashing at start\n");
		return 3;
	}
	if ((status = inherited_fd(v.o.key_fd)) >= 0) {
		fprintf(stderr, "fake: descriptor %d was inherited from huskd\n", status);
		return 1;
	}
	if (v.o.key_fd >= 0 && fake_keys_read(v.o.key_fd, &keys)) {
		fprintf(stderr,
		        "husk-vmm: --key-fd %d: a line is not 64 hex digits or 'disk HEX /PATH'\n",
		        v.o.key_fd);
		return EXIT_USAGE;
	}
	memcpy(v.fk.key, keys.snap, sizeof(v.fk.key));
	/* What the manager's tests look for in vmm.log: how huskd gave each disk key. */
	if (keys.disks.n)
		fprintf(stderr, "fake-vmm: disk keys: %u passphrases, %u master keys\n",
		        keys.disks.n - keys.masters, keys.masters);
	if (v.o.disk && fake_disk_check(v.o.disk, &keys))
		return 1;
	if (v.o.extract)
		return extract(&v.o);
	signal(SIGPIPE, SIG_IGN);
	status = guest_boot(&v);
	if (!status)
		status = console_write(&v);
	if (!status && v.o.control)
		status = control_listen(&v);
	if (status)
		goto out;
	dial_setup(&v);
	/* A resume made ahead: the guest (its dialling too) waits for the control socket. */
	if (v.o.held) {
		v.fk.paused = true;
		v.fk.paused_at = mono_ms();
		fprintf(stderr, "fake-vmm: restored and held\n");
	}
	if (v.o.restore)
		fprintf(stderr, "fake-vmm: restored %s: boot_id %s, %u dials before\n", v.o.restore,
		        v.fk.g.boot_id, v.fk.g.dials);
	else
		fprintf(stderr, "fake-vmm: booting %s: boot_id %s, %llu MiB, %u vCPUs, disk %s\n",
		        v.o.kernel, v.fk.g.boot_id, (unsigned long long)(v.fk.g.mem >> 20),
		        v.fk.g.vcpus, v.o.disk ? v.o.disk : "none");
	if (v.can_dial)
		fprintf(stderr, "fake-agent: dialling %s\n", v.dial_addr.sun_path);
	status = vmm_run(&v);
	if (!status)
		fprintf(stderr, "fake-vmm: stopped by the control socket\n");
out:
	conn_free(v.fk.conn);
	jobs_free(&v.fk);
	guest_free(&v.fk.g);
	for (int i = 0; i < MAX_CTL; i++)
		if (v.ctl[i].fd >= 0)
			close(v.ctl[i].fd);
	if (v.listen_fd >= 0) {
		close(v.listen_fd);
		unlink(v.o.control);
	}
	return status;
}
