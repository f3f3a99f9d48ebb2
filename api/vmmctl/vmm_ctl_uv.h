/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VMM_CTL_UV_H
#define HUSK_VMM_CTL_UV_H

/*
 * husk-vmm's control socket (vmm/control.h) from a libuv loop: one command,
 * one answer line, never blocking the loop (a snapshot may take minutes).
 */
#include <uv.h>

/*
 * Called once on the loop: rc 0 for "OK ...", -EPROTO for "ERR ..." (reply
 * holds the text after OK/ERR), -ETIMEDOUT, or -errno from the socket
 * (reply then says what failed).
 */
typedef void (*vmm_ctl_fn)(void *arg, int rc, const char *reply);

struct vmm_ctl;

/*
 * Sends cmd (one line, no newline) to the socket at path; *out (may be
 * NULL) gets the command, valid until fn runs. 0, or -errno with no callback.
 */
int vmm_ctl_send(uv_loop_t *loop, const char *path, const char *cmd, unsigned timeout_ms,
                 vmm_ctl_fn fn, void *arg, struct vmm_ctl **out)
	__attribute__((warn_unused_result));
/* Gives up on the answer: fn runs at once with -ECANCELED. */
void vmm_ctl_abort(struct vmm_ctl *c);

#endif
