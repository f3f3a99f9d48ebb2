/* SPDX-License-Identifier: MIT */
/* Internals shared by vsock.c (the device) and vsock_conn.c (connections). */
#ifndef HUSK_VIRTIO_VSOCK_PRIV_H
#define HUSK_VIRTIO_VSOCK_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/virtio.h"
#include "virtio/vsock_pkt.h"

/* Bytes a connection buffers toward the host socket: the guest's credit. */
#define VSOCK_BUF_ALLOC (256 * 1024)
#define VSOCK_MAX_CONNS 512
#define VSOCK_MAX_ORPHAN_RST 64
#define VSOCK_QUEUE_RX 0
#define VSOCK_QUEUE_TX 1
#define VSOCK_QUEUE_EVENT 2
/*
 * Sent packets the guest hears of at once (a quarter of its ring), or
 * after VSOCK_TX_DELAY_US: their return only frees its memory, and an
 * interrupt for each was more than half of those a stream from it took.
 */
#define VSOCK_TX_BATCH 32
#define VSOCK_TX_DELAY_US 1000

enum conn_state {
	CONN_HANDSHAKE,  /* host client connected, "CONNECT <port>" not read yet */
	CONN_CONNECTING, /* REQUEST sent to the guest, waiting for RESPONSE */
	CONN_ESTABLISHED,
};

/* Control packets a connection owes the guest (bits). */
enum {
	PEND_REQUEST = 1,
	PEND_RESPONSE = 2,
	PEND_CREDIT = 4,
	PEND_SHUTDOWN = 8,
};

struct vsock_conn {
	struct vsock_dev *dev;
	int fd;
	enum conn_state state;
	uint32_t host_port, guest_port;
	uint32_t events; /* epoll interest now */
	unsigned pending;
	bool in_ready;  /* on the device's list of connections with something for the guest */
	bool want_data; /* its host socket may have bytes for the guest */
	bool host_eof;  /* the host stopped sending; SHUTDOWN owed or sent */
	bool guest_eof; /* the guest stopped sending */
	bool detached;  /* the host hung up: out of epoll, which would report it forever */
	/* guest -> host: a ring of VSOCK_BUF_ALLOC bytes, allocated on first use */
	uint8_t *buf;
	uint32_t buf_head, buf_len;
	uint32_t rx_cnt, fwd_cnt, fwd_cnt_told;
	/* host -> guest */
	uint32_t tx_cnt, peer_buf_alloc, peer_fwd_cnt;
	/* handshake line */
	char line[32];
	uint32_t line_len;
	struct vsock_conn *next_ready, *next;
};

struct orphan_rst {
	uint32_t host_port, guest_port;
};

struct vsock_dev {
	struct virtio_mmio *t;
	struct vm *vm;
	uint64_t guest_cid;
	char *uds_path;
	int listen_fd;
	bool active;
	struct vsock_conn *conns; /* all connections */
	unsigned nr_conns;
	struct vsock_conn *ready_head, *ready_tail;
	struct orphan_rst rst[VSOCK_MAX_ORPHAN_RST];
	unsigned nr_rst;
	uint32_t next_port;
	struct virtq_chain chain;
	int tx_timer; /* timerfd: the used TX buffers held back go to the guest */
	bool tx_timer_armed;
	unsigned tx_held; /* TX buffers used since the guest was last told */
	/* Packets each way (and their payload), logged at debug level at the end. */
	uint64_t to_guest, to_guest_bytes, to_guest_credit, from_guest, from_guest_bytes;
};

/* vsock_conn.c */
struct vsock_conn *conn_find(struct vsock_dev *d, uint32_t host_port, uint32_t guest_port);
void conn_close(struct vsock_conn *c, bool rst);
void conn_mark_ready(struct vsock_conn *c);
void conn_update_events(struct vsock_conn *c);
uint32_t conn_peer_credit(const struct vsock_conn *c);
int conn_accept_host(struct vsock_dev *d);
void conn_guest_request(struct vsock_dev *d, const struct vsock_pkt *p);
void conn_guest_packet(struct vsock_conn *c, const struct vsock_pkt *p,
                       const struct virtq_chain *ch);
void conn_queue_rst(struct vsock_dev *d, uint32_t host_port, uint32_t guest_port);
/* One log line of c: state, what it owes, credit both ways. */
void conn_dump(const struct vsock_conn *c);

/* vsock.c */
void vsock_pump(struct vsock_dev *d);

#endif
