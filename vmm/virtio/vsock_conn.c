// SPDX-License-Identifier: MIT
/*
 * vsock connections: the host Unix socket behind each one, the CONNECT
 * handshake, and the credit accounting in both directions. Runs on the VM's
 * event loop with the device lock held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "evloop.h"
#include "log.h"
#include "virtio/vsock_priv.h"
#include "vm.h"

struct vsock_conn *conn_find(struct vsock_dev *d, uint32_t host_port, uint32_t guest_port)
{
	for (struct vsock_conn *c = d->conns; c; c = c->next)
		if (c->host_port == host_port && c->guest_port == guest_port &&
		    c->state != CONN_HANDSHAKE)
			return c;
	return NULL;
}

void conn_queue_rst(struct vsock_dev *d, uint32_t host_port, uint32_t guest_port)
{
	/* Bounded: past the limit the guest's own timeout closes the socket. */
	if (d->nr_rst < VSOCK_MAX_ORPHAN_RST)
		d->rst[d->nr_rst++] = (struct orphan_rst){host_port, guest_port};
}

uint32_t conn_peer_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	return in_flight < c->peer_buf_alloc ? c->peer_buf_alloc - in_flight : 0;
}

void conn_mark_ready(struct vsock_conn *c)
{
	struct vsock_dev *d = c->dev;

	if (c->in_ready)
		return;
	c->in_ready = true;
	c->next_ready = NULL;
	if (d->ready_tail)
		d->ready_tail->next_ready = c;
	else
		d->ready_head = c;
	d->ready_tail = c;
}

static void ready_remove(struct vsock_conn *c)
{
	struct vsock_dev *d = c->dev;
	struct vsock_conn **pp = &d->ready_head, *prev = NULL;

	if (!c->in_ready)
		return;
	for (; *pp; prev = *pp, pp = &(*pp)->next_ready) {
		if (*pp != c)
			continue;
		*pp = c->next_ready;
		if (d->ready_tail == c)
			d->ready_tail = prev;
		break;
	}
	c->in_ready = false;
}

/*
 * Epoll interest follows state: read the handshake line; read data only
 * while the guest has credit for it and it is not already queued; write
 * while bytes from the guest wait.
 */
void conn_update_events(struct vsock_conn *c)
{
	uint32_t ev = 0;

	/* Bytes already waiting for credit go out as soon as there is some. */
	if (c->want_data && conn_peer_credit(c))
		conn_mark_ready(c);
	if (c->detached)
		return;
	if (c->state == CONN_HANDSHAKE ||
	    (c->state == CONN_ESTABLISHED && !c->host_eof && !c->want_data && conn_peer_credit(c)))
		ev |= EPOLLIN;
	if (c->buf_len)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	c->events = ev;
	if (evloop_mod(c->dev->vm->loop, c->fd, ev))
		log_guest(LOG_WARN, "vsock: cannot watch a host socket");
}

