// SPDX-License-Identifier: MIT
/*
 * Which org a sandbox, execution or build belongs to: the routes ask before
 * they act, and another org's id is answered as one that does not exist.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sbx_int.h"

const char *sbx_info_org(json_t *info)
{
	const char *org = json_string_value(json_object_get(json_object_get(info, "org"), "id"));

	return org ? org : STORE_DEFAULT_ORG;
}

static int sandbox_owned(struct sbx_mgr *m, const char *id, const char *org)
{
	struct sandbox *sb = sbx_find(m, id);
	json_t *info = NULL;
	int rc;

	/* A live one answers from memory (every request asks): its record says the same. */
	if (sb && sb->stored)
		return sb->hidden || strcmp(sb->org, org) ? -ENOENT : 0;
	rc = store_sandbox_get(m->store, id, &info, NULL);

	if (rc == 0 && (sbx_info_hidden(info) || strcmp(sbx_info_org(info), org)))
		rc = -ENOENT;
	json_decref(info);
	return rc;
}

int sbx_owned(struct sbx_mgr *m, enum sbx_kind kind, const char *id, const char *org)
{
	char path[4200], sandbox[STORE_ID_LEN];
	struct sandbox *sb;
	json_t *rec = NULL;
	int rc = -ENOENT;

	switch (kind) {
	case SBX_KIND_SANDBOX:
		return sandbox_owned(m, id, org);
	case SBX_KIND_EXECUTION:
		if ((sb = sbx_exec_sandbox(m, id)))
			return sandbox_owned(m, sb->id, org);
		if (store_execution_get(m->store, id, &rec, NULL) == 0) {
			snprintf(sandbox, sizeof(sandbox), "%s",
			         json_string_value(json_object_get(rec, "sandboxId")) ?: "");
			rc = sandbox[0] ? sandbox_owned(m, sandbox, org) : -ENOENT;
		}
		break;
	case SBX_KIND_BUILD:
		/* A build's id is checked by the build's own code; an odd one matches nothing here.
		 */
		if (strlen(id) >= STORE_ID_LEN || strchr(id, '/') || id[0] == '.')
			return -ENOENT;
		snprintf(path, sizeof(path), "%s/builds/%s/request.json", m->cfg.state, id);
		rec = json_load_file(path, 0, NULL);
		if (rec)
			rc = strcmp(sbx_info_org(rec), org) ? -ENOENT : 0;
		break;
	}
	json_decref(rec);
	return rc;
}
