// SPDX-License-Identifier: MIT
/*
 * Dialling home (PROTOCOL.md): the agent connects out to the host, so the
 * host learns that the guest is up from the connection itself, its HELLO,
 * instead of polling port 52, and keeps it as its session. Whenever that
 * connection ends (the host closed it, its daemon restarted, a snapshot
 * restore reset every vsock connection) the agent dials again: at once, then
 * with a doubling backoff while dials fail. Nothing here blocks the loop:
 * connect() is non-blocking and the backoff is a timerfd on the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "agent.h"
#include "evloop.h"

#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
/*
 * A connection that ends sooner than this, the second in a row or later,
 * counts as a failed dial, so a host that accepts and closes at once is
 * redialled with the backoff, not in a tight loop.
 */
#define SHORT_CONN_MS 1000
/* A host that is not listening is normal while it restarts: stay quiet. */
#define LOG_INTERVAL_MS 60000

struct dialer {
	struct agent *a;
	char spec[128]; /* for log lines */
	union {
		struct sockaddr sa;
		struct sockaddr_un un;
		struct sockaddr_vm vm;
	} addr;
	socklen_t addr_len;
	int fd;                /* the socket being connected, or -1 */
	int timer_fd;          /* fires the next dial after a backoff */
	struct conn *conn;     /* the dialled connection while it lasts */
	uint64_t connected_ms; /* when conn connected */
	unsigned backoff_ms;   /* the wait before the next dial after a failure */
	unsigned dials;        /* dials that connected: the HELLO's "dial" */
	unsigned failed;       /* failed dials since the last one that connected */
	unsigned short_conns;  /* connections in a row that ended within SHORT_CONN_MS */
	bool logged;           /* a failure was ever logged ... */
	uint64_t logged_ms;    /* ... last at this time */
	bool said_failed;      /* a failure was logged since the last connect */
};

static void dial_now(struct dialer *d);

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Decimal digits below 2^32 at s; returns where they end, or NULL. */
static const char *parse_u32(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return NULL;
	}
	if (p == s)
		return NULL;
	*out = (uint32_t)v;
	return p;
}

static int dial_parse(struct dialer *d, const char *spec)
{
	uint32_t cid, port;
	const char *p;

	if (!strncmp(spec, "unix:", 5)) {
		p = spec + 5;
		if (!*p || strlen(p) >= sizeof(d->addr.un.sun_path))
			return -EINVAL;
		d->addr.un.sun_family = AF_UNIX;
		strcpy(d->addr.un.sun_path, p);
		d->addr_len = sizeof(d->addr.un);
		return 0;
	}
	if (strncmp(spec, "vsock:", 6))
		return -EINVAL;
	p = parse_u32(spec + 6, &cid);
	if (!p || *p != ':')
		return -EINVAL;
	p = parse_u32(p + 1, &port);
	if (!p || *p || port == VMADDR_PORT_ANY)
		return -EINVAL;
	d->addr.vm.svm_family = AF_VSOCK;
	d->addr.vm.svm_cid = cid;
	d->addr.vm.svm_port = port;
	d->addr_len = sizeof(d->addr.vm);
	return 0;
}

/* After a failure: wait the backoff, doubled for the next one. */
static void dial_backoff(struct dialer *d)
{
	/* backoff_ms is 10 at least: the timer is never disarmed by a zero. */
	struct itimerspec its = {.it_value = {.tv_sec = d->backoff_ms / 1000,
	                                      .tv_nsec = (long)(d->backoff_ms % 1000) * 1000000}};

	/* Cannot fail with a valid timerfd and value; if it did, dialling would stop. */
	if (timerfd_settime(d->timer_fd, 0, &its, NULL) < 0)
		fprintf(stderr, "husk-agent: dial %s: cannot arm the timer: %s\n", d->spec,
		        strerror(errno));
	d->backoff_ms = d->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d->backoff_ms * 2;
}

static void dial_failed(struct dialer *d, int err)
{
	uint64_t now = now_ms();

	d->failed++;
	if (!d->logged || now - d->logged_ms >= LOG_INTERVAL_MS) {
		fprintf(stderr,
		        "husk-agent: dial %s: %s (%u failed so far); retrying, at most one line a "
		        "minute\n",
		        d->spec, strerror(-err), d->failed);
		d->logged = true;
		d->logged_ms = now;
		d->said_failed = true;
	}
	dial_backoff(d);
}

/* The kernel's boot id, without its newline; NULL if unknown. */
static const char *boot_id(char *buf, size_t len)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? buf : NULL;
}

