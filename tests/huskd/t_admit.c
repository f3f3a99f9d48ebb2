// SPDX-License-Identifier: MIT
/*
 * The host's budget (sbx_admit.c): a create past --max-sandboxes is refused
 * with the limit and the flag named, nothing already running is touched; a
 * paused sandbox gives its share back and must find room again to resume.
 */
#include <string.h>

#include "sbx_test.h"

static unsigned running(void)
{
	unsigned n = 0;

	for (struct sandbox *sb = T.m->sandboxes; sb; sb = sb->next)
		n += sb->state != SBX_PAUSED && sb->state != SBX_GONE;
	return n;
}

void t_admission(void)
{
	unsigned before = T.m->cfg.max_sandboxes;
	char err[512] = "", want[64], id_a[STORE_ID_LEN] = "", id_b[STORE_ID_LEN] = "";
	struct t_done d = {0};
	const char *p;

	/* Room for one more than runs now. */
	T.m->cfg.max_sandboxes = running() + 1;
	snprintf(want, sizeof(want), "--max-sandboxes %u", T.m->cfg.max_sandboxes);
	p = t_create("{}", NULL, err, sizeof(err));
	if (!t_check("admit_within_budget", p && t_wait_state(p, SBX_IDLE), "%s", err))
		goto out;
	snprintf(id_a, sizeof(id_a), "%s", p);
	p = t_create("{}", NULL, err, sizeof(err));
	t_check("admit_past_budget_refused", !p && strstr(err, want) && t_state(id_a) == SBX_IDLE,
	        "want a refusal naming '%s': id %s, '%s'", want, p ? p : "none", err);

	/* Paused, it holds nothing: another fits, and then it cannot come back. */
	sbx_pause(T.m, id_a, t_done_cb, &d);
	t_wait_done(&d);
	t_done_reset(&d);
	p = t_create("{}", NULL, err, sizeof(err));
	if (t_check("admit_paused_frees_room", p && t_wait_state(p, SBX_IDLE), "%s", err))
		snprintf(id_b, sizeof(id_b), "%s", p);
	sbx_resume(T.m, id_a, t_done_cb, &d);
	t_check("admit_resume_past_budget_refused",
	        t_wait_done(&d) && !d.ok && d.fault == SBX_FULL && strstr(d.msg, want) &&
	                t_state(id_a) == SBX_PAUSED,
	        "%s; state %s", d.msg, sbx_state_name(t_state(id_a)));
	t_done_reset(&d);
	if (id_b[0])
		t_destroy(id_b);
	sbx_resume(T.m, id_a, t_done_cb, &d);
	t_check("admit_resume_with_room", t_wait_done(&d) && d.ok && t_state(id_a) == SBX_IDLE,
	        "%s", d.msg);
	t_done_reset(&d);
out:
	if (id_a[0])
		t_destroy(id_a);
	T.m->cfg.max_sandboxes = before;
}
