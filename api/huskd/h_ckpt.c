// SPDX-License-Identifier: MIT
/* Disk checkpoint endpoints (API.md §5.7 (26)-(29)); the work is in sbx_ckpt.c. */
#include <string.h>

#include "handlers.h"
#include "json_resp.h"

/* Names end up in file listings and logs: keep them plain. */
static bool name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;

	if (len == 0 || len > 64)
		return false;
	return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	       len;
}

HANDLER(h_ckpt_create)
{
	json_t *body = body_object(r);
	const char *name;

	if (!body)
		return;
	name = json_string_value(json_object_get(body, "name"));
	if (!name_ok(name))
		api_error(r, 400, "BAD_REQUEST",
		          "name must be 1 to 64 letters, digits, '.', '_' or '-', e.g. "
		          "before-upgrade");
	else
		sbx_checkpoint_create(ctx, r, p[0], name);
	json_decref(body);
}

HANDLER(h_ckpt_list)
{
	struct huskd *d = ctx;
	json_t *out = NULL;

	if (store_checkpoint_list(d->store, p[0], &out))
		api_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", p[0]);
	else
		api_ok(r, 200, out);
}

HANDLER(h_ckpt_restore)
{
	sbx_checkpoint_restore(ctx, r, p[0], p[1]);
}

HANDLER(h_ckpt_delete)
{
	struct huskd *d = ctx;
	int rc = store_checkpoint_delete(d->store, p[0], p[1]);

	if (rc)
		api_error(r, 404, "CHECKPOINT_NOT_FOUND", "sandbox %s has no checkpoint %s", p[0],
		          p[1]);
	else
		api_ok(r, 200, NULL);
}
