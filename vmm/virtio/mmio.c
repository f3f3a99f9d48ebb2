// SPDX-License-Identifier: MIT
/*
 * virtio-mmio transport, register layout version 2 (virtio 1.x, 4.2.2).
 * vCPU threads reach the registers through MMIO exits; queue notifications
 * bypass them through ioeventfds into the VM's event loop (or a device's own
 * thread); interrupts are raised with KVM_IRQ_LINE by whichever thread
 * completed the work.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bus.h"
#include "evloop.h"
#include "log.h"
#include "virtio/mmio_priv.h"
#include "virtio/virtio.h"
#include "vm.h"

#define MMIO_WINDOW 0x1000
#define MMIO_MAGIC 0x74726976  /* "virt" */
#define MMIO_VENDOR 0x4b535548 /* "HUSK" */
static uint64_t device_features(const struct virtio_mmio *t)
{
	return t->ops->features | (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_RING_F_EVENT_IDX);
}

void virtio_lock(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
}

/*
 * Interrupts go out after the lock is dropped: the raise wakes the vCPU,
 * which may preempt us here and would then wait on this lock to read the
 * interrupt status.
 */
void virtio_unlock(struct virtio_mmio *t)
{
	bool raise = t->raise_pending;

	t->raise_pending = false;
	pthread_mutex_unlock(&t->lock);
	if (raise)
		mmio_raise(t);
}

struct virtq *virtio_queue(struct virtio_mmio *t, unsigned q)
{
	return q < t->ops->nr_queues ? &t->vqs[q] : NULL;
}

const struct guest_mem *virtio_mem(struct virtio_mmio *t)
{
	return &t->vm->mem;
}

int virtio_has_feature(struct virtio_mmio *t, unsigned bit)
{
	return bit < 64 && (t->driver_features >> bit) & 1;
}

void mmio_raise(struct virtio_mmio *t)
{
	int ret;

	/*
	 * An edge on the line, from this thread: an irqfd would have a kernel
	 * worker do it, one wake-up and context switch more per interrupt.
	 * Without KVM (tests) nr_irq counts them.
	 */
	if (t->vm->vm_fd < 0)
		return;
	/*
	 * KVM keeps one level per line for all of userspace: two threads'
	 * pairs interleaved (1, 1, 0, 0) make one edge, and the second
	 * thread's work is lost if the guest read the status in between.
	 */
	pthread_mutex_lock(&t->raise_lock);
	ret = vm_irq_line(t->vm, t->irq, 1);
	if (!ret)
		ret = vm_irq_line(t->vm, t->irq, 0);
	pthread_mutex_unlock(&t->raise_lock);
	if (ret)
		log_guest(LOG_WARN, "%s: cannot raise IRQ %u: %s", t->ops->name, t->irq,
		          strerror(-ret));
}

void virtio_signal(struct virtio_mmio *t, unsigned q)
{
	if (q >= t->ops->nr_queues || !virtq_should_signal(&t->vqs[q]))
		return;
	t->int_status |= VIRTIO_MMIO_INT_VRING;
	t->nr_irq++;
	t->raise_pending = true;
}

void virtio_notify_again(struct virtio_mmio *t, unsigned q)
{
	uint64_t one = 1;

	/* Without KVM (tests) notifications are MMIO writes: the guest's next one will do. */
	if (q < t->ops->nr_queues && t->notify[q].fd >= 0 &&
	    write(t->notify[q].fd, &one, sizeof(one)) < 0)
		log_guest(LOG_WARN, "%s: cannot queue more work on queue %u: %s", t->ops->name, q,
		          strerror(errno));
}

static void transport_reset(struct virtio_mmio *t)
{
	if (t->ops->reset)
		t->ops->reset(t->dev);
	for (unsigned q = 0; q < MMIO_MAX_QUEUES; q++)
		virtq_reset(&t->vqs[q]);
	t->status = 0;
	t->driver_features = 0;
	t->dev_feat_sel = t->drv_feat_sel = t->queue_sel = 0;
	t->int_status = 0;
}

