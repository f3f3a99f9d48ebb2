// SPDX-License-Identifier: MIT
/*
 * fake-check's means: fake-vmm processes, its control socket, and the
 * agent's side of the connection it dials, with every wait bounded.
 */
#include "check_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *fake, *dir;
int failed;
/* Fakes not yet reaped: killed at exit, so a failed run leaves none behind. */
static pid_t children[MAX_CHILDREN];
static size_t nr_children;

static void forget(pid_t pid)
{
	for (size_t i = 0; i < nr_children; i++)
		if (children[i] == pid)
			children[i] = children[--nr_children];
}

void kill_children(void)
{
	while (nr_children) {
		pid_t pid = children[--nr_children];

		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s fakes/%s", ok ? "PASS" : "FAIL", name);
	if (!ok) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	failed |= !ok;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *path(const char *name)
{
	static char bufs[8][4096];
	static int next;
	char *p = bufs[next++ % 8];

	snprintf(p, sizeof(bufs[0]), "%s/%s", dir, name);
	return p;
}

pid_t spawn(const char *fail, const char *log, ...)
{
	const char *argv[32] = {fake};
	va_list ap;
	int a = 1, fd;
	pid_t pid;

	va_start(ap, log);
	while (a < 31 && (argv[a] = va_arg(ap, const char *)))
		a++;
	va_end(ap);
	argv[a] = NULL;
	pid = fork();
	if (pid > 0 && nr_children < MAX_CHILDREN)
		children[nr_children++] = pid;
	if (pid)
		return pid;
	fd = open(path(log), O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	if (fail)
		setenv("FAKE_VMM", fail, 1);
	else
		unsetenv("FAKE_VMM");
	execv(fake, (char *const *)argv);
	_exit(127);
}

int wait_exit(pid_t pid, int ms)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), st;
	struct pollfd p = {.fd = pidfd, .events = POLLIN};

	if (pidfd < 0 || poll(&p, 1, ms) != 1) {
		if (pidfd >= 0)
			close(pidfd);
		return -1;
	}
	close(pidfd);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	forget(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int unix_socket(const char *p, struct sockaddr_un *a)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	snprintf(a->sun_path, sizeof(a->sun_path), "%s", p);
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

int ctl_connect(const char *p)
{
	struct sockaddr_un a;
	int64_t end = now_ms() + WAIT_MS;

	do {
		int fd = unix_socket(p, &a);

		if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return fd;
		if (fd >= 0)
			close(fd);
		poll(NULL, 0, 10);
	} while (now_ms() < end);
	return -1;
}

const char *ctl(int fd, const char *cmd, int ms)
{
	static char line[1024];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t len = 0;
	char out[1024];
	int n = snprintf(out, sizeof(out), "%s\n", cmd);

	line[0] = '\0';
	if (fd < 0 || send(fd, out, (size_t)n, MSG_NOSIGNAL) != n)
		return line;
	while (len < sizeof(line) - 1 && poll(&p, 1, ms) == 1) {
		ssize_t r = recv(fd, line + len, 1, 0);

		if (r <= 0 || line[len] == '\n')
			break;
		len++;
	}
	line[len] = '\0';
	return line;
}

int listen_at(const char *p)
{
	struct sockaddr_un a;
	int fd = unix_socket(p, &a);

	unlink(p);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4)) {
		printf("FAIL fakes/setup: cannot listen on %s: %s\n", p, strerror(errno));
		exit(1);
	}
	return fd;
}

struct peer *accept_peer(int lfd, int ms)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	struct peer *pr;
	int fd;

	if (poll(&p, 1, ms) != 1 || (fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return NULL;
	pr = calloc(1, sizeof(*pr));
	pr->fd = fd;
	frame_reader_init(&pr->rd, FRAME_MAX_PAYLOAD);
	return pr;
}

void peer_close(struct peer *pr)
{
	if (!pr)
		return;
	close(pr->fd);
	frame_reader_free(&pr->rd);
	free(pr);
}

int recv_frame(struct peer *pr, struct frame *f, int ms)
{
	struct pollfd p = {.fd = pr->fd, .events = POLLIN};

	for (;;) {
		while (pr->off < pr->len) {
			size_t used;
			enum frame_status st = frame_reader_feed(&pr->rd, pr->buf + pr->off,
			                                         pr->len - pr->off, &used, f);

			pr->off += used;
			if (st == FRAME_OK)
				return 1;
			if (st != FRAME_NEED_MORE)
				return -1;
		}
		if (poll(&p, 1, ms) != 1)
			return 0;
		ssize_t n = recv(pr->fd, pr->buf, sizeof(pr->buf), 0);

		if (n <= 0)
			return -1;
		pr->off = 0;
		pr->len = (size_t)n;
	}
}

void send_frame(struct peer *pr, uint8_t type, uint8_t flags, uint32_t id, const char *p, size_t n)
{
	uint8_t hdr[FRAME_HDR_SIZE];

	frame_encode_hdr(hdr, type, flags, id, (uint32_t)n);
	if (send(pr->fd, hdr, sizeof(hdr), MSG_NOSIGNAL) != sizeof(hdr) ||
	    (n && send(pr->fd, p, n, MSG_NOSIGNAL) != (ssize_t)n))
		printf("note: send to the fake failed: %s\n", strerror(errno));
}

void request(struct peer *pr, uint32_t id, const char *json)
{
	send_frame(pr, FRAME_REQUEST, 0, id, json, strlen(json));
}

void collect(struct peer *pr, uint32_t id, int ms, struct reply *r)
{
	struct frame f;

	memset(r, 0, sizeof(*r));
	while (recv_frame(pr, &f, ms) == 1) {
		if (f.id != id)
			continue;
		if (f.type == FRAME_RESULT || f.type == FRAME_ERROR) {
			r->type = f.type;
			r->j = json_loadb((const char *)f.payload, f.len, 0, NULL);
			return;
		}
		if (f.len > r->max_frame)
			r->max_frame = f.len;
		if (f.type == FRAME_STDERR) {
			size_t n = sizeof(r->err) - 1 - r->err_len < f.len
			                   ? sizeof(r->err) - 1 - r->err_len
			                   : f.len;
			memcpy(r->err + r->err_len, f.payload, n);
			r->err_len += n;
		} else {
			size_t n = sizeof(r->out) - 1 - r->out_len < f.len
			                   ? sizeof(r->out) - 1 - r->out_len
			                   : f.len;
			memcpy(r->out + r->out_len, f.payload, n);
			r->out_len += n;
			r->out_total += f.len;
		}
	}
}

void call(struct peer *pr, uint32_t id, const char *json, struct reply *r)
{
	request(pr, id, json);
	collect(pr, id, WAIT_MS, r);
}

json_int_t jint(json_t *j, const char *key)
{
	return json_integer_value(json_object_get(j, key));
}

const char *jstr(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));

	return s ? s : "";
}

