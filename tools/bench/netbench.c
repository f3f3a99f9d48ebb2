// SPDX-License-Identifier: MIT
/*
 * netbench: a guest's TCP to a server outside it, through whatever network
 * stack its VMM gives it. Runs inside a guest (static binary); prints one
 * line of key=value figures.
 *
 * usage: netbench ADDR PORT CONNECTS MIB
 * CONNECTS connections to ADDR:PORT, each timed from connect() to its
 * return (the handshake through the stack); then MIB MiB sent to PORT (the
 * server reads all and closes: timed to that close) and MIB MiB received
 * from PORT+1 (the server sends and closes).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(const char *addr, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "netbench: connect %s:%d: %s\n", addr, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	int port, n, fd;
	long long mib, left;
	double *ms, t0, tx, rx;
	ssize_t k;

	if (argc != 5) {
		fprintf(stderr, "usage: netbench ADDR PORT CONNECTS MIB\n");
		return 2;
	}
	port = atoi(argv[2]);
	n = atoi(argv[3]);
	mib = atoll(argv[4]);
	ms = calloc((size_t)(n > 0 ? n : 1), sizeof(*ms));
	if (!ms || n < 1 || mib < 1)
		return 2;
	for (int i = 0; i < n; i++) {
		t0 = now();
		fd = dial(argv[1], port);
		if (fd < 0)
			return 1;
		ms[i] = (now() - t0) * 1000;
		close(fd);
	}
	bench_sort(ms, n);
	/* Each phase named as it starts: a run that hangs shows where on the console. */
	fprintf(stderr, "netbench: %d connects done; sending %lld MiB\n", n, mib);
	/* Sent: timed until the server, having read everything, closes. */
	fd = dial(argv[1], port);
	if (fd < 0)
		return 1;
	memset(buf, 'x', sizeof(buf));
	t0 = now();
	for (left = mib << 20; left > 0; left -= k) {
		k = write(fd, buf, left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf));
		if (k <= 0) {
			fprintf(stderr, "netbench: send: %s\n", strerror(errno));
			return 1;
		}
	}
	shutdown(fd, SHUT_WR);
	while ((k = read(fd, buf, sizeof(buf))) > 0)
		;
	tx = now() - t0;
	close(fd);
	/* Received: the server sends MIB MiB and closes. */
	fprintf(stderr, "netbench: sent; receiving %lld MiB\n", mib);
	fd = dial(argv[1], port + 1);
	if (fd < 0)
		return 1;
	t0 = now();
	for (left = 0; (k = read(fd, buf, sizeof(buf))) > 0; left += k)
		;
	rx = now() - t0;
	close(fd);
	if (left != mib << 20) {
		fprintf(stderr, "netbench: received %lld bytes, want %lld\n", left, mib << 20);
		return 1;
	}
	printf("connect_p50_ms=%.3f connect_p99_ms=%.3f tx_mbs=%.1f rx_mbs=%.1f\n",
	       bench_pct(ms, n, 50), bench_pct(ms, n, 99), (double)(mib << 20) / tx / 1e6,
	       (double)(mib << 20) / rx / 1e6);
	return 0;
}