static void set_status(struct virtio_mmio *t, uint32_t v)
{
	if (v == 0) {
		transport_reset(t);
		return;
	}
	/* FEATURES_OK sticks only for a subset of ours that includes VERSION_1. */
	if ((v & VIRTIO_CONFIG_S_FEATURES_OK) && !(t->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
		if ((t->driver_features & ~device_features(t)) ||
		    !virtio_has_feature(t, VIRTIO_F_VERSION_1))
			v &= ~(uint32_t)VIRTIO_CONFIG_S_FEATURES_OK;
	}
	if ((v & VIRTIO_CONFIG_S_DRIVER_OK) && !(t->status & VIRTIO_CONFIG_S_DRIVER_OK)) {
		if (!(v & VIRTIO_CONFIG_S_FEATURES_OK) ||
		    (t->ops->activate && t->ops->activate(t->dev))) {
			log_guest(LOG_WARN, "%s: driver set DRIVER_OK without a usable setup",
			          t->ops->name);
			v |= VIRTIO_CONFIG_S_NEEDS_RESET;
		}
	}
	t->status = v;
}

static void queue_set_ready(struct virtio_mmio *t, struct virtq *vq, uint32_t v)
{
	if (!v) {
		vq->ready = false;
		return;
	}
	vq->event_idx = virtio_has_feature(t, VIRTIO_RING_F_EVENT_IDX);
	vq->kick_when_empty = t->ops->kick_when_empty;
	if (virtq_enable(vq, &t->vm->mem))
		log_guest(LOG_WARN, "%s: queue %u refused: size %u or rings outside guest RAM",
		          t->ops->name, t->queue_sel, vq->size);
}

static uint32_t reg_read(struct virtio_mmio *t, uint64_t off)
{
	struct virtq *vq = virtio_queue(t, t->queue_sel);

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return 2;
	case VIRTIO_MMIO_DEVICE_ID:
		return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return MMIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return t->dev_feat_sel > 1
		               ? 0
		               : (uint32_t)(device_features(t) >> (32 * t->dev_feat_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return vq ? t->ops->queue_max : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		t->nr_status_reads++;
		return t->int_status;
	case VIRTIO_MMIO_STATUS:
		return t->status;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return t->config_gen;
	default:
		return 0;
	}
}

/* Sets the low or high half of a 64-bit queue address. */
static void set_half(uint64_t *v, uint32_t val, int high)
{
	*v = high ? (*v & 0xffffffffULL) | ((uint64_t)val << 32) : (*v & ~0xffffffffULL) | val;
}

static void reg_write(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	struct virtq *vq = virtio_queue(t, t->queue_sel);

	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		t->dev_feat_sel = v;
		return;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (t->drv_feat_sel <= 1 && !(t->status & VIRTIO_CONFIG_S_FEATURES_OK))
			set_half(&t->driver_features, v, t->drv_feat_sel == 1);
		return;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		t->drv_feat_sel = v;
		return;
	case VIRTIO_MMIO_QUEUE_SEL:
		t->queue_sel = v;
		return;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		/* Only without ioeventfd; the same work as the event loop's. */
		if (v < t->ops->nr_queues && t->ops->notify &&
		    (t->status & VIRTIO_CONFIG_S_DRIVER_OK))
			t->ops->notify(t->dev, v);
		return;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		t->int_status &= ~v;
		return;
	case VIRTIO_MMIO_STATUS:
		set_status(t, v);
		return;
	default:
		break;
	}
	/* Queue layout registers: only while that queue is disabled. */
	if (!vq || vq->ready) {
		if (off != VIRTIO_MMIO_QUEUE_READY || !vq)
			return;
	}
	switch (off) {
	case VIRTIO_MMIO_QUEUE_NUM:
		vq->size = v <= t->ops->queue_max ? (uint16_t)v : 0;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		queue_set_ready(t, vq, v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		set_half(&vq->desc_gpa, v, off == VIRTIO_MMIO_QUEUE_DESC_HIGH);
		break;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
		set_half(&vq->avail_gpa, v, off == VIRTIO_MMIO_QUEUE_AVAIL_HIGH);
		break;
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH:
		set_half(&vq->used_gpa, v, off == VIRTIO_MMIO_QUEUE_USED_HIGH);
		break;
	default:
		log_guest(LOG_DEBUG, "%s: write to unknown register %#llx", t->ops->name,
		          (unsigned long long)off);
		break;
	}
}

static void mmio_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	struct virtio_mmio *t = dev;

	memset(data, 0, len);
	virtio_lock(t);
	if (off >= VIRTIO_MMIO_CONFIG) {
		uint64_t c = off - VIRTIO_MMIO_CONFIG;

		if (c + len <= t->ops->config_size && t->ops->config_read)
			t->ops->config_read(t->dev, (uint32_t)c, data, len);
	} else if (len == 4 && off % 4 == 0) {
		uint32_t v = reg_read(t, off);

		memcpy(data, &v, 4);
	}
	virtio_unlock(t);
}

static void mmio_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct virtio_mmio *t = dev;

	virtio_lock(t);
	if (off >= VIRTIO_MMIO_CONFIG) {
		uint64_t c = off - VIRTIO_MMIO_CONFIG;

		if (c + len <= t->ops->config_size && t->ops->config_write)
			t->ops->config_write(t->dev, (uint32_t)c, data, len);
	} else if (len == 4 && off % 4 == 0) {
		uint32_t v;

		memcpy(&v, data, 4);
		reg_write(t, off, v);
	} else {
		log_guest(LOG_DEBUG, "%s: %u-byte write at register %#llx ignored", t->ops->name,
		          len, (unsigned long long)off);
	}
	virtio_unlock(t);
}

static const struct bus_ops mmio_ops = {.read = mmio_read, .write = mmio_write};

