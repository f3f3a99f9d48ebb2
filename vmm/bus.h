/* SPDX-License-Identifier: MIT */
#ifndef HUSK_BUS_H
#define HUSK_BUS_H

#include <stdint.h>

/*
 * An address space the guest reaches by trapping accesses: x86 port I/O or
 * MMIO. Devices register ranges before the vCPUs start; lookups then need
 * no lock. Each device serializes its own state.
 */
struct bus_ops {
	/* offset is relative to the registered base; len is 1, 2, 4 or 8. */
	void (*read)(void *dev, uint64_t offset, uint8_t *data, unsigned len);
	void (*write)(void *dev, uint64_t offset, const uint8_t *data, unsigned len);
};

#define BUS_MAX_RANGES 32

struct bus_range {
	uint64_t base, len;
	const struct bus_ops *ops;
	void *dev;
};

struct bus {
	const char *name;
	struct bus_range ranges[BUS_MAX_RANGES];
	int nr_ranges;
};

/* Adds [base, base+len); -EINVAL if empty or wrapping, -EBUSY on overlap, -ENOSPC when full. */
int bus_register(struct bus *bus, uint64_t base, uint64_t len, const struct bus_ops *ops, void *dev)
	__attribute__((warn_unused_result));

/*
 * Dispatches one access. Returns 0, or -ENOENT when no device claims the
 * whole access; reads then see all ones (what an empty ISA bus returns).
 */
int bus_access(const struct bus *bus, uint64_t addr, uint8_t *data, unsigned len, int is_write);

#endif
