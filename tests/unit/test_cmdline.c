// SPDX-License-Identifier: MIT
#include <string.h>

#include "cmdline.h"
#include "unit.h"

UNIT_TEST(agent_cmdline_values)
{
	char v[64];

	CHECK(cmdline_get("console=ttyS0 husk.cmd=nproc quiet", "husk.cmd", v, sizeof(v)) == 5);
	CHECK(strcmp(v, "nproc") == 0);
	CHECK(cmdline_get("a husk.cmd=\"echo hi; exit 7\" b", "husk.cmd", v, sizeof(v)) == 15);
	CHECK(strcmp(v, "echo hi; exit 7") == 0);
	/* The kernel also accepts the whole parameter quoted. */
	CHECK(cmdline_get("\"husk.cmd=a b\"", "husk.cmd", v, sizeof(v)) == 3);
	CHECK(strcmp(v, "a b") == 0);
	CHECK(cmdline_get("husk.cmd=1 husk.cmd=2\n", "husk.cmd", v, sizeof(v)) == 1);
	CHECK(strcmp(v, "2") == 0);
	CHECK(cmdline_get("husk.cmd= x", "husk.cmd", v, sizeof(v)) == 0);
	CHECK(strcmp(v, "") == 0);
}

UNIT_TEST(agent_cmdline_absent_or_too_long)
{
	char v[4];

	CHECK(cmdline_get("", "husk.cmd", v, sizeof(v)) == -1);
	CHECK(cmdline_get("husk.cmdx=1 xhusk.cmd=2 husk.cmd", "husk.cmd", v, sizeof(v)) == -1);
	CHECK(cmdline_get("husk.cmd=toolong", "husk.cmd", v, sizeof(v)) == -2);
	CHECK(cmdline_get("husk.cmd=\"unterminated", "husk.cmd", v, sizeof(v)) == -2);
	CHECK(cmdline_get("husk.cmd=\"", "husk.cmd", v, sizeof(v)) == 0);
}
