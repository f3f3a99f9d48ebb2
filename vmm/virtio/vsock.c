// SPDX-License-Identifier: MIT
/*
 * virtio-vsock device (virtio 1.x, 5.10): the queues and the packets. The
 * connections behind them, and their host sockets, are in vsock_conn.c.
 * Everything here runs on the VM's event loop with the device lock held.
 */
#include "virtio/vsock.h"

#include <endian.h>
#include <errno.h>
#include <linux/virtio_ids.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "evloop.h"
#include "log.h"
#include "virtio/vsock_priv.h"
#include "vm.h"

static void fill_hdr(struct vsock_dev *d, struct vsock_conn *c, struct vsock_pkt *p, uint16_t op)
{
	memset(p, 0, sizeof(*p));
	p->src_cid = VSOCK_HOST_CID;
	p->dst_cid = d->guest_cid;
	p->type = VIRTIO_VSOCK_TYPE_STREAM;
	p->op = op;
	p->buf_alloc = VSOCK_BUF_ALLOC;
	if (c) {
		p->src_port = c->host_port;
		p->dst_port = c->guest_port;
		p->fwd_cnt = c->fwd_cnt;
		/* Every packet tells the guest our credit: no separate update owed. */
		c->fwd_cnt_told = c->fwd_cnt;
		c->pending &= ~(unsigned)PEND_CREDIT;
	}
}

/* Reads host bytes straight into the chain's writable buffers after the header. */
static ssize_t read_into_chain(struct vsock_conn *c, const struct virtq_chain *ch, uint32_t max)
{
	struct iovec iov[VIRTQ_MAX_CHAIN];
	size_t skip = VSOCK_HDR_SIZE;
	int n = 0;

	for (unsigned i = ch->nr_out; i < (unsigned)ch->nr_out + ch->nr_in && max; i++) {
		size_t len = ch->buf[i].len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		len -= skip;
		if (len > max)
			len = max;
		iov[n].iov_base = ch->buf[i].addr + skip;
		iov[n].iov_len = len;
		n++;
		max -= (uint32_t)len;
		skip = 0;
	}
	return n ? readv(c->fd, iov, n) : 0;
}

/*
 * Builds the next packet conn c owes the guest into ch. Returns its payload
 * length, -EAGAIN if c has nothing to send now, -ENOSPC if ch is too small
 * for what c has to send, or -EPIPE if c was closed.
 */
static int conn_next_packet(struct vsock_dev *d, struct vsock_conn *c, const struct virtq_chain *ch,
                            struct vsock_pkt *p)
{
	uint32_t room, credit;
	ssize_t n;

