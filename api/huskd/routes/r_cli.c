// SPDX-License-Identifier: MIT
/*
 * The reference CLI's own lookups (API.md §5.12), which its hosted service
 * serves beside the sandbox API: GET /cli/sandbox (a short list) and GET
 * /cli/sandbox/{id} (resolve an id). A key sees its own org's sandboxes, as
 * everywhere else in huskd; another org's id is NOT_FOUND, as the client
 * expects of an id it cannot resolve.
 */
#include <string.h>

#include "r_int.h"

static json_t *str_or_null(json_t *v)
{
	return json_is_string(v) ? json_incref(v) : json_null();
}

ROUTE(r_cli_list)
{
	struct routes *rt = ctx;
	struct list_query_bufs b;
	struct sbx_list_query q;
	struct sbx_err err;
	json_t *out = NULL, *list, *v;
	size_t i;

	(void)p;
	if (list_query(r, &b, &q))
		return;
	if (sbx_list(rt->m, &q, &out, &err)) {
		reply_error(r, &err, S_SANDBOX);
		return;
	}
	list = json_array();
	json_array_foreach(json_object_get(out, "sandboxes"), i, v)
	{
		json_t *org = json_object_get(v, "org");

		json_array_append_new(
			list,
			json_pack("{sOsosososososOsoso}", "id", json_object_get(v, "sandboxId"),
		                  "name", str_or_null(json_object_get(v, "name")), "description",
		                  str_or_null(json_object_get(v, "description")), "status",
		                  str_or_null(json_object_get(v, "status")), "region",
		                  str_or_null(json_object_get(v, "region")), "createdAt",
		                  str_or_null(json_object_get(v, "createdAt")), "orgId",
		                  json_object_get(org, "id"), "orgName",
		                  str_or_null(json_object_get(org, "name")), "projectId",
		                  str_or_null(json_object_get(v, "projectId"))));
	}
	api_ok(r, 200,
	       json_pack("{soso}", "sandboxes", list, "total",
	                 json_incref(json_object_get(out, "total"))));
	json_decref(out);
}

ROUTE(r_cli_resolve)
{
	struct routes *rt = ctx;
	const char *org = caller_org(r);
	struct sbx_err err;
	json_t *info = NULL;

	if (!org || sbx_owned(rt->m, SBX_KIND_SANDBOX, p[0], org) ||
	    sbx_get(rt->m, p[0], &info, &err)) {
		api_error(r, 404, "NOT_FOUND", "sandbox %s not found", p[0]);
		return;
	}
	api_ok(r, 200,
	       json_pack("{sOsososOsOso}", "id", json_object_get(info, "sandboxId"), "name",
	                 str_or_null(json_object_get(info, "name")), "region",
	                 json_string(json_string_value(json_object_get(info, "region")) ?: "local"),
	                 "status", json_object_get(info, "status"), "orgId",
	                 json_object_get(json_object_get(info, "org"), "id"), "projectId",
	                 str_or_null(json_object_get(info, "projectId"))));
	json_decref(info);
}
