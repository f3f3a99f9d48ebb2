// SPDX-License-Identifier: MIT
/*
 * The libuv side of the HTTP server: TCP and Unix-socket listeners, and per
 * connection one stream and one timer that drive an http_conn (the
 * socket-free core in http_conn.c) through its transport ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http_conn.h"
#include "http_tls.h"
#include "http_tunnel.h"

struct srv_conn {
	struct http_conn core; /* first: the ops get &core */
	struct http_server *srv;
	union http_uv_stream h;
	uv_timer_t timer;
	uv_shutdown_t shut;
	bool shut_started;
	int open_handles;
	struct http_tls *tls; /* NULL: plain HTTP */
	struct srv_conn *prev, *next;
};

struct http_server {
	uv_loop_t *loop;
	struct http_limits lim;
	unsigned max_conns;
	void (*refused)(unsigned count, unsigned limit);
	unsigned nrefused;   /* refused since the last report */
	uint64_t refused_ms; /* when that report was */
	http_handler handler;
	void *ctx;
	uv_tcp_t tcp;
	uv_pipe_t pipe;
	bool has_tcp, has_pipe, pipe_bound, stopping;
	int port;
	char *unix_path;
	struct srv_conn *conns;
	unsigned nconns;
	SSL_CTX *tls;     /* NULL: plain HTTP */
	int open_handles; /* listeners and connections not closed yet */
	/* Every read lands here and is copied or parsed at once: one buffer serves all. */
	char rbuf[64 * 1024];
};

struct wreq {
	uv_write_t req;
	char *buf;
	size_t report; /* bytes of the core's to report sent (TLS: its plaintext; 0: none) */
};

static void server_free(struct http_server *s)
{
	SSL_CTX_free(s->tls);
	free(s->unix_path);
	free(s);
}

static void server_handle_closed(struct http_server *s)
{
	if (--s->open_handles == 0 && s->stopping)
		server_free(s);
}

static void on_write(uv_write_t *w, int status)
{
	struct wreq *wr = (struct wreq *)w;
	struct srv_conn *sc = w->handle->data;
	size_t report = wr->report;

	free(wr->buf);
	free(wr);
	if (report)
		http_conn_sent(&sc->core, report, status);
}

/* buf (malloc'd, ownership passes) to the socket; report: see struct wreq. */
static int raw_write(struct srv_conn *sc, char *buf, size_t len, size_t report)
{
	struct wreq *wr = malloc(sizeof(*wr));
	uv_buf_t b = {.base = buf, .len = len};
	int err;

	if (!wr) {
		free(buf);
		return -ENOMEM;
	}
	wr->buf = buf;
	wr->report = report;
	err = uv_write(&wr->req, &sc->h.stream, &b, 1, on_write);
	if (err) {
		free(buf);
		free(wr);
	}
	return err;
}

static int tls_send(void *arg, char *buf, size_t len, size_t plain_len)
{
	return raw_write(arg, buf, len, plain_len);
}

static void tls_plain(void *arg, const void *data, size_t len)
{
	struct srv_conn *sc = arg;

	http_conn_feed(&sc->core, data, len);
}

static struct http_tls_io tls_io(struct srv_conn *sc)
{
	return (struct http_tls_io){.arg = sc, .plain = tls_plain, .send = tls_send};
}