	if (c->pending & PEND_REQUEST) {
		c->pending &= ~(unsigned)PEND_REQUEST;
		fill_hdr(d, c, p, VIRTIO_VSOCK_OP_REQUEST);
		return 0;
	}
	if (c->pending & PEND_RESPONSE) {
		c->pending &= ~(unsigned)PEND_RESPONSE;
		fill_hdr(d, c, p, VIRTIO_VSOCK_OP_RESPONSE);
		return 0;
	}
	credit = conn_peer_credit(c);
	if (c->want_data && c->state == CONN_ESTABLISHED && credit && ch->in_len > VSOCK_HDR_SIZE) {
		room = ch->in_len - (uint32_t)VSOCK_HDR_SIZE;
		if (room > credit)
			room = credit;
		if (room > VSOCK_MAX_PAYLOAD)
			room = VSOCK_MAX_PAYLOAD;
		n = read_into_chain(c, ch, room);
		if (n > 0) {
			fill_hdr(d, c, p, VIRTIO_VSOCK_OP_RW);
			p->len = (uint32_t)n;
			c->tx_cnt += (uint32_t)n;
			return (int)n;
		}
		c->want_data = false;
		if (n == 0) {
			c->host_eof = true;
			c->pending |= PEND_SHUTDOWN;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			conn_close(c, true);
			return -EPIPE;
		}
	}
	if (c->pending & PEND_SHUTDOWN) {
		c->pending &= ~(unsigned)PEND_SHUTDOWN;
		fill_hdr(d, c, p, VIRTIO_VSOCK_OP_SHUTDOWN);
		p->flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		return 0;
	}
	if (c->pending & PEND_CREDIT) {
		fill_hdr(d, c, p, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		return 0;
	}
	/* Data owed, a buffer with room for a header alone: no driver posts one. */
	if (c->want_data && c->state == CONN_ESTABLISHED && credit)
		return -ENOSPC;
	return -EAGAIN;
}

static bool conn_has_work(const struct vsock_conn *c)
{
	return c->pending || (c->want_data && conn_peer_credit(c));
}

/* Moves whatever the connections owe the guest into its RX buffers. */
void vsock_pump(struct vsock_dev *d)
{
	struct virtq *vq = virtio_queue(d->t, VSOCK_QUEUE_RX);
	struct virtq_chain *ch = &d->chain;
	bool pushed = false;

	while (d->active && (d->nr_rst || d->ready_head)) {
		struct virtio_vsock_hdr wire;
		struct vsock_conn *c = d->ready_head;
		struct vsock_pkt p;
		int ret = virtq_pop(vq, virtio_mem(d->t), ch);

		if (ret == 0)
			break; /* no RX buffers: resume when the guest adds some */
		if (ret < 0)
			continue;
		if (ch->in_len < VSOCK_HDR_SIZE) {
			log_guest(LOG_WARN, "vsock: RX buffer of %u bytes is smaller than a header",
			          ch->in_len);
			virtq_push(vq, ch->head, 0);
			pushed = true;
			continue;
		}
		if (d->nr_rst) {
			struct orphan_rst r = d->rst[--d->nr_rst];

			c = NULL;
			fill_hdr(d, NULL, &p, VIRTIO_VSOCK_OP_RST);
			p.src_port = r.host_port;
			p.dst_port = r.guest_port;
			ret = 0;
		} else {
			/* Round robin: the head goes to the back after one packet. */
			d->ready_head = c->next_ready;
			if (!d->ready_head)
				d->ready_tail = NULL;
			c->in_ready = false;
			c->next_ready = NULL;
			ret = conn_next_packet(d, c, ch, &p);
			if (ret == -ENOSPC) {
				/*
				 * Put back, the same buffer would be popped for the
				 * same connection forever; used empty, the driver
				 * drops it and the next one may be of use.
				 */
				log_guest(LOG_WARN,
				          "vsock: RX buffer of %u bytes has no room for data",
				          ch->in_len);
				virtq_push(vq, ch->head, 0);
				pushed = true;
				conn_mark_ready(c);
				continue;
			}
			if (ret < 0) {
				virtq_unpop(vq);
				if (ret == -EAGAIN)
					conn_update_events(c);
				continue;
			}
		}
		vsock_pkt_encode(&p, &wire);
		d->to_guest++;
		d->to_guest_bytes += (uint64_t)ret;
		d->to_guest_credit += p.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE;
		virtq_chain_write(ch, 0, &wire, sizeof(wire));
		virtq_push(vq, ch->head, (uint32_t)VSOCK_HDR_SIZE + (uint32_t)ret);
		pushed = true;
		if (!c || c->in_ready)
			continue;
		if (c->detached && c->host_eof && !c->pending)
			conn_close(c, false); /* the guest has its EOF; nothing is left */
		else if (conn_has_work(c))
			conn_mark_ready(c);
		else
			conn_update_events(c);
	}
	if (pushed)
		virtio_signal(d->t, VSOCK_QUEUE_RX);
}

static void handle_tx_chain(struct vsock_dev *d, const struct virtq_chain *ch)
{
	struct virtio_vsock_hdr wire;
	struct vsock_conn *c;
	struct vsock_pkt p;
	const char *why;
	size_t got = virtq_chain_read(ch, 0, &wire, sizeof(wire));

	if (vsock_pkt_parse(&wire, got, ch->out_len - got, d->guest_cid, &p, &why)) {
		log_guest(LOG_WARN, "vsock: dropped a guest packet: %s", why);
		return;
	}
	d->from_guest++;
	d->from_guest_bytes += p.op == VIRTIO_VSOCK_OP_RW ? p.len : 0;
	if (p.op == VIRTIO_VSOCK_OP_REQUEST) {
		conn_guest_request(d, &p);
		return;
	}
	c = conn_find(d, p.dst_port, p.src_port);
	if (!c) {
		if (p.op != VIRTIO_VSOCK_OP_RST)
			conn_queue_rst(d, p.dst_port, p.src_port);
		return;
	}
	c->peer_buf_alloc = p.buf_alloc;
	c->peer_fwd_cnt = p.fwd_cnt;
	conn_guest_packet(c, &p, ch);
}

/* Tells the guest of the TX buffers used so far. Lock held. */
static void tx_signal(struct vsock_dev *d)
{
	d->tx_held = 0;
	virtio_signal(d->t, VSOCK_QUEUE_TX);
}

static void tx_timer_event(void *ctx, uint32_t events)
{
	struct vsock_dev *d = ctx;
	uint64_t expirations;

	(void)events;
	if (read(d->tx_timer, &expirations, sizeof(expirations)) < 0)
		return;
	virtio_lock(d->t);
	d->tx_timer_armed = false;
	if (d->tx_held)
		tx_signal(d);
	virtio_unlock(d->t);
}

/* n more TX buffers used: told now if enough wait, else once the timer fires. */
static void tx_used(struct vsock_dev *d, unsigned n)
{
	struct itimerspec its = {.it_value.tv_nsec = VSOCK_TX_DELAY_US * 1000};

	d->tx_held += n;
	if (d->tx_held >= VSOCK_TX_BATCH || d->tx_timer < 0) {
		tx_signal(d);
		return;
	}
	if (d->tx_held && !d->tx_timer_armed) {
		if (timerfd_settime(d->tx_timer, 0, &its, NULL) == 0)
			d->tx_timer_armed = true;
		else
			tx_signal(d);
	}
}

static void vsock_notify(void *dev, unsigned q)
{
	struct vsock_dev *d = dev;
	struct virtq *vq = virtio_queue(d->t, q);
	int ret, budget = VIRTQ_BUDGET;
	unsigned used = 0;

	if (q == VSOCK_QUEUE_TX) {
		while (budget-- > 0 && (ret = virtq_pop(vq, virtio_mem(d->t), &d->chain)) != 0) {
			if (ret < 0)
				continue;
			handle_tx_chain(d, &d->chain);
			virtq_push(vq, d->chain.head, 0);
			used++;
		}
		if (budget < 0 && virtq_has_work(vq))
			virtio_notify_again(d->t, q);
		tx_used(d, used);
	}
	/* New RX buffers, or credit the TX packets just gave: send what waits. */
	vsock_pump(d);
}

static void vsock_config_read(void *dev, uint32_t off, void *data, unsigned len)
{
	struct vsock_dev *d = dev;
	uint64_t cid = htole64(d->guest_cid);

	memcpy(data, (uint8_t *)&cid + off, len);
}

static int vsock_activate(void *dev)
{
	struct vsock_dev *d = dev;

	d->active = true;
	return 0;
}

static void vsock_reset(void *dev)
{
	struct vsock_dev *d = dev;

	/* The guest forgot every connection: drop ours without RSTs. */
	while (d->conns)
		conn_close(d->conns, false);
	d->nr_rst = 0;
	d->tx_held = 0;
	d->active = false;
}

/*
 * After a restore the guest's connections lead to a VMM that is gone (and
 * its host peers with it): the transport-reset event (virtio 5.10.6.6) makes
 * the guest drop every connection; listening sockets stay, so the agent
 * takes new ones at once.
 */
static int vsock_restore(void *dev, const void *blob, size_t len)
{
	struct vsock_dev *d = dev;
	struct virtq *vq = virtio_queue(d->t, VSOCK_QUEUE_EVENT);
	struct virtio_vsock_event ev = {.id = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET)};

