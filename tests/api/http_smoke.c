// SPDX-License-Identifier: MIT
/*
 * The HTTP layer over real sockets: starts http-echo (ASan build) with short
 * timeouts and small limits, runs each test against it and prints
 * "PASS http/name" or "FAIL http/name: why". At the end the server must stop
 * on SIGTERM with exit status 0 (no leak, no sanitizer report).
 * usage: http-smoke PATH-TO-HTTP-ECHO
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http_smoke.h"

int port;
static char sock_path[64];
char failure[512];
static int passed, failed;

void report(const char *name)
{
	if (failure[0]) {
		printf("FAIL http/%s: %s\n", name, failure);
		failed++;
	} else {
		printf("PASS http/%s\n", name);
		passed++;
	}
	failure[0] = '\0';
	fflush(stdout);
}

/* GET path on c, expecting 200 and needle in the body. */
int get_ok(struct hconn *c, const char *path, const char *needle)
{
	char req[512];
	struct hresp r;
	int ok;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
	if (hc_sends(c, req) || hc_read(c, &r, WAIT_MS))
		return 0;
	ok = r.status == 200 && strstr(r.body, needle);
	hr_free(&r);
	return ok;
}

static void t_keepalive(void)
{
	struct hconn c;
	char q[32];

	CHECK(hc_tcp(&c, port) == 0);
	for (int i = 0; i < 5; i++) {
		snprintf(q, sizeof(q), "/echo?i=%d", i);
		CHECK(get_ok(&c, q, q + 6));
	}
	CHECK(get_ok(&c, "/echo?orgId=o&v=2", "\"success\":true"));
out:
	hc_close(&c);
	report("keepalive");
}

static void t_pipelining(void)
{
	struct hconn c;
	struct hresp r[3] = {0};

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /slow?ms=200&n=1 HTTP/1.1\r\n\r\nGET /echo?n=2 HTTP/1.1\r\n\r\n"
	                   "POST /echo?n=3 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi") == 0);
	for (int i = 0; i < 3; i++)
		CHECK(hc_read(&c, &r[i], WAIT_MS) == 0 && r[i].status == 200);
	CHECK(strstr(r[0].body, "n=1") && strstr(r[1].body, "n=2") && strstr(r[2].body, "n=3"));
	CHECK(strstr(r[2].body, "\"body\":\"hi\""));
out:
	for (int i = 0; i < 3; i++)
		hr_free(&r[i]);
	hc_close(&c);
	report("pipelining_in_order");
}

static void t_chunked_request(void)
{
	struct hconn c;
	struct hresp r = {0};

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c,
	               "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n") ==
	      0);
	usleep(50000);
	CHECK(hc_sends(&c, "4\r\ndefg\r\n0\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200);
	CHECK(strstr(r.body, "\"len\":7") && strstr(r.body, "\"body\":\"abcdefg\""));
out:
	hr_free(&r);
	hc_close(&c);
	report("chunked_request");
}

/* "\"fnv\":\"HASH\"" of n bytes at p, as http-echo answers it, into out. */
static const char *fnv(const char *p, size_t n, char out[200])
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
	snprintf(out, 200, "\"fnv\":\"%016llx\"", (unsigned long long)h);
	return out;
}

/*
 * Bodies over the server's --spool-over (4096) wait in an unlinked file, not
 * in memory: one declared by its length, and a chunked one that crosses the
 * threshold midway (what came before moves into the file). Both reach the
 * handler whole.
 */
