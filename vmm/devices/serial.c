// SPDX-License-Identifier: MIT
/*
 * 8250/16550A UART, enough for Linux's 8250 driver and early console:
 * divisor latch, FIFO control, THR-empty and receive interrupts, loopback
 * for the driver's self test. Transmission is instantaneous, so THR and
 * the shift register are always empty.
 */
#include "devices/serial.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus.h"
#include "log.h"
#include "vm.h"

#define UART_RX 0  /* in: receive buffer (DLAB=0) */
#define UART_TX 0  /* out: transmit holding (DLAB=0) */
#define UART_DLL 0 /* divisor latch low (DLAB=1) */
#define UART_IER 1
#define UART_DLM 1
#define UART_IIR 2 /* in */
#define UART_FCR 2 /* out */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define IER_RDI 0x01
#define IER_THRI 0x02
#define IIR_NO_INT 0x01
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO_ENABLED 0xc0
#define FCR_ENABLE 0x01
#define FCR_CLEAR_RX 0x02
#define LCR_DLAB 0x80
#define MCR_DTR 0x01
#define MCR_RTS 0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80

#define RX_FIFO_SIZE 1024

struct serial {
	pthread_mutex_t lock;
	struct vm *vm;
	unsigned irq;
	int out_fd;
	uint64_t written, max; /* bytes in out_fd; 0: no cap (not a file) */
	int irq_level;
	int thr_pending; /* THR-empty interrupt not yet acknowledged */
	uint8_t ier, fcr, lcr, mcr, scr, dll, dlm;
	uint8_t rx[RX_FIFO_SIZE];
	size_t rx_head, rx_len;
};

static uint8_t serial_iir(const struct serial *s)
{
	if ((s->ier & IER_RDI) && s->rx_len)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thr_pending)
		return IIR_THRI;
	return IIR_NO_INT;
}

/* Called with the lock held after every state change. */
static void serial_update_irq(struct serial *s)
{
	int level = serial_iir(s) != IIR_NO_INT;

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	if (vm_irq_line(s->vm, s->irq, level))
		log_guest(LOG_WARN, "serial: cannot set IRQ %u", s->irq);
}

/*
 * A file console full: it starts again, saying so, rather than fill the
 * host's disk with whatever the guest prints.
 */
static void serial_rotate(struct serial *s)
{
	char note[96];
	int n = snprintf(note, sizeof(note),
	                 "[husk-vmm: the console reached %llu bytes; what came before is gone]\n",
	                 (unsigned long long)s->max);

	if (ftruncate(s->out_fd, 0) < 0 || lseek(s->out_fd, 0, SEEK_SET) < 0 ||
	    write(s->out_fd, note, (size_t)n) != n) {
		log_guest(LOG_WARN, "serial: cannot start the console file again: %s",
		          strerror(errno));
		s->out_fd = -1; /* better silent than unbounded */
		return;
	}
	s->written = (uint64_t)n;
}

static void serial_transmit(struct serial *s, uint8_t byte)
{
	if (s->mcr & MCR_LOOP) {
		if (s->rx_len < RX_FIFO_SIZE)
			s->rx[(s->rx_head + s->rx_len++) % RX_FIFO_SIZE] = byte;
	} else if (s->out_fd >= 0) {
		if (s->max && s->written >= s->max)
			serial_rotate(s);
		if (s->out_fd >= 0 && write(s->out_fd, &byte, 1) < 0 && errno != EAGAIN)
			log_guest(LOG_WARN, "serial: console write failed: %s", strerror(errno));
		else
			s->written++;
	}
	s->thr_pending = 1;
}

void serial_limit(struct serial *s, uint64_t max_bytes)
{
	struct stat st;

	pthread_mutex_lock(&s->lock);
	if (s->out_fd >= 0 && fstat(s->out_fd, &st) == 0 && S_ISREG(st.st_mode)) {
		s->max = max_bytes;
		s->written = (uint64_t)st.st_size;
	}
	pthread_mutex_unlock(&s->lock);
}

static uint8_t serial_msr(const struct serial *s)
{
	uint8_t m = s->mcr;

	if (!(m & MCR_LOOP))
		return MSR_DCD | MSR_DSR | MSR_CTS;
	return (uint8_t)(((m & MCR_DTR) ? MSR_DSR : 0) | ((m & MCR_RTS) ? MSR_CTS : 0) |
	                 ((m & MCR_OUT1) ? MSR_RI : 0) | ((m & MCR_OUT2) ? MSR_DCD : 0));
}