	(void)blob;
	(void)len;
	if (!vq || !vq->ready)
		return 0;
	if (virtq_pop(vq, virtio_mem(d->t), &d->chain) <= 0) {
		log_guest(LOG_WARN, "vsock: no event buffer for the transport reset after restore");
		return 0;
	}
	virtq_chain_write(&d->chain, 0, &ev, sizeof(ev));
	virtq_push(vq, d->chain.head, sizeof(ev));
	virtio_signal(d->t, VSOCK_QUEUE_EVENT);
	return 0;
}

static void vsock_dump(void *dev)
{
	struct vsock_dev *d = dev;
	unsigned ready = 0;

	for (struct vsock_conn *c = d->ready_head; c; c = c->next_ready)
		ready++;
	log_warn("vsock: %s, %u connections (%u ready for the guest), %u resets owed, %u sent "
	         "buffers held back (timer %s)",
	         d->active ? "active" : "not active", d->nr_conns, ready, d->nr_rst, d->tx_held,
	         d->tx_timer_armed ? "armed" : "idle");
	for (struct vsock_conn *c = d->conns; c; c = c->next)
		conn_dump(c);
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "virtio-vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.nr_queues = 3,
	.queue_max = 256,
	.config_size = sizeof(uint64_t),
	.config_read = vsock_config_read,
	.activate = vsock_activate,
	.notify = vsock_notify,
	.reset = vsock_reset,
	.restore = vsock_restore,
	.dump = vsock_dump,
};

