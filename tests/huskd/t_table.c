// SPDX-License-Identifier: MIT
/*
 * The transition table: every move it allows is made, every other refused
 * with the state left as it was. The allowed moves are written out here
 * again, from the design (api/huskd/README.md), so a change to the table
 * shows up as a failing test, not as a silent new behaviour.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sbx_test.h"

#define B(s) (1u << (s))
#define UP (B(SBX_IDLE) | B(SBX_RUNNING))

static const uint32_t allowed[SBX_NSTATES] = {
	[SBX_CREATING] = B(SBX_BOOTING) | B(SBX_RESTORING) | B(SBX_ADOPTING) | B(SBX_PAUSED) |
                         B(SBX_STOPPING),
	[SBX_BOOTING] = UP | B(SBX_STOPPING),
	[SBX_RESTORING] = UP | B(SBX_POOLED) | B(SBX_STOPPING),
	[SBX_POOLED] = B(SBX_RESTORING) | B(SBX_STOPPING),
	[SBX_ADOPTING] = UP | B(SBX_STOPPING),
	[SBX_IDLE] = B(SBX_RUNNING) | B(SBX_PAUSING) | B(SBX_STOPPING),
	[SBX_RUNNING] = B(SBX_IDLE) | B(SBX_STOPPING),
	[SBX_PAUSING] = B(SBX_PAUSED) | UP | B(SBX_STOPPING),
	[SBX_PAUSED] = B(SBX_RESUMING) | B(SBX_FREEZING) | B(SBX_REBOOTING) | B(SBX_STOPPING),
	[SBX_FREEZING] = B(SBX_PAUSED) | B(SBX_RESUMING) | B(SBX_REBOOTING) | B(SBX_STOPPING),
	[SBX_RESUMING] = UP | B(SBX_PAUSED) | B(SBX_STOPPING),
	[SBX_REBOOTING] = UP | B(SBX_STOPPING),
	[SBX_STOPPING] = B(SBX_GONE),
	[SBX_GONE] = 0,
};

/* A sandbox of our own in state from: no VMM, no agent, no record. */
static struct sandbox *bare(enum sbx_state from, int n)
{
	char id[STORE_ID_LEN];
	struct sandbox *sb;

	snprintf(id, sizeof(id), "sbx_table%03d", n);
	sb = sbx_new(T.m, id);
	if (sb) {
		sbx_hold(sb);
		sb->state = from;
		sb->end_status = "terminated";
	}
	return sb;
}

static void let_go(struct sandbox *sb)
{
	sbx_state_forget(sb);
	sbx_drop(sb);
}

void t_table(void)
{
	unsigned legal = 0, refused = 0, wrong = 0, n = 0;
	char why[512] = "";
	/* Every refusal is logged as a bug: here they are the point, not news. */
	int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);

	if (null >= 0)
		dup2(null, STDERR_FILENO);

	for (int from = 0; from < SBX_NSTATES; from++) {
		for (int to = 0; to < SBX_NSTATES; to++) {
			bool want = allowed[from] & B(to);
			struct sandbox *sb = bare(from, n++);
			int rc;

			if (sbx_can(from, to) != want && !wrong++)
				snprintf(why, sizeof(why), "the table says %s -> %s is %s",
				         sbx_state_name(from), sbx_state_name(to),
				         want ? "refused" : "allowed");
			rc = sbx_to(sb, to, "table test", NULL);
			if (want) {
				/* STOPPING with no VMM to wait for goes on to GONE at once. */
				enum sbx_state end = to == SBX_STOPPING ? SBX_GONE : to;

				if (rc || sb->state != end) {
					if (!wrong++)
						snprintf(why, sizeof(why),
						         "%s -> %s: rc %d, state %s",
						         sbx_state_name(from), sbx_state_name(to),
						         rc, sbx_state_name(sb->state));
				} else {
					legal++;
				}
			} else if (rc != -EINVAL || sb->state != (enum sbx_state)from) {
				if (!wrong++)
					snprintf(why, sizeof(why),
					         "%s -> %s was not refused: rc %d, state %s",
					         sbx_state_name(from), sbx_state_name(to), rc,
					         sbx_state_name(sb->state));
			} else {
				refused++;
			}
			let_go(sb);
		}
	}
	t_check("table_legal_moves_made", legal > 0 && !wrong, "%u made; %s", legal, why);
	t_check("table_illegal_moves_refused", refused > 0 && !wrong, "%u refused; %s", refused,
	        why);
	if (saved >= 0)
		dup2(saved, STDERR_FILENO);
	if (saved >= 0)
		close(saved);
	if (null >= 0)
		close(null);
	for (int st = 0; st < SBX_STOPPING; st++)
		if (!sbx_can(st, SBX_STOPPING) && !wrong++)
			snprintf(why, sizeof(why), "%s cannot stop", sbx_state_name(st));
	t_check("table_every_state_can_stop", !wrong && !sbx_can(SBX_GONE, SBX_STOPPING), "%s",
	        why);
}
