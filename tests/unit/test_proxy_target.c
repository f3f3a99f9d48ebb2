// SPDX-License-Identifier: MIT
/* Which sandbox port a request is for: by name under huskd's domain, or by path. */
#include <errno.h>
#include <string.h>

#include "r_target.h"
#include "unit.h"

UNIT_TEST(proxy_target_by_name)
{
	struct proxy_target t;

	CHECK(proxy_target("sbx-abc234-3000.sb.example:8080", "/x/y", "q=1", "sb.example", &t) ==
	      1);
	CHECK(!strcmp(t.id, "sbx_abc234") && t.port == 3000 && !t.by_path &&
	      !strcmp(t.path, "/x/y?q=1"));
	CHECK(proxy_target("SBX-ABC234-3000.SB.example", "/", "", "sb.example:80", &t) == 1 &&
	      !strcmp(t.id, "sbx_abc234")); /* names are case-insensitive, ids lower case */
	/* Not a sandbox's name: the API's own requests go on. */
	CHECK(proxy_target("sb.example", "/sandbox", "", "sb.example", &t) == 0);
	/* Any TCP port: which ones a sandbox serves is its own business (network.allPorts). */
	CHECK(proxy_target("sbx-abc-80.sb.example", "/", "", "sb.example", &t) == 1 &&
	      t.port == 80);
	CHECK(proxy_target("sbx-abc-0.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx-abc-99999.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx-abc-065536.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx--3000.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx-a_b-3000.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx-abc-3000.other.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("sbx-abc-3000.sb.example", "/", "", NULL, &t) == 0);
}

/* E2B's SDK: sandbox.getHost(port) is "<port>-<sandboxID>.<domain>". */
UNIT_TEST(proxy_target_e2b_host)
{
	struct proxy_target t;

	CHECK(proxy_target("8080-sbx_abc234.sb.example", "/x", "", "sb.example", &t) == 1);
	CHECK(!strcmp(t.id, "sbx_abc234") && t.port == 8080 && !t.by_path && !strcmp(t.path, "/x"));
	CHECK(proxy_target("80-SBX_Abc.sb.example:443", "/", "", "sb.example", &t) == 1 &&
	      !strcmp(t.id, "sbx_abc") && t.port == 80);
	CHECK(proxy_target("8080-sbx_.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("8080-sbx_a-b.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("-sbx_abc.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("0-sbx_abc.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("123456-sbx_abc.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("8080-xyz_abc.sb.example", "/", "", "sb.example", &t) == 0);
	CHECK(proxy_target("8080-sbx_abc.other.example", "/", "", "sb.example", &t) == 0);
}

/* E2B's SDK by E2B_DOMAIN alone: its API at api.D, envd at 49983-<id>.D. */
UNIT_TEST(proxy_e2b_prefix_by_host)
{
	CHECK(!strcmp(proxy_e2b_prefix("api.sb.example", "sb.example") ?: "", "/e2b"));
	CHECK(!strcmp(proxy_e2b_prefix("API.SB.example:443", "sb.example") ?: "", "/e2b"));
	CHECK(!strcmp(proxy_e2b_prefix("49983-sbx_abc.sb.example", "sb.example:8443") ?: "",
	              "/e2b/envd"));
	CHECK(!proxy_e2b_prefix("49983-.sb.example", "sb.example"));
	CHECK(!proxy_e2b_prefix("8080-sbx_abc.sb.example", "sb.example"));
	CHECK(!proxy_e2b_prefix("api.other.example", "sb.example"));
	CHECK(!proxy_e2b_prefix("xapi.sb.example", "sb.example"));
	CHECK(!proxy_e2b_prefix("sb.example", "sb.example"));
	CHECK(!proxy_e2b_prefix("api.sb.example", NULL));
	CHECK(!proxy_e2b_prefix(NULL, "sb.example"));
}

UNIT_TEST(proxy_target_by_path)
{
	static char longpath[9000];
	struct proxy_target t;

	CHECK(proxy_target("127.0.0.1:8371", "/p/sbx_abc/api/x", "a=b", NULL, &t) == 1);
	CHECK(!strcmp(t.id, "sbx_abc") && t.port == 0 && t.by_path &&
	      !strcmp(t.path, "/api/x?a=b"));
	CHECK(proxy_target(NULL, "/p/sbx_abc", "", NULL, &t) == 1 && !strcmp(t.path, "/"));
	CHECK(proxy_target(NULL, "/p/sbx_abc:8080/ws", "", NULL, &t) == 1 &&
	      !strcmp(t.id, "sbx_abc") && t.port == 8080 && !strcmp(t.path, "/ws"));
	CHECK(proxy_target(NULL, "/p/sbx_abc:80", "", NULL, &t) == 1 && t.port == 80 &&
	      !strcmp(t.path, "/"));
	CHECK(proxy_target(NULL, "/p/sbx_abc:/x", "", NULL, &t) == 0);
	CHECK(proxy_target(NULL, "/p/sbx_abc:x80/", "", NULL, &t) == 0);
	CHECK(proxy_target(NULL, "/p/sbx_abc:70000/", "", NULL, &t) == 0);
	CHECK(proxy_target(NULL, "/p/:80/", "", NULL, &t) == 0);
	CHECK(proxy_target(NULL, "/p/", "", NULL, &t) == 0);
	CHECK(proxy_target(NULL, "/pp/sbx_abc/", "", NULL, &t) == 0);
	/* A host that looked like a sandbox's name and was not leaves nothing behind:
	 * the path's sandbox gets its own port (the one it exposes), not the host's. */
	CHECK(proxy_target("8080-sbx_a!b.sb.example", "/p/sbx_abc/x", "", "sb.example", &t) == 1 &&
	      !strcmp(t.id, "sbx_abc") && t.port == 0 && t.by_path);
	CHECK(proxy_target("sbx-a_b-3000.sb.example", "/p/sbx_abc/x", "", "sb.example", &t) == 1 &&
	      !strcmp(t.id, "sbx_abc") && t.port == 0 && t.by_path);
	memcpy(longpath, "/p/sbx_abc/", 11);
	memset(longpath + 11, 'a', sizeof(longpath) - 12);
	CHECK(proxy_target(NULL, longpath, "", NULL, &t) == -ENAMETOOLONG);
}

UNIT_TEST(proxy_token_taken_from_query)
{
	struct proxy_target t;
	char tok[40];

	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "a=1&husk_token=abc&b=2", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 1 && !strcmp(tok, "abc") &&
	      !strcmp(t.path, "/x?a=1&b=2"));
	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "husk_token=abc", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 1 && !strcmp(t.path, "/x"));
	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "a=1&husk_token=", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 1 && !tok[0] && !strcmp(t.path, "/x?a=1"));
	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "husk_token=abc&b=2", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 1 && !strcmp(t.path, "/x?b=2"));
	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "xhusk_token=abc", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 0 && !strcmp(t.path, "/x?xhusk_token=abc"));
	CHECK(proxy_target(NULL, "/p/sbx_abc/x", "", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == 0);
	CHECK(proxy_target(NULL, "/p/sbx_abc/x",
	                   "husk_token=0123456789012345678901234567890123456789", NULL, &t) == 1);
	CHECK(proxy_take_token(&t, tok, sizeof(tok)) == -ENAMETOOLONG);
}