static void t_spooled_bodies(void)
{
	static char big[300001], two[6001], head[200];
	struct hconn c;
	struct hresp r = {0};

	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('a' + i * 7 % 26);
	memcpy(two, big, sizeof(two) - 1);
	CHECK(hc_tcp(&c, port) == 0);
	snprintf(head, sizeof(head), "POST /echo HTTP/1.1\r\nContent-Length: %zu\r\n\r\n",
	         sizeof(big) - 1);
	CHECK(hc_sends(&c, head) == 0 && hc_sends(&c, big) == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200);
	CHECK(strstr(r.body, "\"len\":300000") && strstr(r.body, fnv(big, 300000, head)));
	hr_free(&r);
	CHECK(hc_sends(&c, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nbb8\r\n") ==
	      0);
	CHECK(hc_send(&c, two, 3000) == 0 && hc_sends(&c, "\r\nbb8\r\n") == 0);
	CHECK(hc_send(&c, two + 3000, 3000) == 0 && hc_sends(&c, "\r\n0\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200);
	CHECK(strstr(r.body, "\"len\":6000") && strstr(r.body, fnv(two, 6000, head)));
out:
	hr_free(&r);
	hc_close(&c);
	report("spooled_bodies");
}

static void t_expect_continue(void)
{
	struct hconn c;
	struct hresp r = {0};
	char req[256];

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c,
	               "PUT /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n") ==
	      0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 100);
	hr_free(&r);
	CHECK(hc_sends(&c, "hello") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 200 && strstr(r.body, "hello"));
	hr_free(&r);
	hc_close(&c);

	/* Too big: 413 at once; the client never has to send the body. */
	CHECK(hc_tcp(&c, port) == 0);
	snprintf(req, sizeof(req),
	         "PUT /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
	         MAX_BODY + 1);
	CHECK(hc_sends(&c, req) == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 413);
	CHECK(strstr(r.body, "PAYLOAD_TOO_LARGE"));
out:
	hr_free(&r);
	hc_close(&c);
	report("expect_100_continue");
}

static void t_oversized_body(void)
{
	static char junk[256 * 1024];
	struct hconn c, other;
	struct hresp r = {0};
	char req[256], v[32];

	other.fd = -1;
	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_tcp(&other, port) == 0);
	snprintf(req, sizeof(req), "POST /echo HTTP/1.1\r\nContent-Length: %d\r\n\r\n",
	         3 * MAX_BODY);
	CHECK(hc_sends(&c, req) == 0);
	/* The client goes on sending; the server answers and drains. */
	hc_send(&c, junk, sizeof(junk));
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 413);
	CHECK(strstr(r.body, "\"success\":false") && strstr(r.body, "PAYLOAD_TOO_LARGE"));
	CHECK(hr_header(&r, "Content-Type", v, sizeof(v)) && !strcmp(v, "application/json"));
	CHECK(hr_header(&r, "Connection", v, sizeof(v)) && !strcmp(v, "close"));
	hr_free(&r);
	CHECK(get_ok(&other, "/echo?still=1", "still=1"));
	hc_close(&c);

	/* Chunked: refused at the chunk that crosses the limit. */
	CHECK(hc_tcp(&c, port) == 0);
	snprintf(req, sizeof(req),
	         "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", MAX_BODY + 1);
	CHECK(hc_sends(&c, req) == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 413);
	CHECK(get_ok(&other, "/echo?still=2", "still=2"));
out:
	hr_free(&r);
	hc_close(&c);
	hc_close(&other);
	report("oversized_body_413");
}

static void t_header_too_big(void)
{
	struct hconn c;
	struct hresp r = {0};
	char *big = malloc(20000);

	CHECK(big && hc_tcp(&c, port) == 0);
	memset(big, 'x', 19999);
	big[19999] = '\0';
	CHECK(hc_sends(&c, "GET /echo HTTP/1.1\r\nX-Big: ") == 0);
	hc_sends(&c, big);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 431);
	CHECK(strstr(r.body, "HEADERS_TOO_LARGE"));
out:
	free(big);
	hr_free(&r);
	hc_close(&c);
	report("header_too_big_431");
}

static void t_slow_client_408(void)
{
	struct hconn c;
	struct hresp r = {0};
	long long t0 = now_ms(), dt;

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "GET /echo HTTP/1.1\r\nHo") == 0);
	/*
	 * Trickling bytes does not extend the deadline: the 408 comes while
	 * they still trickle (were it extended by each byte, it never would).
	 */
	for (long long end = now_ms() + WAIT_MS;
	     now_ms() < end && hc_fill(&c, REQ_TIMEOUT / 5) == -ETIMEDOUT;)
		hc_sends(&c, "s");
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 408);
	dt = now_ms() - t0;
	CHECK(dt >= REQ_TIMEOUT - 50 && dt < WAIT_MS);
	CHECK(strstr(r.body, "REQUEST_TIMEOUT"));
	CHECK(hc_wait_eof(&c, WAIT_MS) == 0);
out:
	hr_free(&r);
	hc_close(&c);
	report("slow_client_408");
}

static void t_idle_timeout(void)
{
	struct hconn c;
	long long t0;

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(get_ok(&c, "/echo", "\"success\":true"));
	t0 = now_ms();
	CHECK(hc_wait_eof(&c, IDLE_TIMEOUT + WAIT_MS) == 0);
	CHECK(now_ms() - t0 >= IDLE_TIMEOUT - 50);
out:
	hc_close(&c);
	report("idle_timeout_closes");
}

static void t_unix_socket(void)
{
	struct hconn c;

	CHECK(hc_unix(&c, sock_path) == 0);
	CHECK(get_ok(&c, "/echo?unix=1", "unix=1"));
	CHECK(get_ok(&c, "//echo?slash=2", "slash=2"));
out:
	hc_close(&c);
	report("unix_socket");
}

