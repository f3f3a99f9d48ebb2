/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VMM_CTL_H
#define HUSK_VMM_CTL_H

#include <stddef.h>

/*
 * Sends one command line to a husk-vmm control socket (husk-vmm --control,
 * vmm/control.h) and reads its one-line reply into reply (without the
 * newline) within timeout_ms. Returns 0 for an "OK ..." reply, -EPROTO for
 * "ERR ..." (the reason in reply), or -errno (-ETIMEDOUT, -ECONNREFUSED...).
 */
int vmm_ctl(const char *path, const char *cmd, char *reply, size_t len, int timeout_ms)
	__attribute__((warn_unused_result));

#endif
