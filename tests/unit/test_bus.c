// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "bus.h"
#include "unit.h"

struct fake {
	uint64_t last_off;
	unsigned last_len;
	uint8_t last_byte;
	int writes;
};

static void fake_read(void *dev, uint64_t off, uint8_t *data, unsigned len)
{
	struct fake *f = dev;

	f->last_off = off;
	f->last_len = len;
	memset(data, 0x42, len);
}

static void fake_write(void *dev, uint64_t off, const uint8_t *data, unsigned len)
{
	struct fake *f = dev;

	f->last_off = off;
	f->last_len = len;
	f->last_byte = data[0];
	f->writes++;
}

static const struct bus_ops fake_ops = {fake_read, fake_write};

UNIT_TEST(bus_dispatch_and_overlap)
{
	struct bus b = {.name = "test"};
	struct fake f = {0};
	uint8_t data[8];

	CHECK(bus_register(&b, 0x3f8, 8, &fake_ops, &f) == 0);
	CHECK(bus_register(&b, 0x3ff, 1, &fake_ops, &f) == -EBUSY);
	CHECK(bus_register(&b, 0x3f0, 9, &fake_ops, &f) == -EBUSY);
	CHECK(bus_register(&b, 0x3f0, 8, &fake_ops, &f) == 0);
	CHECK(bus_register(&b, 0, 0, &fake_ops, &f) == -EINVAL);
	CHECK(bus_register(&b, UINT64_MAX, 2, &fake_ops, &f) == -EINVAL);

	data[0] = 'x';
	CHECK(bus_access(&b, 0x3f8, data, 1, 1) == 0);
	CHECK(f.writes == 1 && f.last_off == 0 && f.last_byte == 'x');
	CHECK(bus_access(&b, 0x3fd, data, 1, 0) == 0);
	CHECK(f.last_off == 5 && data[0] == 0x42);
	/* An access that runs off the end of a device is not the device's. */
	CHECK(bus_access(&b, 0x3fe, data, 4, 0) == -ENOENT);
	CHECK(data[0] == 0xff && data[3] == 0xff);
	CHECK(bus_access(&b, 0x80, data, 1, 1) == -ENOENT);
	CHECK(f.writes == 1);
}

UNIT_TEST(bus_fills_up)
{
	struct bus b = {.name = "test"};
	struct fake f = {0};
	int ret = 0;

	for (int i = 0; i < BUS_MAX_RANGES; i++)
		ret |= bus_register(&b, (uint64_t)i * 16, 16, &fake_ops, &f);
	CHECK(ret == 0);
	CHECK(bus_register(&b, 0x10000, 16, &fake_ops, &f) == -ENOSPC);
}