static void listener_event(void *ctx, uint32_t events)
{
	struct vsock_dev *d = ctx;

	(void)events;
	virtio_lock(d->t);
	while (conn_accept_host(d) == 0)
		;
	virtio_unlock(d->t);
}

/* Binds the listener; a socket file left by a dead VMM is replaced. */
static int listen_uds(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(a.sun_path) - 12) /* room for "_<port>" */
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof(a)) < 0 &&
		    errno == ECONNREFUSED)
			unlink(path);
		if (probe >= 0)
			close(probe);
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

struct vsock_dev *vsock_create(struct vm *vm, uint64_t guest_cid, const char *uds_path)
{
	struct vsock_dev *d;

	if (guest_cid <= VSOCK_HOST_CID || guest_cid >= UINT32_MAX) {
		log_err("vsock: guest CID %llu is reserved; use 3 or more",
		        (unsigned long long)guest_cid);
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->vm = vm;
	d->tx_timer = -1;
	d->guest_cid = guest_cid;
	d->next_port = 1U << 30;
	d->uds_path = strdup(uds_path);
	d->listen_fd = d->uds_path ? listen_uds(uds_path) : -ENOMEM;
	if (d->listen_fd < 0) {
		log_err("vsock: cannot listen on '%s': %s", uds_path, strerror(-d->listen_fd));
		goto err;
	}
	d->t = virtio_mmio_create(vm, &vsock_ops, d);
	if (!d->t)
		goto err;
	if (evloop_add(vm->loop, d->listen_fd, EPOLLIN, listener_event, d))
		goto err;
	/* Without it every used TX buffer is told at once: slower, not wrong. */
	d->tx_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->tx_timer >= 0 && evloop_add(vm->loop, d->tx_timer, EPOLLIN, tx_timer_event, d)) {
		close(d->tx_timer);
		d->tx_timer = -1;
	}
	return d;
err:
	vsock_destroy(d);
	return NULL;
}

void vsock_destroy(struct vsock_dev *d)
{
	if (!d)
		return;
	if (d->to_guest || d->from_guest)
		log_debug("vsock: %llu packets to the guest (%llu payload bytes, %llu credit "
		          "updates), "
		          "%llu from it (%llu payload bytes)",
		          (unsigned long long)d->to_guest, (unsigned long long)d->to_guest_bytes,
		          (unsigned long long)d->to_guest_credit, (unsigned long long)d->from_guest,
		          (unsigned long long)d->from_guest_bytes);
	while (d->conns)
		conn_close(d->conns, false);
	if (d->tx_timer >= 0) {
		evloop_del(d->vm->loop, d->tx_timer);
		close(d->tx_timer);
	}
	if (d->listen_fd >= 0) {
		evloop_del(d->vm->loop, d->listen_fd);
		close(d->listen_fd);
		unlink(d->uds_path);
	}
	virtio_mmio_destroy(d->t);
	free(d->uds_path);
	free(d);
}