static void t_malformed(void)
{
	struct hconn c;
	struct hresp r = {0};

	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "BLAH /echo HTTP/1.1\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 400 &&
	      strstr(r.body, "INVALID_REQUEST"));
	CHECK(hc_wait_eof(&c, WAIT_MS) == 0);
	hr_free(&r);
	hc_close(&c);
	/* Routing errors are JSON too. */
	CHECK(hc_tcp(&c, port) == 0);
	CHECK(hc_sends(&c, "DELETE /echo HTTP/1.1\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 405 &&
	      strstr(r.head, "\r\nAllow: GET, POST, PUT\r\n"));
	hr_free(&r);
	CHECK(hc_sends(&c, "GET /nope HTTP/1.1\r\n\r\n") == 0);
	CHECK(hc_read(&c, &r, WAIT_MS) == 0 && r.status == 404 && strstr(r.body, "NOT_FOUND"));
out:
	hr_free(&r);
	hc_close(&c);
	report("malformed_400_and_routing_errors");
}

/*
 * Starts bin listening on TCP port 0 and unix_path; *port_out gets its port,
 * or -1 if it printed none (it failed: the pid is still returned to reap).
 */
static pid_t spawn_server(const char *bin, const char *unix_path, int *port_out)
{
	char b[32], rt[32], it[32], mc[32], line[64] = "";
	int fds[2];
	pid_t pid;
	FILE *f;

	*port_out = -1;
	snprintf(b, sizeof(b), "%d", MAX_BODY);
	snprintf(rt, sizeof(rt), "%d", REQ_TIMEOUT);
	snprintf(it, sizeof(it), "%d", IDLE_TIMEOUT);
	snprintf(mc, sizeof(mc), "%d", MAX_CONNS);
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		/* If the tests die, the server must too: it holds the suite's output pipe. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(bin, bin, "--port", "0", "--unix", unix_path, "--max-body", b, "--max-header",
		      "8192", "--request-timeout", rt, "--idle-timeout", it, "--max-conns", mc,
		      "--spool-dir", "/tmp", "--spool-over", "4096", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (f && fgets(line, sizeof(line), f) && sscanf(line, "port %d", port_out) != 1)
		*port_out = -1;
	if (f)
		fclose(f);
	return pid;
}

/* SIGTERM to pid; its exit status, or -1 if it did not stop within 10 s. */
static int stop_server(pid_t pid)
{
	int status = -1;

	kill(pid, SIGTERM);
	for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(100000);
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return status;
}

static void t_unix_stale_and_live(const char *bin)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char stale[sizeof(sock_path) + 8];
	struct hconn c;
	int fd, p2 = -1, status;
	pid_t pid;

	c.fd = -1;
	/* A live socket is not taken over: the second server fails. */
	pid = spawn_server(bin, sock_path, &p2);
	CHECK(pid > 0 && p2 == -1);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	CHECK(hc_unix(&c, sock_path) == 0 && get_ok(&c, "/echo?alive=1", "alive=1"));
	hc_close(&c);
	/* A stale one (its server died without removing it) is replaced. */
	snprintf(stale, sizeof(stale), "%s.stale", sock_path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", stale);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	close(fd);
	pid = spawn_server(bin, stale, &p2);
	CHECK(pid > 0 && p2 > 0);
	CHECK(hc_unix(&c, stale) == 0 && get_ok(&c, "/echo?stale=1", "stale=1"));
	hc_close(&c);
	CHECK(stop_server(pid) == 0 && access(stale, F_OK) != 0);
out:
	hc_close(&c);
	unlink(stale);
	report("unix_socket_stale_replaced_live_kept");
}

int main(int argc, char **argv)
{
	struct rlimit rl = {1024, 1024};
	struct hconn pending;
	int status = -1;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: http-smoke PATH-TO-HTTP-ECHO\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setrlimit(RLIMIT_NOFILE, &rl);
	snprintf(sock_path, sizeof(sock_path), "/tmp/husk-http-smoke.%d.sock", (int)getpid());
	pid = spawn_server(argv[1], sock_path, &port);
	if (pid < 0 || port < 0) {
		printf("FAIL http/start: the server did not start\n");
		return 1;
	}
	t_keepalive();
	t_pipelining();
	t_chunked_request();
	t_spooled_bodies();
	t_expect_continue();
	t_oversized_body();
	t_header_too_big();
	t_slow_client_408();
	t_idle_timeout();
	t_stream_incremental();
	t_stream_client_gone();
	t_stalled_reader();
	t_many_connections();
	t_max_connections();
	t_unix_socket();
	t_malformed();
	t_http10_and_big();
	t_unix_stale_and_live(argv[1]);
	t_cli_keeps_connection();

	/* Stop with a long-poll still open: its on_close runs, nothing leaks. */
	if (hc_tcp(&pending, port) == 0)
		hc_sends(&pending, "GET /slow?ms=60000 HTTP/1.1\r\n\r\n");
	usleep(100000);
	status = stop_server(pid);
	if (status == -1) {
		snprintf(failure, sizeof(failure), "did not stop on SIGTERM");
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(failure, sizeof(failure),
		         "exit status %d (see the sanitizer report above)", status);
	} else if (access(sock_path, F_OK) == 0) {
		snprintf(failure, sizeof(failure), "the Unix socket file was left behind");
	}
	hc_close(&pending);
	report("clean_stop");
	printf("http: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