void conn_close(struct vsock_conn *c, bool rst)
{
	struct vsock_dev *d = c->dev;
	struct vsock_conn **pp;

	if (rst && c->state != CONN_HANDSHAKE)
		conn_queue_rst(d, c->host_port, c->guest_port);
	ready_remove(c);
	evloop_del(d->vm->loop, c->fd);
	close(c->fd);
	for (pp = &d->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	d->nr_conns--;
	free(c->buf);
	free(c);
}

/*
 * What the guest believes it may still send us. Its window is our buffer -
 * or its own, when that is smaller: Linux (our guest's 6.1.192 among them)
 * caps its credit at its own buf_alloc, and a guest that stops there while
 * we wait for it to come near ours waits for us forever.
 */
static uint32_t guest_room(const struct vsock_conn *c)
{
	uint32_t window = c->peer_buf_alloc < VSOCK_BUF_ALLOC ? c->peer_buf_alloc : VSOCK_BUF_ALLOC;
	uint32_t in_flight = c->rx_cnt - c->fwd_cnt_told;

	return in_flight < window ? window - in_flight : 0;
}

/* Writes buffered guest bytes to the host socket. Returns -EPIPE if c was closed. */
static int conn_flush(struct vsock_conn *c)
{
	while (c->buf_len) {
		uint32_t first = VSOCK_BUF_ALLOC - c->buf_head;
		struct iovec iov[2] = {
			{c->buf + c->buf_head, first < c->buf_len ? first : c->buf_len},
			{c->buf, first < c->buf_len ? c->buf_len - first : 0},
		};
		ssize_t n = writev(c->fd, iov, iov[1].iov_len ? 2 : 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			conn_close(c, true);
			return -EPIPE;
		}
		c->buf_head = (c->buf_head + (uint32_t)n) % VSOCK_BUF_ALLOC;
		c->buf_len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	/*
	 * Tell the guest about freed room once what it believes is left drops
	 * below a full packet, so it never stalls; not after every packet,
	 * which cost the guest an interrupt and a packet per packet it sent
	 * (every packet we send it carries the count anyway).
	 */
	if (c->fwd_cnt != c->fwd_cnt_told && guest_room(c) < VSOCK_MAX_PAYLOAD) {
		c->pending |= PEND_CREDIT;
		conn_mark_ready(c);
	}
	if (!c->buf_len && c->guest_eof) {
		/* Both ways done once the host has it all: RST frees the guest's socket. */
		if (c->host_eof) {
			conn_close(c, true);
			return -EPIPE;
		}
		shutdown(c->fd, SHUT_WR);
	}
	conn_update_events(c);
	return 0;
}

static void conn_read_handshake(struct vsock_conn *c)
{
	struct vsock_dev *d = c->dev;
	char buf[32];
	uint32_t port;
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_PEEK);
	int len;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	len = n > 0 ? vsock_parse_connect(buf, (size_t)n, &port) : -EINVAL;
	if (len == 0 && n < (ssize_t)sizeof(buf))
		return; /* the rest of the line is still on its way */
	if (len <= 0) {
		static const char err[] = "ERROR expected \"CONNECT <port>\\n\"\n";

		/* Consume what it sent, so it reads our answer and a clean end of stream. */
		if (n > 0 && recv(c->fd, buf, (size_t)n, 0) >= 0 &&
		    send(c->fd, err, sizeof(err) - 1, MSG_NOSIGNAL) < 0)
			log_debug("vsock: could not tell a client its handshake was bad");
		conn_close(c, false);
		return;
	}
	/* Consume just the line: bytes after it are the stream's first data. */
	if (recv(c->fd, buf, (size_t)len, 0) != len) {
		conn_close(c, false);
		return;
	}
	do
		c->host_port = d->next_port++ | (1U << 30);
	while (conn_find(d, c->host_port, port));
	c->guest_port = port;
	c->state = CONN_CONNECTING;
	c->pending |= PEND_REQUEST;
	conn_mark_ready(c);
	conn_update_events(c);
	vsock_pump(d);
}

static void conn_event(void *ctx, uint32_t events)
{
	struct vsock_conn *c = ctx;
	struct vsock_dev *d = c->dev;

	virtio_lock(d->t);
	if (c->state == CONN_HANDSHAKE) {
		conn_read_handshake(c);
		goto out;
	}
	if ((events & EPOLLOUT) && conn_flush(c))
		goto out;
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* The host is gone. Bytes it sent before may still wait: read them
		 * without epoll, which would report the hang-up forever. */
		if (c->state != CONN_ESTABLISHED || c->host_eof) {
			conn_close(c, true);
			goto out;
		}
		evloop_del(d->vm->loop, c->fd);
		c->detached = true;
		c->buf_len = 0; /* nobody will read what the guest still sends */
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->host_eof) {
		c->want_data = true;
		conn_mark_ready(c);
		conn_update_events(c);
	}
	vsock_pump(d);
out:
	virtio_unlock(d->t);
}

static struct vsock_conn *conn_new(struct vsock_dev *d, int fd)
{
	struct vsock_conn *c;

	if (d->nr_conns >= VSOCK_MAX_CONNS) {
		log_guest(LOG_WARN, "vsock: %u connections open; refusing more", d->nr_conns);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->dev = d;
	c->fd = fd;
	if (evloop_add(d->vm->loop, fd, 0, conn_event, c)) {
		free(c);
		return NULL;
	}
	c->next = d->conns;
	d->conns = c;
	d->nr_conns++;
	return c;
}

int conn_accept_host(struct vsock_dev *d)
{
	struct vsock_conn *c;
	int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return -errno;
	c = conn_new(d, fd);
	if (!c) {
		close(fd);
		return 0;
	}
	c->state = CONN_HANDSHAKE;
	conn_update_events(c);
	return 0;
}

void conn_guest_request(struct vsock_dev *d, const struct vsock_pkt *p)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct vsock_conn *c;
	int fd;

