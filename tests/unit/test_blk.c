// SPDX-License-Identifier: MIT
/*
 * virtio-blk driven as a guest driver drives it (MMIO registers, one queue
 * in a synthetic guest memory) over a raw image in a temporary file, with
 * the requests a hostile guest could make besides the honest ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "virtio/blk.h"
#include "virtio/virtq.h"
#include "virtio_tb.h"
#include "vm.h"

#define MiB (1ULL << 20)
#define QSZ 16
#define BASE 0xd0000000ULL
#define HDR_GPA 0x100000ULL
#define DATA_GPA 0x200000ULL
#define STATUS_GPA 0x600000ULL
#define DISK_BYTES (4ULL << 20)

struct tb {
	struct vm vm;
	struct virtio_blk *dev;
	struct blk_images images;
	uint64_t desc, avail, used;
	uint16_t next_desc;
	char path[64];
};

static void w32(struct tb *t, uint64_t off, uint32_t v)
{
	tb_mmio_write(&t->vm, BASE, off, v);
}

static uint32_t r32(struct tb *t, uint64_t off)
{
	uint32_t v = 0;

	bus_access(&t->vm.mmio, BASE + off, (uint8_t *)&v, 4, 0);
	return v;
}

static void *gmem(struct tb *t, uint64_t gpa, size_t len)
{
	return gpa_ptr(&t->vm.mem, gpa, len);
}

static int tb_init(struct tb *t, const char *name, const char *opts)
{
	char arg[128], err[256];
	struct blk_spec spec;

	memset(t, 0, sizeof(*t));
	t->vm.vm_fd = -1;
	t->vm.stop_fd = -1;
	snprintf(t->path, sizeof(t->path), "/tmp/husk-blk-test-%d-%s", getpid(), name);
	if (truncate(t->path, 0) < 0 && errno != ENOENT)
		return -1;
	FILE *f = fopen(t->path, "w");
	if (!f || ftruncate(fileno(f), DISK_BYTES) < 0)
		return -1;
	fclose(f);
	if (guest_mem_init(&t->vm.mem, 8 * MiB))
		return -1;
	t->vm.loop = evloop_create();
	snprintf(arg, sizeof(arg), "%s,format=raw%s", t->path, opts);
	if (blk_spec_parse(arg, &spec, err, sizeof(err)))
		return -1;
	/* As husk-vmm does: opened on the opener's thread, then made a device. */
	if (blk_images_start(&t->images, &spec, 1))
		return -1;
	t->dev = virtio_blk_create(&t->vm, &spec, blk_images_take(&t->images, 0));
	blk_images_close(&t->images);
	if (!t->dev)
		return -1;
	t->desc = 0x10000;
	t->avail = 0x11000;
	t->used = 0x12000;
	tb_virtio_up(&t->vm, BASE, 1, QSZ,
	             &(struct tb_queue){.desc = t->desc, .avail = t->avail, .used = t->used});
	return 0;
}

static void tb_free(struct tb *t)
{
	virtio_blk_destroy(t->dev);
	evloop_destroy(t->vm.loop);
	guest_mem_free(&t->vm.mem);
	free(t->vm.device_cmdline);
	unlink(t->path);
}

struct seg {
	uint64_t gpa;
	uint32_t len;
	int writable;
};

