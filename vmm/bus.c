// SPDX-License-Identifier: MIT
#include "bus.h"

#include <errno.h>
#include <string.h>

int bus_register(struct bus *bus, uint64_t base, uint64_t len, const struct bus_ops *ops, void *dev)
{
	if (len == 0 || base + len < base)
		return -EINVAL;
	for (int i = 0; i < bus->nr_ranges; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (base < r->base + r->len && r->base < base + len)
			return -EBUSY;
	}
	if (bus->nr_ranges == BUS_MAX_RANGES)
		return -ENOSPC;
	bus->ranges[bus->nr_ranges++] = (struct bus_range){base, len, ops, dev};
	return 0;
}

int bus_access(const struct bus *bus, uint64_t addr, uint8_t *data, unsigned len, int is_write)
{
	for (int i = 0; i < bus->nr_ranges; i++) {
		const struct bus_range *r = &bus->ranges[i];
		uint64_t off = addr - r->base;

		if (addr < r->base || off >= r->len || len > r->len - off)
			continue;
		if (is_write)
			r->ops->write(r->dev, off, data, len);
		else
			r->ops->read(r->dev, off, data, len);
		return 0;
	}
	if (!is_write)
		memset(data, 0xff, len);
	return -ENOENT;
}