void done(struct reply *r)
{
	json_decref(r->j);
	r->j = NULL;
}

const char *hello(struct peer *pr, unsigned dial, const char *name)
{
	static char boot[64];
	struct frame f;
	int got = pr ? recv_frame(pr, &f, WAIT_MS) : 0;
	json_t *j = got == 1 ? json_loadb((const char *)f.payload, f.len, 0, NULL) : NULL;
	const char *id = jstr(j, "boot_id");

	check(got == 1 && f.type == FRAME_HELLO && f.id == 0 && jint(j, "protocol") == 1 &&
	              !strcmp(jstr(j, "agent"), "fake-agent") && jint(j, "dial") == dial &&
	              strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32,
	      name, "no HELLO of dial %u (got %d: %.*s)", dial, got,
	      got == 1 ? (int)(f.len < 200 ? f.len : 200) : 0,
	      got == 1 ? (const char *)f.payload : "");
	snprintf(boot, sizeof(boot), "%s", id);
	json_decref(j);
	return boot;
}

int snap_ok(const char *p)
{
	char head[32] = "";
	FILE *f = fopen(p, "r");

	if (f) {
		if (!fgets(head, sizeof(head), f))
			head[0] = '\0';
		fclose(f);
	}
	return !strcmp(head, "husk-fake-snapshot 1\n");
}

const char *last_line(const char *log)
{
	static char line[1024];
	FILE *f = fopen(path(log), "r");

	line[0] = '\0';
	while (f && fgets(line, sizeof(line), f))
		;
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return line;
}