/* Offers one chain, kicks, and returns the used length (-1: not used). */
static int64_t submit(struct tb *t, const struct seg *s, int n)
{
	struct vring_avail *a = gmem(t, t->avail, 4 + 2 * QSZ);
	struct vring_used *u = gmem(t, t->used, 4 + 8 * QSZ);
	uint16_t head = t->next_desc % QSZ, before = u->idx;

	for (int i = 0; i < n; i++) {
		uint16_t idx = (uint16_t)(t->next_desc++ % QSZ);
		struct vring_desc *d = gmem(t, t->desc + 16ULL * idx, 16);

		*d = (struct vring_desc){
			.addr = s[i].gpa,
			.len = s[i].len,
			.flags = (uint16_t)((s[i].writable ? VRING_DESC_F_WRITE : 0) |
		                            (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
			.next = (uint16_t)(t->next_desc % QSZ),
		};
	}
	a->ring[a->idx % QSZ] = head;
	a->idx++;
	w32(t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	if (u->idx == before)
		return -1;
	return u->ring[before % QSZ].len;
}

/* One IN/OUT request: header, data, status; returns the status byte. */
static int rw(struct tb *t, uint32_t type, uint64_t sector, uint32_t len)
{
	struct virtio_blk_outhdr *h = gmem(t, HDR_GPA, sizeof(*h));
	uint8_t *status = gmem(t, STATUS_GPA, 1);
	struct seg s[3] = {
		{HDR_GPA, sizeof(*h), 0},
		{DATA_GPA, len, type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID},
		{STATUS_GPA, 1, 1},
	};

	*h = (struct virtio_blk_outhdr){.type = type, .sector = sector};
	*status = 0xee;
	if (len)
		return submit(t, s, 3) < 0 ? -1 : *status;
	s[1] = s[2];
	return submit(t, s, 2) < 0 ? -1 : *status;
}

UNIT_TEST(blk_write_then_read)
{
	struct tb t;
	uint8_t *data;

	CHECK(tb_init(&t, "rw", "") == 0);
	CHECK(r32(&t, VIRTIO_MMIO_DEVICE_ID) == 2);
	CHECK(r32(&t, VIRTIO_MMIO_CONFIG) == DISK_BYTES / 512); /* capacity, low half */
	data = gmem(&t, DATA_GPA, 8192);
	for (int i = 0; i < 8192; i++)
		data[i] = (uint8_t)(i * 7);
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, 10, 8192) == VIRTIO_BLK_S_OK);
	CHECK(rw(&t, VIRTIO_BLK_T_FLUSH, 0, 0) == VIRTIO_BLK_S_OK);
	memset(data, 0, 8192);
	CHECK(rw(&t, VIRTIO_BLK_T_IN, 10, 8192) == VIRTIO_BLK_S_OK);
	for (int i = 0; i < 8192; i++)
		CHECK(data[i] == (uint8_t)(i * 7));
	/* Past the device's 1 MiB write gathering: the seam must not show. */
	data = gmem(&t, DATA_GPA, 3 * MiB / 2);
	for (size_t i = 0; i < 3 * MiB / 2; i++)
		data[i] = (uint8_t)(i / 4096 + i);
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, 1, 3 * MiB / 2) == VIRTIO_BLK_S_OK);
	memset(data, 0, 3 * MiB / 2);
	CHECK(rw(&t, VIRTIO_BLK_T_IN, 1, 3 * MiB / 2) == VIRTIO_BLK_S_OK);
	for (size_t i = 0; i < 3 * MiB / 2; i++)
		CHECK(data[i] == (uint8_t)(i / 4096 + i));
	tb_free(&t);
}

UNIT_TEST(blk_refuses_out_of_range)
{
	struct tb t;
	const uint64_t sectors = DISK_BYTES / 512;

	CHECK(tb_init(&t, "range", "") == 0);
	CHECK(rw(&t, VIRTIO_BLK_T_IN, sectors - 1, 512) == VIRTIO_BLK_S_OK);
	CHECK(rw(&t, VIRTIO_BLK_T_IN, sectors - 1, 1024) == VIRTIO_BLK_S_IOERR);
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, sectors, 512) == VIRTIO_BLK_S_IOERR);
	/* sector << 9 would wrap to a small offset */
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, (1ULL << 55) + 1, 512) == VIRTIO_BLK_S_IOERR);
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, UINT64_MAX, 512) == VIRTIO_BLK_S_IOERR);
	/* not whole sectors */
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, 0, 100) == VIRTIO_BLK_S_IOERR);
	tb_free(&t);
}

UNIT_TEST(blk_readonly_refuses_writes)
{
	struct tb t;

	CHECK(tb_init(&t, "ro", ",ro") == 0);
	CHECK(r32(&t, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO));
	CHECK(rw(&t, VIRTIO_BLK_T_OUT, 0, 512) == VIRTIO_BLK_S_IOERR);
	CHECK(rw(&t, VIRTIO_BLK_T_IN, 0, 512) == VIRTIO_BLK_S_OK);
	CHECK(rw(&t, VIRTIO_BLK_T_FLUSH, 0, 0) == VIRTIO_BLK_S_OK);
	tb_free(&t);
}

UNIT_TEST(blk_get_id_and_unknown_type)
{
	struct tb t;
	char *id;

	CHECK(tb_init(&t, "id", ",serial=disk-7") == 0);
	id = gmem(&t, DATA_GPA, VIRTIO_BLK_ID_BYTES);
	memset(id, 'x', VIRTIO_BLK_ID_BYTES);
	CHECK(rw(&t, VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES) == VIRTIO_BLK_S_OK);
	CHECK(strcmp(id, "disk-7") == 0);
	CHECK(rw(&t, VIRTIO_BLK_T_DISCARD, 0, 16) == VIRTIO_BLK_S_UNSUPP);
	tb_free(&t);
}