static void notify_event(void *ctx, uint32_t events)
{
	struct notify_ctx *n = ctx;
	struct virtio_mmio *t = n->t;
	uint64_t v;

	(void)events;
	if (read(n->fd, &v, sizeof(v)) < 0)
		return;
	virtio_lock(t);
	t->nr_notify++;
	if ((t->status & VIRTIO_CONFIG_S_DRIVER_OK) && t->ops->notify)
		t->ops->notify(t->dev, n->q);
	virtio_unlock(t);
}

static int wire_queue_notify(struct virtio_mmio *t, unsigned q)
{
	struct notify_ctx *n = &t->notify[q];
	struct kvm_ioeventfd io = {
		.datamatch = q,
		.addr = t->base + VIRTIO_MMIO_QUEUE_NOTIFY,
		.len = 4,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
	};

	n->t = t;
	n->q = q;
	/* Without a VM (unit tests), QueueNotify reaches us as MMIO writes. */
	if (t->vm->vm_fd < 0)
		return 0;
	n->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->fd < 0)
		return -errno;
	io.fd = n->fd;
	if (ioctl(t->vm->vm_fd, KVM_IOEVENTFD, &io) < 0)
		return -errno;
	if (t->ops->notify_by_fd)
		return 0;
	return evloop_add(t->vm->loop, n->fd, EPOLLIN, notify_event, n);
}

int virtio_notify_fd(struct virtio_mmio *t, unsigned q)
{
	return q < t->ops->nr_queues ? t->notify[q].fd : -1;
}

void virtio_notify_take(struct virtio_mmio *t, unsigned q)
{
	uint64_t v;

	if (q >= t->ops->nr_queues || t->notify[q].fd < 0 ||
	    read(t->notify[q].fd, &v, sizeof(v)) < 0)
		return;
	virtio_lock(t);
	t->nr_notify++;
	virtio_unlock(t);
}

/* The transport and each queue, then the device's own part. */
static void mmio_dump(void *dev)
{
	struct virtio_mmio *t = dev;
	char line[256];

	virtio_lock(t);
	log_warn("%s at %#llx: status %#x, interrupt status %#x, %llu notifications, %llu "
	         "interrupts, %llu status reads",
	         t->ops->name, (unsigned long long)t->base, t->status, t->int_status,
	         (unsigned long long)t->nr_notify, (unsigned long long)t->nr_irq,
	         (unsigned long long)t->nr_status_reads);
	for (unsigned q = 0; q < t->ops->nr_queues; q++) {
		virtq_describe(&t->vqs[q], line, sizeof(line));
		log_warn("%s queue %u: %s", t->ops->name, q, line);
	}
	if (t->ops->dump)
		t->ops->dump(t->dev);
	virtio_unlock(t);
}

struct virtio_mmio *virtio_mmio_create(struct vm *vm, const struct virtio_dev_ops *ops, void *dev)
{
	char name[32];
	struct virtio_mmio *t;
	int ret;

	if (ops->nr_queues > MMIO_MAX_QUEUES || ops->queue_max > VIRTQ_MAX_SIZE) {
		log_err("%s: too many or too large queues", ops->name);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->raise_lock, NULL);
	t->vm = vm;
	t->ops = ops;
	t->dev = dev;
	for (unsigned q = 0; q < MMIO_MAX_QUEUES; q++)
		t->notify[q].fd = -1;
	ret = vm_claim_device_slot(vm, MMIO_WINDOW, &t->base, &t->irq);
	if (ret)
		goto err;
	ret = bus_register(&vm->mmio, t->base, MMIO_WINDOW, &mmio_ops, t);
	if (ret)
		goto err;
	for (unsigned q = 0; q < ops->nr_queues; q++) {
		ret = wire_queue_notify(t, q);
		if (ret)
			goto err;
	}
	ret = vm_cmdline_add(vm, "virtio_mmio.device=4K@%#llx:%u", (unsigned long long)t->base,
	                     t->irq);
	if (ret)
		goto err;
	snprintf(name, sizeof(name), "virtio@%llx", (unsigned long long)t->base);
	ret = vm_snap_register(vm, name, mmio_state_save, mmio_state_restore, t);
	if (!ret)
		ret = vm_dump_register(vm, mmio_dump, t);
	if (ret)
		goto err;
	return t;
err:
	log_err("%s: cannot set up its virtio-mmio transport: %s", ops->name, strerror(-ret));
	virtio_mmio_destroy(t);
	return NULL;
}

void virtio_mmio_destroy(struct virtio_mmio *t)
{
	if (!t)
		return;
	if (t->nr_notify || t->nr_irq)
		log_debug("%s: %llu notifications taken, %llu interrupts raised, %llu status reads",
		          t->ops->name, (unsigned long long)t->nr_notify,
		          (unsigned long long)t->nr_irq, (unsigned long long)t->nr_status_reads);
	for (unsigned q = 0; q < MMIO_MAX_QUEUES; q++) {
		if (t->notify[q].fd < 0)
			continue;
		if (!t->ops->notify_by_fd)
			evloop_del(t->vm->loop, t->notify[q].fd);
		close(t->notify[q].fd);
	}
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->raise_lock);
	free(t);
}
