// SPDX-License-Identifier: MIT
/* The router on huskd's own route table shapes (API.md §1 and §8). */
#include <errno.h>
#include <string.h>

#include "router.h"
#include "unit.h"

static void fn(struct http_req *r, const char *const *params, void *ctx)
{
	(void)r;
	(void)params;
	(void)ctx;
}

static const struct route routes[] = {
	{"POST", "/sandbox", fn, 0},
	{"GET", "/sandbox", fn, 0},
	{"GET", "/sandbox/:id", fn, 0},
	{"DELETE", "/sandbox/:id", fn, 0},
	{"GET", "/sandbox/runtimes", fn, 0},
	{"GET", "/sandbox/status/:id", fn, 0},
	{"POST", "/sandbox/:id/execute", fn, 0},
	{"GET", "/sandbox/snapshots", fn, 0},
	{"GET", "/sandbox/snapshots/lineage", fn, 0},
	{"GET", "/sandbox/snapshots/:snap", fn, 0},
	{"PATCH", "/sandbox/snapshots/:snap", fn, 0},
	{"DELETE", "/sandbox/snapshots/:snap", fn, 0},
	{"GET", "/sandbox/snapshots/public/:ref", fn, 0},
	{"POST", "/sandbox/snapshots/build", fn, 0},
	{"POST", "/sandbox/:id/snapshot", fn, 0},
	{"GET", "/sandbox/sandboxes/:id/jobs/:job", fn, 0},
	{"POST", "/sandbox/:id/checkpoint/:ck/restore", fn, 0},
	{"GET", "/fs/list/:id", fn, 0},
	{"GET", "/fs/:id", fn, 0},
	{"POST", "/fs/:id", fn, 0},
	{"POST", "/fs/upload/:id", fn, 0},
};
#define N (sizeof(routes) / sizeof(routes[0]))

static char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_LEN];

/* The pattern that method path lands on, or NULL (errno-style result in *err). */
static const char *match(const char *method, const char *path, int *err)
{
	const struct route *rt = NULL;

	*err = router_match(routes, N, method, path, &rt, params);
	return *err ? NULL : rt->pattern;
}

UNIT_TEST(router_literal_before_param)
{
	const char *p;
	int err;

	p = match("GET", "/sandbox/runtimes", &err);
	CHECK(p && !strcmp(p, "/sandbox/runtimes"));
	p = match("GET", "/sandbox/sbx_1", &err);
	CHECK(p && !strcmp(p, "/sandbox/:id") && !strcmp(params[0], "sbx_1"));
	p = match("GET", "/sandbox/snapshots/lineage", &err);
	CHECK(p && !strcmp(p, "/sandbox/snapshots/lineage"));
	p = match("GET", "/sandbox/snapshots/snp_9", &err);
	CHECK(p && !strcmp(p, "/sandbox/snapshots/:snap") && !strcmp(params[0], "snp_9"));
	/* Same length as /sandbox/:id/snapshot: the literal "snapshots" wins. */
	p = match("POST", "/sandbox/snapshots/build", &err);
	CHECK(p && !strcmp(p, "/sandbox/snapshots/build"));
	p = match("POST", "/sandbox/sbx_2/snapshot", &err);
	CHECK(p && !strcmp(p, "/sandbox/:id/snapshot") && !strcmp(params[0], "sbx_2"));
	p = match("GET", "/fs/list/sbx_3", &err);
	CHECK(p && !strcmp(p, "/fs/list/:id"));
	p = match("GET", "/fs/sbx_3", &err);
	CHECK(p && !strcmp(p, "/fs/:id"));
	p = match("POST", "/sandbox/sbx_1/checkpoint/ck_2/restore", &err);
	CHECK(p && !strcmp(params[0], "sbx_1") && !strcmp(params[1], "ck_2") && !params[2][0]);
	p = match("GET", "/sandbox/sandboxes/sbx_1/jobs/job_7", &err);
	CHECK(p && !strcmp(params[0], "sbx_1") && !strcmp(params[1], "job_7"));
}

UNIT_TEST(router_decoding_and_slashes)
{
	const char *p;
	int err;

	p = match("GET", "/sandbox/snapshots/public/%40org%2Fname%3Atag", &err);
	CHECK(p && !strcmp(params[0], "@org/name:tag"));
	p = match("GET", "//sandbox", &err);
	CHECK(p && !strcmp(p, "/sandbox"));
	p = match("GET", "///sandbox/sbx_1", &err);
	CHECK(p && !strcmp(params[0], "sbx_1"));
	/* Decoding comes after splitting: %2F is not a separator. */
	p = match("GET", "/sandbox/a%2Fb", &err);
	CHECK(p && !strcmp(p, "/sandbox/:id") && !strcmp(params[0], "a/b"));
	/* A literal may arrive encoded. */
	p = match("GET", "/sandbox/%72untimes", &err);
	CHECK(p && !strcmp(p, "/sandbox/runtimes"));
	/* Empty segments, NUL bytes and overlong parameters match nothing. */
	CHECK(!match("GET", "/sandbox/", &err) && err == -ENOENT);
	CHECK(!match("GET", "/sandbox//x", &err) && err == -ENOENT);
	CHECK(!match("GET", "/sandbox/a%00b", &err) && err == -ENOENT);
	{
		char path[600] = "/sandbox/";

		memset(path + 9, 'x', 300);
		CHECK(!match("GET", path, &err) && err == -ENOENT);
		memset(path + 9, 'x', 255);
		path[9 + 255] = '\0';
		CHECK(match("GET", path, &err) && strlen(params[0]) == 255);
	}
	CHECK(!match("GET", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n", &err) && err == -ENOENT);
}

UNIT_TEST(router_404_vs_405)
{
	char allow[64];
	const char *p;
	int err;

	CHECK(!match("GET", "/nope", &err) && err == -ENOENT);
	CHECK(!match("GET", "/sandbox/sbx_1/execute/more", &err) && err == -ENOENT);
	CHECK(!match("PUT", "/sandbox", &err) && err == -EPERM);
	CHECK(router_allow(routes, N, "/sandbox", allow, sizeof(allow)) == 2);
	CHECK(!strcmp(allow, "POST, GET"));
	/* The literal resource has no DELETE: 405, not a sandbox named "runtimes". */
	CHECK(!match("DELETE", "/sandbox/runtimes", &err) && err == -EPERM);
	CHECK(router_allow(routes, N, "/sandbox/runtimes", allow, sizeof(allow)) == 1);
	CHECK(!strcmp(allow, "GET"));
	CHECK(!match("GET", "/sandbox/sbx_1/execute", &err) && err == -EPERM);
	CHECK(router_allow(routes, N, "/sandbox/snapshots/x", allow, sizeof(allow)) == 3);
	CHECK(!strcmp(allow, "GET, PATCH, DELETE"));
	CHECK(router_allow(routes, N, "/nope", allow, sizeof(allow)) == 0 && !allow[0]);
	/* HEAD is served by GET routes. */
	p = match("HEAD", "/sandbox/sbx_1", &err);
	CHECK(p && !strcmp(p, "/sandbox/:id"));
	CHECK(!match("HEAD", "/sandbox/sbx_1/execute", &err) && err == -EPERM);
}