UNIT_TEST(blk_malformed_chains)
{
	struct tb t;
	struct seg no_status[2] = {{HDR_GPA, 16, 0}, {DATA_GPA, 512, 0}};
	struct seg short_hdr[2] = {{HDR_GPA, 8, 0}, {STATUS_GPA, 1, 1}};
	struct seg outside[3] = {{HDR_GPA, 16, 0}, {8 * MiB - 256, 512, 1}, {STATUS_GPA, 1, 1}};
	CHECK(tb_init(&t, "bad", "") == 0);
	/* Nowhere to put a status: returned used, with nothing written. */
	CHECK(submit(&t, no_status, 2) == 0);
	/* A header cut short is an error, reported in the status byte. */
	*(uint8_t *)gmem(&t, STATUS_GPA, 1) = 0xee;
	CHECK(submit(&t, short_hdr, 2) == 1);
	CHECK(*(uint8_t *)gmem(&t, STATUS_GPA, 1) == VIRTIO_BLK_S_IOERR);
	/* A buffer past guest RAM: the walker refuses the chain. */
	CHECK(submit(&t, outside, 3) == 0);
	/* The device still works. */
	CHECK(rw(&t, VIRTIO_BLK_T_IN, 0, 512) == VIRTIO_BLK_S_OK);
	tb_free(&t);
}

UNIT_TEST(blk_spec_parser)
{
	struct blk_spec s;
	char err[256];
	char a[] = "/x/disk.qcow2,ro,serial=abc", b[] = "/x/d.raw,format=raw", c[] = "/x/d,bogus",
	     d[] = "", e[] = "/x/d,serial=123456789012345678901";

	CHECK(blk_spec_parse(a, &s, err, sizeof(err)) == 0);
	CHECK(s.readonly && !strcmp(s.serial, "abc") && s.format == IMG_FMT_AUTO);
	CHECK(!strcmp(s.path, "/x/disk.qcow2"));
	CHECK(blk_spec_parse(b, &s, err, sizeof(err)) == 0 && s.format == IMG_FMT_RAW);
	CHECK(blk_spec_parse(c, &s, err, sizeof(err)) == -EINVAL && strstr(err, "bogus"));
	CHECK(blk_spec_parse(d, &s, err, sizeof(err)) == -EINVAL);
	CHECK(blk_spec_parse(e, &s, err, sizeof(err)) == -EINVAL);
}

/* The opener's failure (a missing file) reaches the device's maker; images nothing took close. */
UNIT_TEST(blk_images_open_and_fail)
{
	char a[] = "/nonexistent/husk-blk-missing.raw,format=raw", b[64], c[64];
	struct blk_spec spec[2];
	struct blk_images bi;
	char err[256];
	int fd;

	CHECK(blk_spec_parse(a, &spec[0], err, sizeof(err)) == 0);
	CHECK(blk_images_start(&bi, spec, 1) == 0);
	CHECK(blk_images_take(&bi, 0) == NULL);
	CHECK(bi.ret == -ENOENT && bi.failed == 0);
	CHECK(blk_images_take(&bi, 0) == NULL); /* logged once, still a failure */
	blk_images_close(&bi);

	snprintf(b, sizeof(b), "/tmp/husk-blk-test-%d-a,format=raw", getpid());
	snprintf(c, sizeof(c), "/tmp/husk-blk-test-%d-b,format=raw,ro", getpid());
	for (int i = 0; i < 2; i++) {
		char *path = i ? c : b;

		*strchr(path, ',') = '\0';
		fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
		CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
		close(fd);
		path[strlen(path)] = ',';
		CHECK(blk_spec_parse(path, &spec[i], err, sizeof(err)) == 0);
	}
	CHECK(blk_images_start(&bi, spec, 2) == 0);
	struct img *img = blk_images_take(&bi, 1);
	CHECK(img && img_size(img) == 1 << 20);
	CHECK(blk_images_take(&bi, 1) == NULL); /* taken: the caller's now */
	CHECK(img_close(img) == 0);
	blk_images_close(&bi); /* closes disk 0, never taken */
	CHECK(bi.n == 0);
	unlink(spec[0].path);
	unlink(spec[1].path);

	CHECK(blk_images_start(&bi, spec, BLK_MAX_DISKS + 1) == -EINVAL);
}
