// SPDX-License-Identifier: MIT
/* The seccomp allowlist of each VMM thread role, for the build-time generator (confine_gen.c). */
#ifndef HUSK_CONFINE_RULES_H
#define HUSK_CONFINE_RULES_H

#include <seccomp.h>
#include <stdbool.h>

#include "confine.h"

/* Adds role's rules to ctx (and the sanitizers' runtime needs with sanitized): 0 or -errno. */
int confine_rules_add(scmp_filter_ctx ctx, enum confine_role role, bool sanitized);

#endif