static void dial_conn_closed(void *arg)
{
	struct dialer *d = arg;

	d->conn = NULL;
	if (now_ms() - d->connected_ms >= SHORT_CONN_MS) {
		d->backoff_ms = BACKOFF_MIN_MS;
		d->short_conns = 0;
	}
	/*
	 * The first short one is redialled at once too: a restored guest's
	 * connection is one (its clock restarts where the snapshot stopped it, a
	 * moment after the dial), and the backoff was 10 of the ~65 ms a
	 * template's child took to dial in, nested. conn_close() calls this
	 * last, so a new connection is safe here.
	 */
	if (d->short_conns++ == 0)
		dial_now(d);
	else
		dial_backoff(d);
}

/* d->fd is connected: serve it like an accepted connection, after HELLO. */
static void dial_connected(struct dialer *d)
{
	char id[64];
	struct conn *c;
	int ret = conn_adopt(d->a, d->fd, &c);

	d->fd = -1;
	if (ret) {
		dial_failed(d, ret);
		return;
	}
	d->conn = c;
	d->connected_ms = now_ms();
	d->dials++;
	conn_on_close(c, dial_conn_closed, d);
	if (d->dials == 1 || d->said_failed)
		fprintf(stderr, "husk-agent: dialled %s (dial %u, after %u failed)\n", d->spec,
		        d->dials, d->failed);
	d->failed = 0;
	d->said_failed = false;
	/* A send that fails marks c dead; its close then redials. */
	conn_send_json(c, FRAME_HELLO, 0,
	               json_pack("{s:i, s:s, s:I, s:s?}", "protocol", PROTO_VERSION, "agent",
	                         "husk-agent " AGENT_VERSION, "dial", (json_int_t)d->dials,
	                         "boot_id", boot_id(id, sizeof(id))));
}

/* The connect in progress finished, one way or the other. */
static void dial_event(void *ctx, uint32_t events)
{
	struct dialer *d = ctx;
	struct sockaddr_storage peer;
	socklen_t len = sizeof(int), plen = sizeof(peer);
	int err = 0;

	(void)events;
	evloop_del(d->a->loop, d->fd);
	if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	/* No error but no peer either: it ended before we looked. */
	if (!err && getpeername(d->fd, (struct sockaddr *)&peer, &plen) < 0)
		err = errno;
	if (err) {
		close(d->fd);
		d->fd = -1;
		dial_failed(d, -err);
		return;
	}
	dial_connected(d);
}

static void dial_now(struct dialer *d)
{
	int fd = socket(d->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int ret;

	if (fd < 0) {
		dial_failed(d, -errno);
		return;
	}
	d->fd = fd;
	if (connect(fd, &d->addr.sa, d->addr_len) == 0) {
		dial_connected(d);
		return;
	}
	/* vsock completes later; a Unix socket at once or never (EAGAIN: backlog full). */
	ret = errno == EINPROGRESS ? evloop_add(d->a->loop, fd, EPOLLOUT, dial_event, d) : -errno;
	if (ret) {
		close(fd);
		d->fd = -1;
		dial_failed(d, ret);
	}
}

static void timer_event(void *ctx, uint32_t events)
{
	struct dialer *d = ctx;
	uint64_t expirations;

	(void)events;
	if (read(d->timer_fd, &expirations, sizeof(expirations)) < 0)
		return;
	if (d->fd < 0 && !d->conn)
		dial_now(d);
}

int agent_dial(struct agent *a, const char *spec)
{
	struct dialer *d;
	int ret;

	if (a->dialer)
		return -EEXIST;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->a = a;
	d->fd = -1;
	d->backoff_ms = BACKOFF_MIN_MS;
	snprintf(d->spec, sizeof(d->spec), "%s", spec);
	ret = dial_parse(d, spec);
	if (ret)
		goto err_free;
	d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->timer_fd < 0) {
		ret = -errno;
		goto err_free;
	}
	ret = evloop_add(a->loop, d->timer_fd, EPOLLIN, timer_event, d);
	if (ret)
		goto err_timer;
	a->dialer = d;
	dial_now(d);
	return 0;

err_timer:
	close(d->timer_fd);
err_free:
	free(d);
	return ret;
}

void dial_destroy(struct agent *a)
{
	struct dialer *d = a->dialer;

	if (!d)
		return;
	if (d->conn)
		conn_on_close(d->conn, NULL, NULL);
	if (d->fd >= 0) {
		evloop_del(a->loop, d->fd);
		close(d->fd);
	}
	evloop_del(a->loop, d->timer_fd);
	close(d->timer_fd);
	free(d);
	a->dialer = NULL;
}