static int t_write(struct http_conn *c, char *buf, size_t len)
{
	struct srv_conn *sc = (struct srv_conn *)c;
	struct http_tls_io io;
	int err;

	if (!sc->tls)
		return raw_write(sc, buf, len, len);
	io = tls_io(sc);
	err = http_tls_write(sc->tls, buf, len, &io);
	free(buf);
	return err;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct srv_conn *sc = h->data;

	(void)suggested;
	buf->base = sc->srv->rbuf;
	buf->len = sizeof(sc->srv->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct srv_conn *sc = s->data;

	if (n > 0 && sc->tls) {
		struct http_tls_io io = tls_io(sc);
		int err = http_tls_input(sc->tls, buf->base, (size_t)n, &io);

		if (err) { /* a TLS error, or the peer's close_notify */
			uv_read_stop(s);
			http_conn_eof(&sc->core, err == -ECONNRESET ? 0 : err);
		}
	} else if (n > 0) {
		http_conn_feed(&sc->core, buf->base, (size_t)n);
	} else if (n < 0) {
		uv_read_stop(s);
		http_conn_eof(&sc->core, n == UV_EOF ? 0 : (int)n);
	}
}

static void t_read_pause(struct http_conn *c, bool paused)
{
	struct srv_conn *sc = (struct srv_conn *)c;

	if (paused)
		uv_read_stop(&sc->h.stream);
	else if (uv_read_start(&sc->h.stream, on_alloc, on_read) < 0)
		conn_request_abort(c);
}

static void on_timer(uv_timer_t *t)
{
	struct srv_conn *sc = t->data;

	http_conn_timer(&sc->core);
}

static void t_timer(struct http_conn *c, int ms)
{
	struct srv_conn *sc = (struct srv_conn *)c;

	if (ms < 0)
		uv_timer_stop(&sc->timer);
	else
		uv_timer_start(&sc->timer, on_timer, (uint64_t)ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)req;
	(void)status; /* a failed half-close ends in the linger or stall timeout */
}

static void t_shutdown(struct http_conn *c)
{
	struct srv_conn *sc = (struct srv_conn *)c;

	if (sc->shut_started)
		return;
	sc->shut_started = true;
	if (sc->tls) {
		struct http_tls_io io = tls_io(sc);

		http_tls_shutdown(sc->tls, &io); /* close_notify goes before the FIN */
	}
	if (uv_shutdown(&sc->shut, &sc->h.stream, on_shutdown) < 0)
		conn_request_abort(c);
}

static void on_conn_closed(uv_handle_t *h)
{
	struct srv_conn *sc = h->data;
	struct http_server *s = sc->srv;

	if (--sc->open_handles)
		return;
	http_conn_release(&sc->core);
	http_tls_free(sc->tls);
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		s->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	s->nconns--;
	free(sc);
	server_handle_closed(s);
}

static void t_close(struct http_conn *c)
{
	struct srv_conn *sc = (struct srv_conn *)c;

	sc->open_handles = 2;
	uv_close(&sc->h.handle, on_conn_closed);
	uv_close((uv_handle_t *)&sc->timer, on_conn_closed);
}

static int t_dup_fd(struct http_conn *c)
{
	struct srv_conn *sc = (struct srv_conn *)c;
	uv_os_fd_t fd;
	int d;

	/* The socket carries TLS the taker would not speak. */
	if (sc->tls)
		return -EOPNOTSUPP;
	if (uv_fileno(&sc->h.handle, &fd) < 0)
		return -EBADF;
	d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return d < 0 ? -errno : d;
}

static const struct http_transport_ops uv_ops = {
	.dup_fd = t_dup_fd,
	.write = t_write,
	.read_pause = t_read_pause,
	.timer = t_timer,
	.shutdown = t_shutdown,
	.close = t_close,
};

static void free_handle_data(uv_handle_t *h)
{
	free(h->data);
}

static void peer_name(struct srv_conn *sc)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sc->h.handle.type != UV_TCP ||
	    uv_tcp_getpeername(&sc->h.tcp, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(sc->core.peer, sizeof(sc->core.peer), "unix");
		return;
	}
	if (ss.ss_family == AF_INET6) {
		uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
		snprintf(sc->core.peer, sizeof(sc->core.peer), "[%s]:%d", ip,
		         ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
	} else {
		uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
		snprintf(sc->core.peer, sizeof(sc->core.peer), "%s:%d", ip,
		         ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct http_server *s = listener->data;
	struct srv_conn *sc;

	if (status < 0)
		return;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return;
	sc->srv = s;
	sc->h.handle.data = sc;
	if (listener == (uv_stream_t *)&s->tcp)
		uv_tcp_init(s->loop, &sc->h.tcp);
	else
		uv_pipe_init(s->loop, &sc->h.pipe, 0);
	sc->h.handle.data = sc;
	/* Over the limit (or stopping): accepted and closed at once. */
	if (uv_accept(listener, &sc->h.stream) < 0 || s->nconns >= s->max_conns || s->stopping) {
		uv_close(&sc->h.handle, free_handle_data);
		/* Refused without a word to the client: the operator hears of it. */
		if (s->nconns >= s->max_conns && s->refused && !s->stopping) {
			s->nrefused++;
			if (uv_now(s->loop) - s->refused_ms >= 10000 || !s->refused_ms) {
				s->refused(s->nrefused, s->max_conns);
				s->nrefused = 0;
				s->refused_ms = uv_now(s->loop);
			}
		}
		return;
	}
	if (s->tls && !(sc->tls = http_tls_new(s->tls))) {
		uv_close(&sc->h.handle, free_handle_data);
		return;
	}
	uv_timer_init(s->loop, &sc->timer);
	sc->timer.data = sc;
	if (sc->h.handle.type == UV_TCP)
		uv_tcp_nodelay(&sc->h.tcp, 1); /* small stream chunks go out at once */
	peer_name(sc);
	sc->next = s->conns;
	if (s->conns)
		s->conns->prev = sc;
	s->conns = sc;
	s->nconns++;
	s->open_handles++;
	http_conn_init(&sc->core, &uv_ops, &s->lim, s->handler, s->ctx);
	if (uv_read_start(&sc->h.stream, on_alloc, on_read) < 0)
		http_conn_abort(&sc->core);
}

static void on_listener_closed(uv_handle_t *h)
{
	server_handle_closed(h->data);
}

/* Removes a stale socket file at path (nobody accepts on it); a live one is -EADDRINUSE. */
static int unix_prepare(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc, e;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	strcpy(a.sun_path, path);
	rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	e = errno;
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	if (e != ECONNREFUSED && e != ENOENT)
		return -e;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int listen_tcp(struct http_server *s, const char *host, int port)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), err;

	if (strchr(host, ':'))
		err = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
	else
		err = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
	if (err < 0 || port < 0 || port > 65535)
		return -EINVAL;
	uv_tcp_init(s->loop, &s->tcp);
	s->tcp.data = s;
	s->has_tcp = true;
	s->open_handles++;
	err = uv_tcp_bind(&s->tcp, (struct sockaddr *)&ss, 0);
	if (!err)
		err = uv_listen((uv_stream_t *)&s->tcp, SOMAXCONN, on_connection);
	if (!err)
		err = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
	if (err)
		return err;
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                         : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

static int listen_unix(struct http_server *s, const char *path)
{
	int err = unix_prepare(path);

	if (err)
		return err;
	s->unix_path = strdup(path);
	if (!s->unix_path)
		return -ENOMEM;
	uv_pipe_init(s->loop, &s->pipe, 0);
	s->pipe.data = s;
	s->has_pipe = true;
	s->open_handles++;
	err = uv_pipe_bind(&s->pipe, path);
	if (err)
		return err;
	s->pipe_bound = true;
	err = uv_listen((uv_stream_t *)&s->pipe, SOMAXCONN, on_connection);
	return err;
}

static void close_listeners(struct http_server *s)
{
	if (s->has_tcp)
		uv_close((uv_handle_t *)&s->tcp, on_listener_closed);
	if (s->has_pipe) {
		uv_close((uv_handle_t *)&s->pipe, on_listener_closed);
		if (s->pipe_bound)
			unlink(s->unix_path);
	}
}

int http_server_start(uv_loop_t *loop, const struct http_config *cfg, http_handler handler,
                      void *ctx, struct http_server **out)
{
	struct http_server *s;
	int err = -EINVAL;

	if (!cfg->tcp_host && !cfg->unix_path)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->handler = handler;
	s->ctx = ctx;
	s->port = -1;
	http_limits_init(&s->lim, cfg);
	s->max_conns = cfg->max_connections ? cfg->max_connections : 1024;
	s->refused = cfg->refused;
	/* The parser's own head limit must not undercut ours (it is process-wide). */
	if (s->lim.max_header_bytes + 4096 > HTTP_MAX_HEADER_SIZE)
		http_parser_set_max_header_size((uint32_t)(s->lim.max_header_bytes + 4096));
	/* A client gone mid-write must give EPIPE, not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	if (cfg->tls_cert) {
		char why[256];

		err = http_tls_ctx_new(cfg->tls_cert, cfg->tls_key, &s->tls, why, sizeof(why));
		if (err) {
			free(s);
			return err;
		}
	}

	if (cfg->tcp_host) {
		err = listen_tcp(s, cfg->tcp_host, cfg->tcp_port);
		if (err)
			goto err_close;
	}
	if (cfg->unix_path) {
		err = listen_unix(s, cfg->unix_path);
		if (err)
			goto err_close;
	}
	*out = s;
	return 0;

err_close:
	/* Handles close asynchronously; the last one frees s. */
	s->stopping = true;
	close_listeners(s);
	if (!s->open_handles)
		server_free(s);
	return err;
}

int http_server_port(const struct http_server *s)
{
	return s->has_tcp ? s->port : -1;
}

void http_server_stop(struct http_server *s)
{
	if (s->stopping)
		return;
	s->stopping = true;
	close_listeners(s);
	for (struct srv_conn *sc = s->conns; sc; sc = sc->next)
		http_conn_abort(&sc->core);
}

unsigned http_server_connections(const struct http_server *s)
{
	return s->nconns;
}
