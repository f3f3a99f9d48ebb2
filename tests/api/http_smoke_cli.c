// SPDX-License-Identifier: MIT
/*
 * The CLI's HTTP client (api/cli/cli_http.h) against http-echo: requests one
 * after another on a kept connection, and a kept connection the server closed
 * while it sat idle replaced without the caller seeing it.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cli_http.h"
#include "http_smoke.h"

/* GET /echo?QUERY on *keep; whether it answered 200 with QUERY in the body. */
static int kept_get(struct cli_conn **keep, const struct cli_url *u, const char *query)
{
	char target[64];
	struct cli_req rq = {.method = "GET", .target = target, .timeout_ms = WAIT_MS};
	struct cli_resp r;
	int ok;

	snprintf(target, sizeof(target), "/echo?%s", query);
	ok = cli_http_do_on(keep, u, &rq, &r) == 0 && r.status == 200 && r.body &&
	     strstr(r.body, query);
	cli_resp_free(&r);
	return ok;
}

void t_cli_keeps_connection(void)
{
	struct cli_conn *keep = NULL, *first;
	struct cli_url u;
	char url[64], err[160];
	struct pollfd pf;
	int fd;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	CHECK(cli_url_parse(url, &u, err, sizeof(err)) == 0);
	CHECK(kept_get(&keep, &u, "n=1") && keep);
	first = keep;
	fd = cli_http_fd(keep);
	CHECK(kept_get(&keep, &u, "n=2") && keep == first && cli_http_fd(keep) == fd);
	/* The server ends it after its idle timeout: the next request takes a new one. */
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	CHECK(poll(&pf, 1, IDLE_TIMEOUT + WAIT_MS) == 1);
	CHECK(kept_get(&keep, &u, "n=3") && keep);
	CHECK(kept_get(&keep, &u, "n=4") && keep);
out:
	cli_http_close(keep);
	report("cli_keeps_connection");
}
