/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_CREATE_PLAN_H
#define HUSK_SBX_CREATE_PLAN_H

/* Inside the manager: a create's request checked and read (sbx_create_plan.c). */
#include <jansson.h>
#include <stdint.h>

#include "sbx_int.h"

/* resources (and the runtime's requirements): memory and disk in bytes (disk 0: the base's),
 * cpu in millicores. */
int sbx_plan_resources(json_t *res, json_t *rt_req, int64_t *mem, int64_t *millis, int64_t *disk,
                       struct sbx_err *err);
/* network: into sb (its NIC, ports, lists, egress rate); refused if this host gives none. */
int sbx_plan_network(struct sbx_mgr *m, json_t *body, struct sandbox *sb, struct sbx_err *err);
/* command, env, files and timeouts: into sb. */
int sbx_plan_limits(json_t *body, struct sandbox *sb, struct sbx_err *err);
/* The SandboxInfo to record for body's create of sb (mem in bytes), or NULL. */
json_t *sbx_plan_info(json_t *body, struct sandbox *sb, json_t *rt, int64_t mem);

#endif
