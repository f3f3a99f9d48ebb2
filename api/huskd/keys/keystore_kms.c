// SPDX-License-Identifier: MIT
/*
 * The KMS hook (keystore.h): an operator's command that wraps, unwraps and
 * deletes org keys in a key service huskd never sees the org keys of. It
 * runs as `CMD OP ORG`, its input on stdin, one line of answer on stdout;
 * exit status 0 is success, 3 "this org's key is deleted", anything else a
 * failure whose first line of stderr is the message. It runs while huskd
 * waits, so it must be quick; one that takes longer than KMS_TIMEOUT_MS is
 * killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keystore.h"

#define KMS_TIMEOUT_MS 30000
#define KMS_STATUS_DELETED 3

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Feeds in to fds[0], reads fds[1] into out and fds[2] into msg, until both close or time's up. */
static int exchange(int fds[3], const char *in, char *out, size_t outlen, char *msg, size_t msglen)
{
	size_t inlen = strlen(in), sent = 0, got = 0, mgot = 0;
	long long until = now_ms() + KMS_TIMEOUT_MS;
	int open_fds = 2;

	if (!inlen) {
		close(fds[0]);
		fds[0] = -1;
	}
	while (open_fds > 0) {
		struct pollfd p[3] = {
			{fds[0], POLLOUT, 0}, {fds[1], POLLIN, 0}, {fds[2], POLLIN, 0}};
		long long left = until - now_ms();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(p, 3, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (fds[0] >= 0 && p[0].revents) {
			n = write(fds[0], in + sent, inlen - sent);
			if (n > 0)
				sent += (size_t)n;
			if (n < 0 || sent == inlen) {
				close(fds[0]);
				fds[0] = -1;
			}
		}
		for (int i = 1; i <= 2; i++) {
			char *buf = i == 1 ? out : msg;
			size_t *at = i == 1 ? &got : &mgot, cap = i == 1 ? outlen : msglen;
			char sink[256];

			if (fds[i] < 0 || !p[i].revents)
				continue;
			/* Past the answer's room the rest is read and dropped: an answer too long
			 * fails. */
			n = *at + 1 < cap ? read(fds[i], buf + *at, cap - 1 - *at)
			                  : read(fds[i], sink, sizeof(sink));
			if (n > 0 && *at + 1 < cap)
				*at += (size_t)n;
			else if (n > 0 && i == 1)
				got = outlen;
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
				close(fds[i]);
				fds[i] = -1;
				open_fds--;
			}
		}
	}
	if (got >= outlen)
		return -E2BIG;
	out[got] = '\0';
	msg[mgot < msglen ? mgot : msglen - 1] = '\0';
	return 0;
}

int keystore_kms_run(const char *cmd, const char *op, const char *org, const char *in, char *out,
                     size_t outlen, char *err, size_t errlen)
{
	int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, fds[3], st = 0, rc;
	char msg[512] = "";
	pid_t pid;

	if (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 ||
	    pipe2(err_p, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0) {
		dup2(in_p[0], STDIN_FILENO);
		dup2(out_p[1], STDOUT_FILENO);
		dup2(err_p[1], STDERR_FILENO);
		signal(SIGPIPE, SIG_DFL);
		execl(cmd, cmd, op, org, (char *)NULL);
		_exit(127);
	}
	close(in_p[0]);
	close(out_p[1]);
	close(err_p[1]);
	fds[0] = in_p[1];
	fds[1] = out_p[0];
	fds[2] = err_p[0];
	/* huskd ignores SIGPIPE: a command that does not read its input makes write() fail, no
	 * more. */
	for (int i = 0; i < 3; i++)
		fcntl(fds[i], F_SETFL, O_NONBLOCK);
	rc = exchange(fds, in, out, outlen, msg, sizeof(msg));
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rc == -ETIMEDOUT)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	msg[strcspn(msg, "\n")] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	if (rc) {
		snprintf(err, errlen, "the KMS command (%s %s %s) %s", cmd, op, org,
		         rc == -ETIMEDOUT ? "did not answer in 30 s" : "answered too much");
		return rc;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == KMS_STATUS_DELETED) {
		snprintf(err, errlen, "the KMS says the key of org %s has been deleted%s%s", org,
		         msg[0] ? ": " : "", msg);
		return -ENOKEY;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		snprintf(err, errlen, "the KMS command (%s %s %s) failed (status %d)%s%s", cmd, op,
		         org, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
		         msg[0] ? ": " : "", msg);
		return -EIO;
	}
	if (strcmp(op, "delete") && !out[0]) {
		snprintf(err, errlen, "the KMS command (%s %s %s) answered nothing", cmd, op, org);
		return -EIO;
	}
	return 0;
fail:
	snprintf(err, errlen, "cannot run the KMS command %s: %s", cmd, strerror(-rc));
	for (int i = 0; i < 2; i++) {
		if (in_p[i] >= 0)
			close(in_p[i]);
		if (out_p[i] >= 0)
			close(out_p[i]);
		if (err_p[i] >= 0)
			close(err_p[i]);
	}
	return rc;
}