static void serial_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	struct serial *s = dev;
	uint8_t v = 0;

	memset(data, 0, len);
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_RX:
		if (s->lcr & LCR_DLAB) {
			v = s->dll;
		} else if (s->rx_len) {
			v = s->rx[s->rx_head];
			s->rx_head = (s->rx_head + 1) % RX_FIFO_SIZE;
			s->rx_len--;
		}
		break;
	case UART_IER:
		v = (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
		break;
	case UART_IIR:
		v = serial_iir(s);
		/* Reading IIR acknowledges a THR-empty interrupt. */
		if (v == IIR_THRI)
			s->thr_pending = 0;
		if (s->fcr & FCR_ENABLE)
			v |= IIR_FIFO_ENABLED;
		break;
	case UART_LCR:
		v = s->lcr;
		break;
	case UART_MCR:
		v = s->mcr;
		break;
	case UART_LSR:
		v = LSR_THRE | LSR_TEMT | (s->rx_len ? LSR_DR : 0);
		break;
	case UART_MSR:
		v = serial_msr(s);
		break;
	case UART_SCR:
		v = s->scr;
		break;
	}
	data[0] = v;
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static void serial_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct serial *s = dev;
	uint8_t v = data[0];

	(void)len;
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_TX:
		if (s->lcr & LCR_DLAB)
			s->dll = v;
		else
			serial_transmit(s, v);
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
		} else {
			/* Enabling THRI while THR is empty raises it at once. */
			if (!(s->ier & IER_THRI) && (v & IER_THRI))
				s->thr_pending = 1;
			s->ier = v & 0x0f;
		}
		break;
	case UART_FCR:
		s->fcr = v & 0xc9;
		if (v & FCR_CLEAR_RX)
			s->rx_len = 0;
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		break;
	case UART_SCR:
		s->scr = v;
		break;
	default: /* LSR and MSR are read-only */
		break;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static const struct bus_ops serial_ops = {
	.read = serial_read,
	.write = serial_write,
};

/* Snapshot: the registers and what the guest has not read yet. */
struct serial_state {
	uint32_t magic, rx_len;
	uint8_t ier, fcr, lcr, mcr, scr, dll, dlm, thr_pending, irq_level, pad[7];
	uint8_t rx[RX_FIFO_SIZE];
};
#define SERIAL_STATE_MAGIC 0x52414548u /* "HEAR" */

static int serial_save(void *dev, void **blob, size_t *len)
{
	struct serial *s = dev;
	struct serial_state *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	*st = (struct serial_state){.magic = SERIAL_STATE_MAGIC,
	                            .rx_len = (uint32_t)s->rx_len,
	                            .ier = s->ier,
	                            .fcr = s->fcr,
	                            .lcr = s->lcr,
	                            .mcr = s->mcr,
	                            .scr = s->scr,
	                            .dll = s->dll,
	                            .dlm = s->dlm,
	                            .thr_pending = (uint8_t)s->thr_pending,
	                            .irq_level = (uint8_t)s->irq_level};
	for (size_t i = 0; i < s->rx_len; i++)
		st->rx[i] = s->rx[(s->rx_head + i) % RX_FIFO_SIZE];
	pthread_mutex_unlock(&s->lock);
	*blob = st;
	*len = sizeof(*st);
	return 0;
}

static int serial_restore(void *dev, const void *blob, size_t len)
{
	struct serial *s = dev;
	struct serial_state st;

	if (len != sizeof(st))
		return -EINVAL;
	memcpy(&st, blob, sizeof(st));
	if (st.magic != SERIAL_STATE_MAGIC || st.rx_len > RX_FIFO_SIZE)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->ier = st.ier;
	s->fcr = st.fcr;
	s->lcr = st.lcr;
	s->mcr = st.mcr;
	s->scr = st.scr;
	s->dll = st.dll;
	s->dlm = st.dlm;
	s->thr_pending = st.thr_pending;
	/* The line's level came back with the interrupt controllers' state. */
	s->irq_level = st.irq_level;
	memcpy(s->rx, st.rx, st.rx_len);
	s->rx_head = 0;
	s->rx_len = st.rx_len;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

struct serial *serial_create(struct vm *vm, uint16_t base, unsigned irq, int out_fd)
{
	struct serial *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->vm = vm;
	s->irq = irq;
	s->out_fd = out_fd;
	s->thr_pending = 0;
	if (bus_register(&vm->pio, base, 8, &serial_ops, s)) {
		log_err("serial: port %#x is already taken", base);
		serial_destroy(s);
		return NULL;
	}
	if (vm_snap_register(vm, "serial", serial_save, serial_restore, s)) {
		serial_destroy(s);
		return NULL;
	}
	return s;
}

size_t serial_receive(struct serial *s, const uint8_t *data, size_t len)
{
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	while (n < len && s->rx_len < RX_FIFO_SIZE)
		s->rx[(s->rx_head + s->rx_len++) % RX_FIFO_SIZE] = data[n++];
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

void serial_destroy(struct serial *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}
