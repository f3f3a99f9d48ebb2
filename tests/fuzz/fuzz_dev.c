// SPDX-License-Identifier: MIT
/* The fuzz targets' VM of virtio devices (fuzz_dev.h). */
#include "fuzz_dev.h"

#include <fcntl.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "evloop.h"
#include "virtio/blk.h"
#include "virtio/rng.h"
#include "virtio/vsock.h"
#include "virtio_tb.h"

static struct fdev F = {.vm = {.vm_fd = -1, .stop_fd = -1}, .listen_fd = -1};
static int made;

static uint32_t reg_read(struct fdev *f, uint64_t base, uint64_t off)
{
	uint32_t v = 0;

	bus_access(&f->vm.mmio, base + off, (uint8_t *)&v, 4, 0);
	return v;
}

static int listen_at(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64))
		return -1;
	return fd;
}

/* The disk's image, opened as husk-vmm opens it (on the opener's thread). */
static struct img *open_disk(const struct blk_spec *spec)
{
	struct blk_images bi;
	struct img *img = NULL;

	if (blk_images_start(&bi, spec, 1) == 0)
		img = blk_images_take(&bi, 0);
	blk_images_close(&bi);
	return img;
}

static int make(struct fdev *f)
{
	char disk[] = "/tmp/husk-fuzz-disk-XXXXXX", uds[108], port[120];
	struct blk_spec spec = {.format = IMG_FMT_RAW, .serial = "fuzz"};
	int fd = mkstemp(disk);

	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		return -1;
	close(fd);
	spec.path = disk;
	if (guest_mem_init(&f->vm.mem, FDEV_MEM))
		return -1;
	f->vm.loop = evloop_create();
	snprintf(uds, sizeof(uds), "/tmp/husk-fuzz-vsock-%d", getpid());
	snprintf(port, sizeof(port), "%s_1234", uds);
	if (!f->vm.loop || !virtio_rng_create(&f->vm) ||
	    !virtio_blk_create(&f->vm, &spec, open_disk(&spec)) || !vsock_create(&f->vm, 3, uds))
		return -1;
	unlink(disk); /* the device holds it open */
	f->listen_fd = listen_at(port);
	/* Slots in order of creation; each device says what it is. */
	for (unsigned i = 0; i < FDEV_COUNT; i++) {
		f->base[i] = 0xd0000000ULL + 0x10000ULL * i;
		if (reg_read(f, f->base[i], VIRTIO_MMIO_MAGIC_VALUE) != 0x74726976)
			return -1;
	}
	f->queues[0] = 1;
	f->queues[1] = 1;
	f->queues[2] = 3;
	return f->listen_fd < 0 ? -1 : 0;
}

struct fdev *fdev_get(void)
{
	if (!made)
		made = make(&F) == 0 ? 1 : -1;
	return made == 1 ? &F : NULL;
}

void fdev_reset(struct fdev *f)
{
	int c;

	for (unsigned i = 0; i < FDEV_COUNT; i++)
		tb_mmio_write(&f->vm, f->base[i], VIRTIO_MMIO_STATUS, 0);
	while ((c = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(c);
	for (int i = 0; i < 4 && evloop_run_once(f->vm.loop, 0) > 0; i++)
		;
}

/* Queue memory: descriptor tables (pointing mostly into guest RAM) and avail rings. */
static size_t queues(struct fdev *f, unsigned d, const uint8_t *data, size_t size,
                     struct tb_queue *q)
{
	size_t used = 0;

	memset(gpa_ptr(&f->vm.mem, 0, FDEV_BUF_GPA), 0, FDEV_BUF_GPA);
	for (unsigned i = 0; i < f->queues[d]; i++) {
		uint64_t base = 0x10000 + 0x3000ULL * i;
		struct vring_desc *desc = gpa_ptr(&f->vm.mem, base, 16 * FDEV_QSZ);

		q[i] = (struct tb_queue){
			.desc = base, .avail = base + 0x1000, .used = base + 0x2000};
		if (size - used < FDEV_RING_BYTES)
			break;
		memcpy(desc, data + used, 16 * FDEV_QSZ);
		/* Mostly inside guest RAM, so the walk gets past the bounds check. */
		for (int j = 0; j < FDEV_QSZ; j++)
			if (!(desc[j].addr & (1ull << 63)))
				desc[j].addr = FDEV_BUF_GPA + (desc[j].addr & 0x3fffff);
		memcpy(gpa_ptr(&f->vm.mem, q[i].avail, 4 + 2 * FDEV_QSZ),
		       data + used + 16 * FDEV_QSZ, 4 + 2 * FDEV_QSZ);
		used += FDEV_RING_BYTES;
	}
	return used;
}

size_t fdev_drive(struct fdev *f, unsigned d, const uint8_t *data, size_t size)
{
	struct tb_queue q[3] = {0};
	uint64_t base = f->base[d];
	size_t used;
	int ops = 0;

	if (size < 1)
		return 0;
	used = 1 + queues(f, d, data + 1, size - 1, q);
	tb_virtio_up_with(&f->vm, base, (1ull << VIRTIO_F_VERSION_1) | ((uint64_t)data[0] << 24),
	                  f->queues[d], FDEV_QSZ, q);
	for (; used + 6 <= size && ops < 256; used += 6, ops++) {
		const uint8_t *o = data + used;
		uint32_t v;

		memcpy(&v, o + 2, 4);
		switch (o[0] % 7) {
		case 0: /* any register, any value */
			tb_mmio_write(&f->vm, base, (uint64_t)(o[1] & 0x7f) << 2, v);
			break;
		case 1:
			reg_read(f, base, (uint64_t)(o[1] & 0x7f) << 2);
			break;
		case 2:
			tb_mmio_write(&f->vm, base, VIRTIO_MMIO_QUEUE_NOTIFY, o[1] % 4);
			break;
		case 3:
			evloop_run_once(f->vm.loop, 0);
			break;
		case 4: /* the guest changes a buffer between kicks: 2 bytes at a 24-bit offset */
			memcpy(gpa_ptr(&f->vm.mem, FDEV_BUF_GPA + ((v >> 8) & 0x3ffffe), 2), o + 1,
			       2);
			break;
		case 5: /* and an avail ring entry or its index */
			*(uint16_t *)gpa_ptr(&f->vm.mem,
			                     q[o[1] % 3].avail + 2 * (o[2] % (FDEV_QSZ + 2)), 2) =
				(uint16_t)(v >> 16);
			break;
		default: /* the driver starts over */
			tb_virtio_up_with(&f->vm, base, (1ull << VIRTIO_F_VERSION_1) | v,
			                  f->queues[d], FDEV_QSZ, q);
			break;
		}
	}
	return used;
}