	if (conn_find(d, p->dst_port, p->src_port)) {
		conn_queue_rst(d, p->dst_port, p->src_port);
		return;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", d->uds_path, p->dst_port);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		log_debug("vsock: guest port %u to host port %u: %s: %s", p->src_port, p->dst_port,
		          a.sun_path, strerror(errno));
		close(fd);
		fd = -1;
	}
	c = fd >= 0 ? conn_new(d, fd) : NULL;
	if (!c) {
		if (fd >= 0)
			close(fd);
		conn_queue_rst(d, p->dst_port, p->src_port);
		return;
	}
	log_debug("vsock: guest port %u connected to host port %u", p->src_port, p->dst_port);
	c->state = CONN_ESTABLISHED;
	c->host_port = p->dst_port;
	c->guest_port = p->src_port;
	c->peer_buf_alloc = p->buf_alloc;
	c->peer_fwd_cnt = p->fwd_cnt;
	c->pending |= PEND_RESPONSE;
	conn_mark_ready(c);
	conn_update_events(c);
}

/* Takes len payload bytes after the header into the ring. */
static int conn_take_payload(struct vsock_conn *c, const struct virtq_chain *ch, uint32_t len)
{
	uint32_t tail, first;

	if (c->buf_len + len > VSOCK_BUF_ALLOC) {
		log_guest(LOG_WARN, "vsock: guest port %u sent past its credit; connection reset",
		          c->guest_port);
		conn_close(c, true);
		return -EPIPE;
	}
	if (!c->buf) {
		c->buf = malloc(VSOCK_BUF_ALLOC);
		if (!c->buf) {
			conn_close(c, true);
			return -ENOMEM;
		}
	}
	tail = (c->buf_head + c->buf_len) % VSOCK_BUF_ALLOC;
	first = VSOCK_BUF_ALLOC - tail < len ? VSOCK_BUF_ALLOC - tail : len;
	virtq_chain_read(ch, VSOCK_HDR_SIZE, c->buf + tail, first);
	virtq_chain_read(ch, VSOCK_HDR_SIZE + first, c->buf, len - first);
	c->buf_len += len;
	c->rx_cnt += len;
	return 0;
}

void conn_guest_packet(struct vsock_conn *c, const struct vsock_pkt *p,
                       const struct virtq_chain *ch)
{
	switch (p->op) {
	case VIRTIO_VSOCK_OP_RESPONSE: {
		char ok[32];
		int n = snprintf(ok, sizeof(ok), "OK %u\n", c->host_port);

		if (c->state != CONN_CONNECTING) {
			conn_close(c, true);
			return;
		}
		c->state = CONN_ESTABLISHED;
		if (send(c->fd, ok, (size_t)n, MSG_NOSIGNAL) != n) {
			conn_close(c, true);
			return;
		}
		break;
	}
	case VIRTIO_VSOCK_OP_RW:
		if (c->state != CONN_ESTABLISHED || c->guest_eof) {
			conn_close(c, true);
			return;
		}
		if (conn_take_payload(c, ch, p->len) || conn_flush(c))
			return;
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->pending |= PEND_CREDIT;
		conn_mark_ready(c);
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (p->flags & VIRTIO_VSOCK_SHUTDOWN_RCV) {
			/* The guest reads no more: stop reading the host for it. */
			c->host_eof = true;
			c->want_data = false;
		}
		if (p->flags & VIRTIO_VSOCK_SHUTDOWN_SEND) {
			c->guest_eof = true;
			if (!c->buf_len)
				shutdown(c->fd, SHUT_WR);
		}
		/* Both ways shut: the guest waits for our RST to free its socket. */
		if (c->host_eof && c->guest_eof && !c->buf_len) {
			conn_close(c, true);
			return;
		}
		break;
	case VIRTIO_VSOCK_OP_RST:
		conn_close(c, false);
		return;
	default: /* CREDIT_UPDATE: the peer counters are already taken */
		break;
	}
	conn_update_events(c);
}

void conn_dump(const struct vsock_conn *c)
{
	static const char *const states[] = {"handshake", "connecting", "established"};

	log_warn("vsock host port %u <-> guest port %u: %s, epoll %#x, owes %#x%s%s%s%s%s; "
	         "guest->host %u bytes buffered (took %u, forwarded %u, told %u); "
	         "host->guest sent %u, guest's buf_alloc %u fwd_cnt %u (credit %u)",
	         c->host_port, c->guest_port, states[c->state], c->events, c->pending,
	         c->in_ready ? ", ready" : "", c->want_data ? ", host data waits" : "",
	         c->host_eof ? ", host eof" : "", c->guest_eof ? ", guest eof" : "",
	         c->detached ? ", detached" : "", c->buf_len, c->rx_cnt, c->fwd_cnt,
	         c->fwd_cnt_told, c->tx_cnt, c->peer_buf_alloc, c->peer_fwd_cnt,
	         conn_peer_credit(c));
}
